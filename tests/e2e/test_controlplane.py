"""The e2e control plane itself: it is up, kubectl is the one we built, the cache is warm, and
teardown leaves no process behind (stop(), SIGINT, SIGTERM, and a SIGKILLed parent)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.controlplane import build, versions
from tests.controlplane.harness import ControlPlane, _pid_alive

from .conftest import NAMESPACE, ROOT, Kubectl


def test_namespace_exists(kubectl: Kubectl) -> None:
    ns = kubectl.json("get", "ns", NAMESPACE)
    assert ns["status"]["phase"] == "Active"
    assert kubectl("get", "ns", NAMESPACE).stdout.split()[3:5] == [NAMESPACE, "Active"]


def test_versions_are_the_pinned_ones(kubectl: Kubectl, control_plane: ControlPlane) -> None:
    v = kubectl.json("version")
    assert v["clientVersion"]["gitVersion"] == versions.KUBERNETES_VERSION
    assert v["serverVersion"]["gitVersion"] == versions.KUBERNETES_VERSION
    # tests never run a system kubectl
    assert Path(kubectl.binary).resolve() == control_plane.binaries.kubectl.resolve()
    out = subprocess.run(
        [str(control_plane.binaries.etcd), "--version"], capture_output=True, text=True, check=True
    )
    assert versions.ETCD_VERSION.lstrip("v") in out.stdout


def test_admin_is_cluster_admin_and_rbac_is_on(kubectl: Kubectl) -> None:
    assert kubectl("auth", "can-i", "*", "*", "--all-namespaces").stdout.strip() == "yes"
    # RBAC is the authorizer: an ordinary service account may not list secrets
    proc = kubectl(
        "auth",
        "can-i",
        "list",
        "secrets",
        "-n",
        NAMESPACE,
        "--as=system:serviceaccount:koord-queue:nobody",
        check=False,
    )
    assert proc.stdout.strip() == "no"


def test_readyz_and_core_api(kubectl: Kubectl, api_client) -> None:
    assert kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
    from kubernetes import client

    names = [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items]
    assert {"default", "kube-system", NAMESPACE} <= set(names)


def test_warm_cache_returns_fast(control_plane: ControlPlane) -> None:
    t0 = time.monotonic()
    bins = build.ensure_binaries()
    assert time.monotonic() - t0 < 1.0
    assert bins == control_plane.binaries


# --------------------------------------------------------------------------- teardown


def _wait_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in pids if _pid_alive(p)]
        if not alive or time.monotonic() > deadline:
            return alive


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_leaves_no_processes(control_plane: ControlPlane) -> None:
    cp = ControlPlane(control_plane.binaries)
    cp.start()
    try:
        pids = cp.pids
        assert len(pids) == 2 and all(_pid_alive(p) for p in pids)
        assert cp.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
        workdir = cp.dir
    finally:
        cp.stop()
    assert _wait_gone(pids, timeout=0.5) == []
    assert not any(_group_alive(p) for p in pids)
    assert workdir is not None and not workdir.exists()
    cp.stop()  # idempotent


def _default_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _start_in_subprocess() -> tuple[subprocess.Popen, list[int], Path]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.controlplane.harness"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # default SIGINT/SIGTERM even if this run ignores them (e.g. a background job)
        preexec_fn=_default_signals,  # noqa: PLW1509
    )
    pids: list[int] = []
    workdir = None
    deadline = time.monotonic() + 180
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith("pids: "):
            pids = [int(x) for x in line.split()[1:]]
        if line.startswith("dir: "):
            workdir = Path(line.split(None, 1)[1].strip())
            break
    if not pids or workdir is None:
        proc.kill()
        pytest.fail(
            f"harness subprocess did not start: {proc.stderr.read() if proc.stderr else ''}"
        )
    assert all(_pid_alive(p) for p in pids)
    return proc, pids, workdir


@pytest.mark.parametrize(
    "sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"]
)
def test_signal_to_test_process_leaves_no_processes(sig: int, control_plane: ControlPlane) -> None:
    proc, pids, workdir = _start_in_subprocess()
    try:
        proc.send_signal(sig)
        proc.wait(timeout=60)
        # SIGINT/SIGTERM: handlers stop the plane; SIGKILL: the parent-death signal kills it
        assert _wait_gone(pids) == [], f"left running after {sig!r}: {pids}"
    finally:
        for p in pids:
            if _pid_alive(p):
                os.killpg(p, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def test_start_retries_when_a_port_is_taken(
    control_plane: ControlPlane, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.controlplane import harness

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        ports = iter([taken, taken])  # etcd's first client + peer ports are both taken
        real = harness.free_port
        monkeypatch.setattr(harness, "free_port", lambda: next(ports, None) or real())
        cp = ControlPlane(control_plane.binaries)
        try:
            cp.start()
            assert cp.etcd_url != f"http://127.0.0.1:{taken}"
            assert cp.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"
            assert cp.dir is not None and (cp.dir / "etcd.attempt1.log").exists()
        finally:
            cp.stop()
