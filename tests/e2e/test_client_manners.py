"""client-go's manners through the fault proxy (issue 30, part 2), on the real control plane.

Each test puts tests/controlplane/faultproxy.py between a client under test and
kube-apiserver, injects one fault, and asserts what an operator would see (the Job resumed,
its unit Dequeued, the Lease's holder, the process's log and exit), plus the timing the
proxy recorded of each request:

- a throttled write (429 with `Retry-After: 2` and APF's headers) is retried after 2 s, not
  after the 0.1 s back-off step (before: urllib3 did not retry a PATCH and `with_retries`
  asked again 0.1 s later);
- the informer's back-off starts over after a healthy period (before: after four failed
  watches and a healthy stretch, a cut watch waited 8 s);
- SIGTERM while a start-up retries still releases the Lease and exits (before: kopf skipped
  every clean-up when its start-up was still running, so the Lease stayed held; and a
  leader whose watches never listed waited in a worker thread that kept the process from
  exiting until it was killed);
- a standby whose first listing is refused (403) fails its start-up to kopf, which logs it
  (before: the error died in a background task; only the probe said "not listed yet").

The silent watch noticed by its liveness deadline (bookmarks) is tests/e2e/test_dead_watch.py.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain import names
from koordqueue.kube.api import JOB, Kind, KubeApi, load_api_client
from koordqueue.kube.informer import Informer
from tests.controlplane.faultproxy import FaultProxy, Rule
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.conftest import NAMESPACE
from tests.e2e.replay import STOP_WITHIN, start_controller, stop_controller

GET = frozenset({"GET"})
POD_LIST = r"^/api/v1/pods\?(?!.*watch=)"  # the pods list, not the pods watch


def resumed(api: KubeApi, ns: str, name: str) -> bool:
    job = api.get(JOB, name, ns)
    return job is not None and job["spec"].get("suspend") is False


def holder(kubectl: Any, lease: str) -> str:
    found = kq.get(kubectl, "lease", lease, NAMESPACE)
    return str(((found or {}).get("spec") or {}).get("holderIdentity") or "")


def test_a_throttled_status_write_is_retried_after_its_retry_after(
    control_plane: ControlPlane, kubectl: Any, api_client: Any, tmp_path: Path,
) -> None:
    ns = kq.namespace(kubectl, kq.unique("throttle"))
    quota = kq.unique("thr")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "1Ti"}))
    api = KubeApi(api_client)
    rules = [Rule("429", methods=frozenset({"PATCH"}), path=r"/queueunits/[^/?]+/status",
                  times=2, retry_after=2)]
    log_path = tmp_path / "controller.log"
    with FaultProxy(control_plane, rules, faults_for=3600) as proxy, open(log_path, "w") as log:
        proc = start_controller(proxy.write_kubeconfig(tmp_path / "kubeconfig"), log)
        try:
            api.create(JOB, kq.job("throttled", ns, quota, cpu="1", memory="1Mi"), ns)
            kq.wait_for(lambda: resumed(api, ns, "throttled"), timeout=60,
                        what="the Job resumed through the throttled status writes",
                        state=lambda: log_path.read_text()[-3000:])
            assert proc.poll() is None, "the controller exited"
        finally:
            stopped_in = stop_controller(proc)
        requests = list(proxy.requests)
    assert stopped_in < STOP_WITHIN
    assert kq.phase(kubectl, ns, "throttled") == "Dequeued"
    assert names.REASON_ADMITTED in {e["reason"] for e in kq.events_for(kubectl, ns,
                                                                           "throttled")}
    throttled = [(t, m, target) for t, m, target, action in requests if action == "429"]
    assert len(throttled) == 2, throttled
    gaps = []
    for t, method, target in throttled:
        later = [t2 for t2, m2, target2, _ in requests if t2 > t and (m2, target2) == (method,
                                                                                    target)]
        assert later, f"the throttled {method} {target} was never retried"
        gaps.append(later[0] - t)
    assert min(gaps) >= 1.9, gaps  # the server's 2 s, not the 0.1 s back-off step
    print(f"retries came {[round(g, 2) for g in gaps]} s after each 429 (Retry-After: 2)")


def test_the_informers_back_off_starts_over_after_a_healthy_period(
    control_plane: ControlPlane, kubectl: Any, tmp_path: Path,
) -> None:
    config_map = Kind("", "v1", "configmaps", "ConfigMap")
    ns = kq.namespace(kubectl, kq.unique("reset"))
    seen: set[str] = set()
    lists: list[str] = []
    lock = threading.Lock()

    def handler(event_type: str | None, obj: dict[str, Any]) -> None:
        if obj["metadata"].get("namespace") == ns:
            with lock:
                seen.add(obj["metadata"]["name"])

    class Counting(Informer):
        def _list(self) -> str:
            version = super()._list()
            lists.append(version)
            return version

    watch = r"/api/v1/configmaps\?(.*&)?watch=1"
    # four failed watches in a row: the back-off grows 0.5, 1, 2, 4 s
    rules = [Rule("500", methods=GET, path=watch, times=4)]
    with FaultProxy(control_plane, rules, faults_for=3600) as proxy:
        api = KubeApi(load_api_client(str(proxy.write_kubeconfig(tmp_path / "kubeconfig"))))
        informer = Counting(api, config_map, handler, workers=1, healthy_reset=3.0)
        informer.start()
        try:
            def watches(passed: bool) -> list[float]:
                return [t for t, m, target, action in list(proxy.requests)
                        if m == "GET" and "watch=1" in target and "/configmaps" in target
                        and (action is None) == passed]

            kq.wait_for(lambda: len(watches(passed=True)) == 1, timeout=30,
                        what="a watch established after four failures")
            assert len(watches(passed=False)) == 4
            time.sleep(4.0)  # healthy for longer than the 3 s reset
            cut_at = time.monotonic()
            assert proxy.cut() >= 1, "no watch to cut"
            kq.wait_for(lambda: len(watches(passed=True)) == 2, timeout=30,
                        what="the cut watch re-established")
            again = watches(passed=True)[1] - cut_at
            kubectl("create", "configmap", "after-cut", "-n", ns, "--from-literal=v=1")
            kq.wait_for(lambda: "after-cut" in seen, timeout=15, what="the ConfigMap seen")
        finally:
            informer.stop()
    assert len(lists) == 1, "a cut watch resumes from its version, without a re-list"
    # the back-off's first step (0.5 s) after the healthy period, not the fifth (8 s)
    assert again < 2.0, again
    print(f"re-watched {again:.2f} s after the cut (without the reset: 8 s)")


STARTUP_FAULTS = {
    # the scheduler's start-up (a standby's first listing, then the leader's) retries the
    # pods list inside kopf's start-up activity, while the controller leads and admits
    "scheduler-start-up-retrying": POD_LIST,
    # the controller leads but its QueueUnit watch never lists: its start-up waits (in a
    # worker thread, which before held asyncio.run's exit for good: killed after 30 s)
    "controller-watches-never-listed": r"/queueunits\?(?!.*watch=)",
}


@pytest.mark.parametrize("fault", sorted(STARTUP_FAULTS))
def test_sigterm_while_a_start_up_retries_still_releases_the_lease_and_exits(
    fault: str, control_plane: ControlPlane, kubectl: Any, api_client: Any, tmp_path: Path,
) -> None:
    """`koordqueue run` with leader election holds the Lease while a start-up retries a
    list answered 500 for good; SIGTERM then."""
    ns = kq.namespace(kubectl, kq.unique("termstart"))
    quota = kq.unique("ts")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "1Ti"}))
    lease = kq.unique("kq-termstart")
    api = KubeApi(api_client)
    admits = fault == "scheduler-start-up-retrying"
    rules = [Rule("500", methods=GET, path=STARTUP_FAULTS[fault])]
    log_path = tmp_path / "controller.log"
    with FaultProxy(control_plane, rules, faults_for=3600) as proxy, open(log_path, "w") as log:
        proc = start_controller(proxy.write_kubeconfig(tmp_path / "kubeconfig"), log,
                                lease=lease)
        try:
            kq.wait_for(lambda: holder(kubectl, lease), timeout=60, what="the Lease held",
                        state=lambda: log_path.read_text()[-3000:])
            if admits:
                api.create(JOB, kq.job("admitted", ns, quota, cpu="1", memory="1Mi"), ns)
                kq.wait_for(lambda: resumed(api, ns, "admitted"), timeout=60,
                            what="the leader admitting",
                            state=lambda: log_path.read_text()[-3000:])
            retrying = "start-up failed; retrying" if admits else "watch failed; retrying"
            kq.wait_for(lambda: retrying in log_path.read_text(), timeout=30,
                        what="the start-up retrying")
            assert holder(kubectl, lease)
        finally:
            stopped_in = stop_controller(proc)
    text = log_path.read_text()
    assert stopped_in < STOP_WITHIN, f"took {stopped_in:.1f} s to exit on SIGTERM\n{text[-3000:]}"
    assert holder(kubectl, lease) == "", f"the Lease is still held\n{text[-3000:]}"
    assert "released the lease" in text
    if admits:
        assert kq.phase(kubectl, ns, "admitted") == "Dequeued"
    print(f"{fault}: exited {stopped_in:.1f} s after SIGTERM with the Lease released")


def test_a_standby_whose_first_listing_is_refused_says_so_to_kopf(
    control_plane: ControlPlane, kubectl: Any, tmp_path: Path,
) -> None:
    lease = kq.unique("kq-standby403")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    kubectl.apply({  # another replica leads for the whole test: this process stands by
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease, "namespace": NAMESPACE},
        "spec": {"holderIdentity": "another-replica", "leaseDurationSeconds": 3600,
                 "acquireTime": now, "renewTime": now, "leaseTransitions": 0},
    })
    rules = [Rule("403", methods=GET, path=POD_LIST, times=1)]
    log_path = tmp_path / "controller.log"
    with FaultProxy(control_plane, rules, faults_for=3600) as proxy, open(log_path, "w") as log:
        proc = start_controller(proxy.write_kubeconfig(tmp_path / "kubeconfig"), log,
                                lease=lease)
        try:
            kq.wait_for(lambda: "start_scheduler" in log_path.read_text(), timeout=60,
                        what="kopf reporting the failed start-up",
                        state=lambda: log_path.read_text()[-3000:])
            assert proc.poll() is None, "the process exited"
        finally:
            stopped_in = stop_controller(proc)
    text = log_path.read_text()
    reports = [ln for ln in text.splitlines()
               if "start_scheduler" in ln and "failed with an exception" in ln]
    assert reports, text[-3000:]
    assert "403 Forbidden" in text[text.index(reports[0]):], text[-3000:]
    assert proxy.fired["403"] == 1
    assert stopped_in < STOP_WITHIN, f"took {stopped_in:.1f} s to exit on SIGTERM"
    assert holder(kubectl, lease) == "another-replica"  # a standby never touched it
