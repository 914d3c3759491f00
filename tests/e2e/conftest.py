"""End-to-end fixtures: a real etcd + kube-apiserver (built from source, cached) per test session.

Fixtures (session scoped): ``control_plane``, ``kubeconfig``, ``api_client``, ``kubectl``.
The plane has every CRD from ``crds/`` installed (Established) and the ``koord-queue`` namespace.

Every test under ``tests/e2e`` is marked ``e2e``.  A failing build or start-up FAILS the tests with
the reason (never a skip).  Local developers may set ``KOORDQUEUE_E2E=0`` to deselect the e2e
tests; it is ignored when ``CI`` is set, and e2e tests run by default.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `tests.controlplane` must import however pytest was started
    sys.path.insert(0, str(ROOT))

from tests.controlplane import build  # noqa: E402
from tests.controlplane.harness import ControlPlane, ControlPlaneError  # noqa: E402

CRD_DIR = ROOT / "crds"
INTEGRATION_CRD_DIR = ROOT / "tests" / "crds" / "integrations"
NAMESPACE = "koord-queue"
SERVICE_ACCOUNT_USER = "system:serviceaccount:koord-queue:koordqueue"
WHATIF_VIEWER_USER = "system:serviceaccount:koordqueue-whatif:whatif-viewer"
"""The read-only ServiceAccount test_snapshot.py runs `snapshot` and `whatif` as."""
AUDIT_POLICY = {
    # what deploy/'s ServiceAccount asks of the API server, for the RBAC tests (test_deploy.py),
    # and what the what-if viewer asks (test_snapshot.py):
    # every request of those users at Metadata level (verb, resource, response code), nothing else
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "users": [SERVICE_ACCOUNT_USER, WHATIF_VIEWER_USER]},
        {"level": "None"},
    ],
}
E2E_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: end-to-end test against a real kube-apiserver + etcd (tests/controlplane); "
        "deselect locally with KOORDQUEUE_E2E=0",
    )


def _e2e_disabled() -> bool:
    return os.environ.get("KOORDQUEUE_E2E") == "0" and not os.environ.get("CI")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [it for it in items if E2E_DIR in Path(str(it.path)).resolve().parents]
    for it in mine:
        it.add_marker(pytest.mark.e2e)
    e2e = [it for it in items if it.get_closest_marker("e2e")]  # also ones marked elsewhere
    if _e2e_disabled() and e2e:
        config.hook.pytest_deselected(items=e2e)
        ids = {id(it) for it in e2e}
        items[:] = [it for it in items if id(it) not in ids]


# result of the build done in pytest_collection_finish (a Binaries or the BuildError)
_build: dict[str, build.Binaries | build.BuildError] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    """Build (or find cached) binaries before any test runs when e2e tests are selected.

    Done here, outside every test's time budget (pytest-timeout covers fixture set-up, and a
    cold build takes far longer than one test may).  A failure is kept and reported by the
    ``control_plane`` fixture, so every e2e test fails with the reason.
    """
    if not any(it.get_closest_marker("e2e") for it in session.items):
        return
    if session.config.option.collectonly:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if build.cached_binaries() is None and reporter is not None:
        reporter.write_line(
            f"building kube-apiserver/kubectl/etcd from source into {build.cache_dir()} "
            "(cold build: many minutes; cached afterwards)"
        )
    try:
        _build["result"] = build.ensure_binaries()
    except build.BuildError as exc:
        _build["result"] = exc


# --------------------------------------------------------------------------- kubectl helper


class Kubectl:
    """Runs the kubectl built with the control plane, always with ``--kubeconfig``."""

    def __init__(self, binary: Path, kubeconfig: Path):
        self.binary = Path(binary)
        self.kubeconfig = Path(kubeconfig)

    def __call__(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess:
        cmd = [str(self.binary), f"--kubeconfig={self.kubeconfig}", *map(str, args)]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl failed (exit {proc.returncode}): {' '.join(cmd[1:])}\n"
                f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
            )
        return proc

    def json(self, *args: str, **kw: Any) -> Any:
        """``kubectl <args> -o json`` parsed."""
        return json.loads(self(*args, "-o", "json", **kw).stdout)

    def apply(self, manifest: dict | str, *, check: bool = True) -> subprocess.CompletedProcess:
        """``kubectl apply -f -`` of a dict (sent as JSON) or a YAML/JSON string."""
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self("apply", "-f", "-", input=text, check=check)

    def create(self, manifest: dict | str, *, check: bool = True) -> subprocess.CompletedProcess:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self("create", "-f", "-", input=text, check=check)


# --------------------------------------------------------------------------- fixtures


def install_crds(kubectl: Kubectl, crd_dir: Path = CRD_DIR, timeout: float = 60.0) -> list[str]:
    """Apply every CRD in ``crd_dir`` and wait until each is Established."""
    files = sorted(crd_dir.glob("*.yaml"))
    if not files:
        raise AssertionError(f"no CRDs found in {crd_dir}")
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(crd_dir))
    names = [yaml.safe_load(f.read_text())["metadata"]["name"] for f in files]
    kubectl(
        "wait",
        "--for=condition=Established",
        f"--timeout={int(timeout)}s",
        *[f"crd/{n}" for n in names],
    )
    # discovery can lag behind Established for a moment: wait until kubectl resolves every kind
    deadline = time.monotonic() + timeout
    for n in names:
        while kubectl("get", n, "-A", "-o", "name", check=False).returncode != 0:
            if time.monotonic() > deadline:
                kubectl("get", n, "-A")  # raises with kubectl's error
            time.sleep(0.2)
    return names


def _report(config: pytest.Config, text: str) -> None:
    """Write to the terminal even while pytest captures output (fixture set-up/teardown)."""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capman = config.pluginmanager.get_plugin("capturemanager")
    if reporter is None:
        return
    ctx = capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()
    with ctx:
        reporter.write_line(text)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    t0 = time.monotonic()
    result: build.Binaries | build.BuildError | None = _build.get("result")
    if result is None:  # collection hook did not build (e.g. fixture used outside tests/e2e)
        try:
            result = build.ensure_binaries()
        except build.BuildError as exc:
            result = exc
    if isinstance(result, build.BuildError):  # fail (never skip) every e2e test with the reason
        pytest.fail(f"building the e2e control plane failed:\n{result}", pytrace=False)
    binaries = result
    build_s = time.monotonic() - t0
    audit_dir = Path(tempfile.mkdtemp(prefix="koordqueue-audit-"))
    (audit_dir / "policy.yaml").write_text(json.dumps(AUDIT_POLICY))
    cp = ControlPlane(
        binaries,
        extra_apiserver_flags=[
            f"--audit-policy-file={audit_dir / 'policy.yaml'}",
            f"--audit-log-path={audit_dir / 'audit.log'}",
            "--audit-log-maxsize=500",  # MB: never rotated within a session
        ],
    )
    _audit["log"] = audit_dir / "audit.log"
    start_error: ControlPlaneError | None = None
    try:
        cp.start()
    except ControlPlaneError as exc:
        start_error = exc
    if start_error is not None:
        pytest.fail(f"starting the e2e control plane failed:\n{start_error}", pytrace=False)
    kubectl = Kubectl(binaries.kubectl, cp.kubeconfig)
    try:
        install_crds(kubectl)
        kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    except BaseException:
        print(cp.log_tails(), file=sys.stderr)
        cp.stop(keep_dir=True)
        raise
    _report(
        request.config,
        f"\ncontrol plane: binaries ready in {build_s:.2f}s, etcd + kube-apiserver up in "
        f"{cp.startup_seconds:.2f}s at {cp.server} ({cp.dir})",
    )
    try:
        yield cp
    finally:
        failed = request.session.testsfailed > 0
        if failed:
            _report(request.config, f"\ncontrol plane logs kept in {cp.dir}\n{cp.log_tails(20)}")
        cp.stop(keep_dir=failed or None)
        shutil.rmtree(audit_dir, ignore_errors=True)


_audit: dict[str, Path] = {}


@pytest.fixture(scope="session")
def audit_log(control_plane: ControlPlane) -> Path:
    """The API server's audit log: the requests of deploy/'s ServiceAccount (AUDIT_POLICY)."""
    return _audit["log"]


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> Path:
    assert control_plane.kubeconfig is not None
    return control_plane.kubeconfig


@pytest.fixture(scope="session")
def kubectl(control_plane: ControlPlane, kubeconfig: Path) -> Kubectl:
    return Kubectl(control_plane.binaries.kubectl, kubeconfig)


@pytest.fixture(autouse=True)
def pods_go_with_their_test() -> Iterator[None]:
    """After a test, the pods in the namespaces it made are deleted at once (--force: no
    kubelet here would ever finish a graceful delete). This plane runs no pod GC and no
    namespace controller: pods bound to a node a test deleted stayed, counted in their
    Volcano queue's allocation, and a later test's `default` queue refused a pod ('capability
    reached': test_deploy's pods, then test_whatif_nodes, in a clean-clone CI)."""
    from tests.e2e import kq

    start = len(kq.MADE_NAMESPACES)
    yield
    made = {ns: kubectl for kubectl, ns in kq.MADE_NAMESPACES[start:]}
    del kq.MADE_NAMESPACES[start:]
    for ns, kubectl in made.items():
        kubectl("delete", "pods", "--all", "-n", ns, "--force", "--grace-period=0",
                "--wait=false", check=False)


@pytest.fixture(scope="session")
def api_client(kubeconfig: Path) -> Iterator[Any]:
    from kubernetes import config

    client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def integration_crds(kubectl: Kubectl) -> list[str]:
    """Every vendored workload-kind CRD (tests/crds/integrations/*.yaml), installed once.

    Why once: they are 7.5 MB of schema; three modules applying them again cost ~30 s of the
    default run (a no-op server-side apply of a 1 MB CRD still takes the API server a second).
    A test that swaps one out (test_koord_queue_kinds' v1alpha1 MPIJob) puts it back.
    """
    return install_crds(kubectl, INTEGRATION_CRD_DIR, timeout=120.0)


@pytest.fixture
def controller(kubeconfig: Path) -> Iterator[Any]:
    """The quota controller running in-process against the plane, fresh for each test."""
    from tests.e2e.running_controller import RunningController

    with RunningController(kubeconfig) as rc:
        yield rc
