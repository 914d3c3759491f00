"""Injected faults on the real control plane (issue 12, part 3): nothing lost, nothing twice.

Each test runs a `koordqueue run` process through a fault, while this test plays the kubelet
(every resumed Job is marked Complete, which releases its quota so the next is admitted).
Asserted from the QueueUnits' watch history (tests/e2e/replay.py), read through the test's own
client: every Job is admitted and finishes, no unit is admitted twice, and no quota ever holds
more units than it allows, at any moment.

The API faults go through tests/controlplane/faultproxy.py, a TLS-terminating proxy on
loopback between the controller and kube-apiserver; they fire during a bounded window, then
every request passes so the controller can show it converged.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.kube.api import JOB, KubeApi
from tests.controlplane.faultproxy import FaultProxy, Rule, counts
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.conftest import Kubectl, install_crds
from tests.e2e.replay import (
    STOP_WITHIN,
    History,
    Kubelet,
    admitted_peaks,
    start_controller,
    stop_controller,
)

JOBS = 60
QUOTAS = 3
CAPACITY = 6  # CPUs per quota; each Job asks 1: 18 run at once, the rest wait for room
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def run_burst(
    api_client: Any, kubectl: Any, controller_kubeconfig: Path, tmp_path: Path,
    during: Any = None, timeout: float = 90.0,
) -> tuple[History, list[str], str]:
    """Quotas, a controller, JOBS Jobs, the kubelet stand-in until every Job succeeded.

    `during(history)` runs once a third of the Jobs have been admitted (the mid-burst fault).
    Returns the history, the quota names and the controller's log.
    """
    ns = kq.namespace(kubectl, kq.unique("faults"))
    api = KubeApi(api_client)
    quotas = [kq.unique("fq") for _ in range(QUOTAS)]
    for name in quotas:
        kubectl.apply(kq.quota(name, max_={"cpu": str(CAPACITY), "memory": "1Ti"}))
    history = History(api_client, ns).start()
    kubelet = Kubelet(api, ns, history)
    log_path = tmp_path / "controller.log"
    with open(log_path, "w") as log:
        proc = start_controller(controller_kubeconfig, log)
        try:
            for i in range(JOBS):
                api.create(JOB, kq.job(f"job-{i:02d}", ns, quotas[i % QUOTAS], cpu="1",
                                       memory="1Mi"), ns)
            if during is not None:
                kq.wait_for(lambda: (kubelet.tick(), history.admitted_seen >= JOBS // 3)[1],
                            timeout=60, what=f"{JOBS // 3} admissions before the fault")
                during(history)

            def all_done() -> bool:
                kubelet.tick()
                final = history.final()
                return len(final) == JOBS and all(p == "Succeed" for p in final.values())

            try:
                kq.wait_for(all_done, timeout=timeout, interval=0.3,
                            what="every Job admitted and finished",
                            state=lambda: sorted(set(history.final().values())))
            except AssertionError as exc:
                raise AssertionError(f"{exc}\n--- controller log ---\n"
                                     f"{log_path.read_text()[-4000:]}") from None
            assert proc.poll() is None, "the controller exited"
        finally:
            stopped_in = stop_controller(proc)
            kubelet.close()
            history.stop()
    assert stopped_in < STOP_WITHIN, f"the controller took {stopped_in:.1f} s to exit on SIGTERM"
    return history, quotas, log_path.read_text()


def assert_exactly_once(history: History, quotas: list[str]) -> None:
    admissions, peak = admitted_peaks(history.changes)
    assert len(admissions) == JOBS
    twice = {u: n for u, n in admissions.items() if n != 1}
    assert not twice, f"admitted more than once: {twice}"
    assert set(peak) == set(quotas)
    assert max(peak.values()) <= CAPACITY, peak


FAULTS = {
    # the API server throttling and failing: 15% answered 429, 10% answered 500
    "429-and-500": [Rule("429", share=0.15), Rule("500", share=0.10)],
    # connections dropped before the request reaches the server, and writes that happened
    # whose answer never came back
    "dropped-connections": [Rule("drop", share=0.10), Rule("lose-reply", share=0.15,
                                                          methods=WRITES)],
    # a conflict storm: half the writes of a QueueUnit's status answered 409
    "409-storm-on-queueunit-status": [
        Rule("409", share=0.5, methods=WRITES, path=r"/queueunits/[^/?]+/status")],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_burst_through_api_faults_admits_every_job_exactly_once(
    fault: str, control_plane: ControlPlane, api_client: Any, kubectl: Any, tmp_path: Path
) -> None:
    with FaultProxy(control_plane, FAULTS[fault], faults_for=20.0, seed=12) as proxy:
        kubeconfig = proxy.write_kubeconfig(tmp_path / "kubeconfig")
        history, quotas, _ = run_burst(api_client, kubectl, kubeconfig, tmp_path)
        fired = counts(proxy)
    expected = {r.action for r in FAULTS[fault]}
    assert expected <= set(proxy.fired), fired  # every kind of fault did happen
    assert_exactly_once(history, quotas)
    print(f"{fault}: {fired}; slowest: {history.slowest(3)}")


@pytest.fixture
def own_plane() -> Iterator[tuple[ControlPlane, Kubectl]]:
    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
        install_crds(kubectl)
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "koord-queue"}})
        yield cp, kubectl


def test_etcd_restarted_mid_burst_loses_nothing_and_admits_nothing_twice(
    own_plane: tuple[ControlPlane, Kubectl], tmp_path: Path
) -> None:
    """etcd stopped for 2 s and started again on the same port and data dir while a third of
    the Jobs are admitted: the API server reconnects; the controller's writes fail meanwhile
    and are retried; the history watch resumes from its resourceVersion (no re-list)."""
    from kubernetes import config

    plane, kubectl = own_plane
    assert plane.kubeconfig is not None
    api_client = config.new_client_from_config(config_file=str(plane.kubeconfig))
    restarted: list[float] = []

    def restart(history: History) -> None:
        t0 = time.monotonic()
        plane.restart_etcd(down_seconds=2.0)
        restarted.append(time.monotonic() - t0)

    try:
        history, quotas, _ = run_burst(api_client, kubectl, plane.kubeconfig, tmp_path,
                                       during=restart)
    finally:
        api_client.close()
    assert restarted, "etcd was not restarted"
    assert history.relists == 0
    assert_exactly_once(history, quotas)


def test_a_watch_that_never_ends_nor_delivers_is_given_up_and_resumed_without_loss(
    control_plane: ControlPlane, kubectl: Any, tmp_path: Path
) -> None:
    """The first watch is answered (headers) and then stalls for good: no event, no end, the
    connection open, as behind a middlebox that lost the server's side. The informer gives it
    up after its read timeout (the server-side `watch_timeout` + 30 s) and resumes from the
    listing's resourceVersion: every change made meanwhile arrives, with no second list.
    (The watch the server ends every second is tests/e2e/test_informer.py.)"""
    import threading

    from koordqueue.kube.api import Kind, load_api_client
    from koordqueue.kube.informer import Informer

    config_map = Kind("", "v1", "configmaps", "ConfigMap")
    ns = kq.namespace(kubectl, kq.unique("stall"))
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

    rules = [Rule("stall", methods=frozenset({"GET"}), path=r"/configmaps\?.*watch=1")]
    with FaultProxy(control_plane, rules, faults_for=5.0) as proxy:
        api = KubeApi(load_api_client(str(proxy.write_kubeconfig(tmp_path / "kubeconfig"))))
        informer = Counting(api, config_map, handler, workers=2, watch_timeout=1)
        informer.start()
        try:
            assert informer.synced.wait(30)
            kq.wait_for(lambda: proxy.fired["stall"] == 1, what="the first watch stalled")
            started = time.monotonic()
            for i in range(5):
                kubectl("create", "configmap", f"cm{i}", "-n", ns, f"--from-literal=v={i}")
            time.sleep(2)
            assert not seen, "nothing can arrive through the stalled watch"
            kq.wait_for(lambda: len(seen) == 5, timeout=50, what="every ConfigMap, late",
                        state=lambda: sorted(seen))
            waited = time.monotonic() - started
        finally:
            informer.stop()
    assert lists and len(lists) == 1, "a given-up watch resumes from its version, no re-list"
    assert proxy.fired["stall"] == 1
    assert 25 < waited < 45, waited  # the read timeout (1 + 30 s), not sooner, not never
