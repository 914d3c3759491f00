"""Active/standby on the real control plane: kill -9 the leader in the middle of a burst.

Two `koordqueue run` processes compete for one Lease (short timings: 3 s lease, 2 s renew
deadline, 0.5 s retry). 500 suspended Jobs go to 10 quotas of 40 CPUs (1 CPU each: 400 fit
at once); this test plays the kubelet and marks each resumed Job Complete, which releases
its quota so the rest are admitted. When about 100 units have been admitted, the leader gets
SIGKILL. Asserted from a watch of the QueueUnits (the history an operator's
`kubectl get queueunits -w` would show) and from the Lease:
- the standby takes the Lease over and every Job is admitted and finishes;
- no unit is admitted twice, and no quota ever holds more than it allows, at any moment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from koordqueue.kube.api import EVENT, JOB, KubeApi
from tests.e2e import kq
from tests.e2e.replay import History, admitted_peaks, complete, start_controller

JOBS = 500
QUOTAS = 10
CAPACITY = 40  # CPUs per quota; each Job asks 1
KILL_AFTER = 100  # admissions seen before the leader is killed


def start(kubeconfig: Path, lease: str, log: IO[str]) -> subprocess.Popen[str]:
    return start_controller(kubeconfig, log, lease=lease)


def holder(kubectl: Any, lease: str) -> str:
    found = kq.get(kubectl, "lease", lease, "koord-queue")
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def test_the_standby_takes_over_and_nothing_is_admitted_twice(
    kubectl: Any, kubeconfig: Path, api_client: Any, tmp_path: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("failover"))
    lease = kq.unique("kq-failover")
    api = KubeApi(api_client)
    quotas = [kq.unique("fo") for _ in range(QUOTAS)]
    for name in quotas:
        kubectl.apply(kq.quota(name, max_={"cpu": str(CAPACITY), "memory": "1Ti"}))
    logs = [open(tmp_path / f"controller-{i}.log", "w") for i in range(2)]  # noqa: SIM115
    procs = [start(kubeconfig, lease, logs[0])]
    try:
        first = kq.wait_for(lambda: holder(kubectl, lease), what="a leader", timeout=60)
        procs.append(start(kubeconfig, lease, logs[1]))
        leader_pid = int(first.rsplit("_", 1)[1])
        assert first.startswith(socket.gethostname()) and leader_pid == procs[0].pid
        time.sleep(2)  # the standby is up and polling the Lease
        assert holder(kubectl, lease) == first

        history = History(api_client, ns)
        history.start()
        completer = ThreadPoolExecutor(16)
        completing: set[str] = set()

        def complete_admitted() -> None:
            with history.lock:
                fresh = [n for n in history.on_admitted if n not in completing]
                completing.update(fresh)
            for name in fresh:
                completer.submit(complete, api, ns, name)

        bodies = [kq.job(f"job-{i:03d}", ns, quotas[i % QUOTAS], cpu="1", memory="1Mi")
                  for i in range(JOBS)]
        creator = ThreadPoolExecutor(8)
        created = creator.map(lambda b: api.create(JOB, b, ns), bodies)

        kq.wait_for(lambda: (complete_admitted(), history.admitted_seen >= KILL_AFTER)[1],
                    what=f"{KILL_AFTER} admissions before the kill", timeout=120)
        killed_at = time.monotonic()
        os.kill(leader_pid, signal.SIGKILL)
        procs[0].wait(10)

        new = kq.wait_for(lambda: (h := holder(kubectl, lease)) != first and h, timeout=60,
                          what="the standby holding the lease")
        takeover = time.monotonic() - killed_at
        assert int(str(new).rsplit("_", 1)[1]) == procs[1].pid
        list(created)  # every create call returned

        def all_done() -> bool:
            complete_admitted()
            final = history.final()
            return len(final) == JOBS and all(p == "Succeed" for p in final.values())

        kq.wait_for(all_done, timeout=240, interval=0.5, what="every Job admitted and finished",
                    state=lambda: sorted(set(history.final().values())))
        history.stop()
        completer.shutdown(wait=True)
        creator.shutdown(wait=True)
        print(f"takeover: {takeover:.1f} s after SIGKILL (lease 3 s)")
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)
        for log in logs:
            log.close()

    lease_obj = kq.get(kubectl, "lease", lease, "koord-queue")
    assert lease_obj is not None and lease_obj["spec"]["leaseTransitions"] >= 1

    # replay the history: at no moment may a quota hold more than it allows
    admissions, peak = admitted_peaks(history.changes)
    assert len(admissions) == JOBS
    twice = {u: n for u, n in admissions.items() if n != 1}
    assert not twice, f"admitted more than once: {json.dumps(twice)[:500]}"
    assert max(peak.values()) <= CAPACITY, dict(peak)
    assert set(peak) == set(quotas)


def events_by(api: KubeApi, namespace: str, instance: str) -> dict[str, int]:
    """Event name -> count, of the Events one controller process wrote in `namespace`."""
    return {
        e["metadata"]["name"]: int(e.get("count") or 1)
        for e in api.list_objects(EVENT, namespace)
        if e.get("reportingInstance") == instance
    }


def test_a_leader_paused_past_its_lease_writes_nothing_when_it_wakes_and_exits(
    kubectl: Any, kubeconfig: Path, api_client: Any, tmp_path: Path
) -> None:
    """SIGSTOP the leader for twice its lease; the standby takes over and admits; on SIGCONT
    the old leader's fence is already shut (its monotonic clock ran on while it was stopped):
    it must not admit anything, and it exits, as a client-go component does."""
    ns = kq.namespace(kubectl, kq.unique("fence"))
    lease = kq.unique("kq-fence")
    quota = kq.unique("fence")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "1Ti"}))
    api = KubeApi(api_client)
    logs = [open(tmp_path / f"controller-{i}.log", "w") for i in range(2)]  # noqa: SIM115
    procs = [start(kubeconfig, lease, logs[0])]
    history = History(api_client, ns)
    history.start()
    try:
        first = kq.wait_for(lambda: holder(kubectl, lease), what="a leader", timeout=60)
        procs.append(start(kubeconfig, lease, logs[1]))
        for i in range(2):
            api.create(JOB, kq.job(f"before-{i}", ns, quota, cpu="1", memory="1Mi"), ns)
        kq.wait_for(lambda: history.admitted_seen >= 2, what="two admitted by the leader")

        os.kill(procs[0].pid, signal.SIGSTOP)
        new = kq.wait_for(lambda: (h := holder(kubectl, lease)) != first and h, timeout=60,
                          what="the standby holding the lease")
        assert int(str(new).rsplit("_", 1)[1]) == procs[1].pid
        for i in range(6):  # 2 more fit (4 CPUs); 4 wait
            api.create(JOB, kq.job(f"after-{i}", ns, quota, cpu="1", memory="1Mi"), ns)
        kq.wait_for(lambda: history.admitted_seen >= 4, what="two more admitted by the new leader")
        time.sleep(3)  # the paused leader has now been stopped for well over its 3 s lease

        old_instance = f"{socket.gethostname()}-{procs[0].pid}"  # Events' reportingInstance
        written_before = events_by(api, ns, old_instance)
        os.kill(procs[0].pid, signal.SIGCONT)
        code = procs[0].wait(30)  # it finds the lease gone and exits
        time.sleep(2)  # anything it might still have sent would be in the history by now
        assert holder(kubectl, lease) == new  # (the new leader releases it when it stops)
        # not one Event (nor a count bump) from the woken process: its writes were fenced
        assert events_by(api, ns, old_instance) == written_before
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.terminate()
                proc.wait(30)
        history.stop()
        for log in logs:
            log.close()

    admissions, peak = admitted_peaks(history.changes)
    assert peak[quota] <= 4, peak
    assert all(n == 1 for n in admissions.values()), admissions
    assert len(admissions) == 4  # 2 before the pause, 2 after; 4 still wait for room
    old_log = (tmp_path / "controller-0.log").read_text()
    assert "lost the lease" in old_log, old_log[-2000:]
    assert code is not None
