"""`koordqueue snapshot` and `whatif` against the live controller (issue 29 parts 1, 2 and 4).

Round trip: a hypothesis-built cluster (quotas, units created in two waves so that admitted
low units may hold what later high ones want, preemption on some quotas) is left to the live
controller; `koordqueue snapshot` (run as a ServiceAccount bound only to
deploy/whatif-viewer.yaml) writes a scenario; `simulate` replays it; every unit's phase and
status message must be what kubectl shows. Every `snapshot` and `whatif` here runs as that
ServiceAccount, and after each run the audit log shows it made only get and list requests,
none refused (`as_viewer`).

What-if: each edit kind is asked of `koordqueue whatif -o json` first, then made for real
(kubectl patch / create / delete, the controller restarted for --oversellrate), and the units
must end as the "after" world said. `whatif --nodes` (part 3): a node added is predicted, then
made, and the scheduler binds the waiting pod where the prediction said.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from koordqueue.cli.main import main
from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    QUEUE_POLICY_KEY,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings
from koordqueue.simulation.scenario import load_scenario
from koordqueue.simulation.simulator import simulate
from tests.e2e import kq
from tests.e2e.conftest import WHATIF_VIEWER_USER
from tests.e2e.running_controller import RunningController
from tests.e2e.test_scheduler_binding import TEST_LABEL, make_node, make_pod, node_of

ROOT = Path(__file__).resolve().parents[2]
VIEWER_NS, VIEWER_SA = WHATIF_VIEWER_USER.split(":")[2:]
QUOTAS = "elasticquotas.scheduling.sigs.k8s.io"
UNITS = "queueunits.scheduling.x-k8s.io"
PREEMPTION = {ENABLE_PREEMPTION_ANNOTATION: "true", WAIT_FOR_PODS_RUNNING_ANNOTATION: "true"}
READ_VERBS = {"get", "list"}


@pytest.fixture(scope="module")
def viewer(kubectl: Any, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A kubeconfig of a ServiceAccount bound to deploy/whatif-viewer.yaml and nothing else."""
    kubectl("apply", "-f", str(ROOT / "deploy" / "whatif-viewer.yaml"))
    kq.namespace(kubectl, VIEWER_NS)
    kubectl.apply({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": VIEWER_SA, "namespace": VIEWER_NS}})
    kubectl.apply({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "koordqueue-whatif-viewer-e2e"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "koordqueue-whatif-viewer"},
        "subjects": [{"kind": "ServiceAccount", "name": VIEWER_SA, "namespace": VIEWER_NS}],
    })
    token = kubectl("create", "token", VIEWER_SA, "-n", VIEWER_NS, "--duration=1h").stdout
    admin = yaml.safe_load(kubeconfig.read_text())
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": "viewer", "user": {"token": token.strip()}}],
        "contexts": [{"name": "viewer", "context": {"cluster": "e2e", "user": "viewer"}}],
        "current-context": "viewer",
    }
    out = tmp_path_factory.mktemp("viewer") / "kubeconfig"
    out.write_text(yaml.safe_dump(config))
    return out


@pytest.fixture(scope="module")
def deployment(kubectl: Any) -> Iterator[tuple[str, str]]:
    """A Deployment object whose controller arguments say --oversellrate=2 (no kubelet here:
    nothing runs it; the in-process controller is started with the same flag)."""
    ns = kq.namespace(kubectl, kq.unique("wi-deploy"))
    kubectl.apply({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "controller", "namespace": ns},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "c"}},
                 "template": {"metadata": {"labels": {"app": "c"}}, "spec": {"containers": [{
                     "name": "controller", "image": "koordqueue:0.1.0",
                     "args": ["run", "--namespace=koord-queue", "--oversellrate=2"]}]}}},
    })
    yield ns, "controller"


def run_cli(*argv: str | Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def as_viewer(
    viewer: Path, audit_log: Path, capsys: pytest.CaptureFixture[str],
) -> Callable[..., tuple[int, str, str]]:
    """Run `koordqueue COMMAND --kubeconfig <viewer> ARGS`; then the audit log must show the
    viewer's requests of that run, and only get and list, none refused (nothing written,
    ever: also a write the role would refuse is logged, as a 403)."""
    def run(command: str, *argv: str | Path, reads: bool = True) -> tuple[int, str, str]:
        since = audit_log.stat().st_size if audit_log.exists() else 0
        result = run_cli(command, "--kubeconfig", viewer, *argv, capsys=capsys)
        requests = viewer_requests(audit_log, since)
        if reads:  # (a run that fails on its arguments may read nothing)
            assert requests, f"the viewer's requests of `{command}` are in the audit log"
        assert {verb for verb, _, _ in requests} <= READ_VERBS, requests
        assert not [r for r in requests if r[2] == 403], requests
        return result
    return run


def unit_manifest(name: str, ns: str, quota: str | None, cpu: int, priority: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {QUOTA_NAME_LABEL: quota} if quota else {}},
        "spec": {"resource": {"cpu": str(cpu)}, "priority": priority},
    }


Observed = dict[str, tuple[str, str | None]]


def observed(kubectl: Any, ns: str) -> Observed:
    return {
        f"{ns}/{u['metadata']['name']}": ((u.get("status") or {}).get("phase") or "Enqueued",
                                          (u.get("status") or {}).get("message"))
        for u in kubectl.json("get", UNITS, "-n", ns)["items"]
    }


def settled(kubectl: Any, ns: str, count: int) -> Observed:
    """All `count` units are there and what kubectl shows holds still: 0.6 s when every unit
    has a message, 3 s when one has none (a unit never tried gets no status: one held back by
    an Intelligent queue's high unit, or by an admitted unit whose pods are not running under
    wait-for-pods-running; that state must outlast several admission periods)."""
    def look() -> Observed | None:
        first = observed(kubectl, ns)
        if len(first) < count:
            return None
        quiet = any(m is None for _, m in first.values())
        for _ in range(5 if quiet else 1):
            time.sleep(0.6)
            if observed(kubectl, ns) != first:
                return None
        return first
    return kq.wait_for(look, timeout=30.0, what="the controller to settle",
                       state=lambda: observed(kubectl, ns))


def viewer_requests(audit_log: Path, offset: int) -> list[tuple[str, str, int]]:
    """(verb, resource, code) of the viewer's requests logged past `offset` (bytes)."""
    time.sleep(0.3)  # (the log backend writes as requests finish)
    with audit_log.open("rb") as f:
        f.seek(offset)
        lines = f.read().decode().splitlines()
    out = []
    for line in lines:
        event = json.loads(line)
        if event.get("user", {}).get("username") == WHATIF_VIEWER_USER:
            out.append((event["verb"], (event.get("objectRef") or {}).get("resource", ""),
                        int((event.get("responseStatus") or {}).get("code") or 0)))
    return out


# --- round trip ------------------------------------------------------------------------------


class QuotaPlan(NamedTuple):
    parent: int | None
    cpu: int
    preemption: bool


class UnitPlan(NamedTuple):
    quota: int | None  # None: a quota that does not exist
    cpu: int
    priority: int
    second_wave: bool


Plan = tuple[tuple[QuotaPlan, ...], tuple[UnitPlan, ...]]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    quotas = tuple(
        QuotaPlan(draw(st.sampled_from([None, *range(i)])), draw(st.integers(1, 4)),
                  draw(st.booleans()))
        for i in range(draw(st.integers(1, 3)))
    )
    units = tuple(draw(st.lists(st.builds(
        UnitPlan, st.sampled_from([None, *range(len(quotas))]), st.integers(1, 3),
        st.integers(0, 6), st.booleans(),
    ), min_size=2, max_size=6)))
    return quotas, units


EXAMPLE: Plan = (  # (at --oversellrate=2: q0 holds 8 cpu, q1 4)
    (QuotaPlan(None, 4, False), QuotaPlan(0, 2, True)),
    (
        UnitPlan(1, 4, 1, False),  # admitted first, low
        UnitPlan(1, 4, 6, True),   # high, later: preempts it (Dequeued, pods not running)
        UnitPlan(0, 4, 0, False),  # admitted into the parent
        UnitPlan(0, 1, 5, True),   # high, later: the parent is full, no preemption there
        UnitPlan(None, 1, 0, False),
    ),
)


@settings(max_examples=4, deadline=None, phases=[Phase.explicit, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@example(plan=EXAMPLE)
@example(plan=(  # found by hypothesis: u3 fits q1 but waits, unwritten, for u0's pods to run
    (QuotaPlan(None, 1, True), QuotaPlan(None, 4, True)),
    (UnitPlan(1, 2, 6, False), UnitPlan(0, 2, 3, False), UnitPlan(0, 1, 6, False),
     UnitPlan(1, 3, 0, False)),
))
@given(plan=plans())
def test_a_snapshot_replays_what_the_controller_shows(
    kubectl: Any, kubeconfig: Path, deployment: tuple[str, str],
    as_viewer: Callable[..., tuple[int, str, str]], tmp_path_factory: pytest.TempPathFactory,
    plan: Plan,
) -> None:
    prefix = kq.unique("snap")
    ns = kq.namespace(kubectl, prefix)
    quotas = [
        kq.quota(f"{prefix}-q{i}", ns, max_={"cpu": str(q.cpu)},
                 parent=None if q.parent is None else f"{prefix}-q{q.parent}",
                 policy="Priority", annotations=PREEMPTION if q.preemption else None)
        for i, q in enumerate(plan[0])
    ]
    units = [
        (u.second_wave, unit_manifest(f"u{i}", ns, f"{prefix}-q{u.quota}" if u.quota is not None
                                      else f"{prefix}-missing", u.cpu, u.priority))
        for i, u in enumerate(plan[1])
    ]
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": quotas})
    with RunningController(kubeconfig, oversell_rate="2"):
        first = [m for later, m in units if not later]
        if first:
            kubectl.apply({"apiVersion": "v1", "kind": "List", "items": first})
            settled(kubectl, ns, len(first))
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [m for _, m in units]})
        live = settled(kubectl, ns, len(units))
        out = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
        code, _, err = as_viewer("snapshot", "--controller-namespace", deployment[0],
                                 "--controller-deployment", deployment[1], "-o", out)
        assert code == 0, err
        assert observed(kubectl, ns) == live  # (still settled while it was read)
    scenario = load_scenario(out)
    assert scenario.oversell_rate == "2"  # from the Deployment's arguments
    result = simulate(scenario)
    phases, messages = result.final_phases(), result.final_messages()
    replayed = {key: (phases[key], messages.get(key)) for key in phases if key in live}
    assert replayed == live


def test_a_snapshot_replays_an_inactive_unit_as_the_controller_shows_it(
    kubectl: Any, kubeconfig: Path, deployment: tuple[str, str],
    as_viewer: Callable[..., tuple[int, str, str]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """spec.active false on a bare unit (no Job, no annotation) under QueueUnitActive: the
    controller never admits it and gives its room to the next unit; the snapshot carries
    `active: false` (the gate from the command line, which beats the Deployment) and the
    replay shows what kubectl shows."""
    prefix = kq.unique("snap-off")
    ns = kq.namespace(kubectl, prefix)
    kubectl.apply(kq.quota(f"{prefix}-q", ns, max_={"cpu": "2"}, policy="Priority"))
    off = unit_manifest("off", ns, f"{prefix}-q", 2, 5)
    off["spec"]["active"] = False
    units = [off, unit_manifest("next", ns, f"{prefix}-q", 2, 0)]
    with RunningController(kubeconfig, oversell_rate="2", feature_gates="QueueUnitActive=true"):
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": units})
        live = settled(kubectl, ns, len(units))
        assert live[f"{ns}/off"] == (
            "Enqueued", "inactive (spec.active is false): never admitted until it is activated")
        assert live[f"{ns}/next"][0] == "Dequeued"
        out = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
        code, _, err = as_viewer("snapshot", "--controller-namespace", deployment[0],
                                 "--controller-deployment", deployment[1],
                                 "--feature-gates", "QueueUnitActive=true", "-o", out)
        assert code == 0, err
        assert observed(kubectl, ns) == live
    assert "active: false" in out.read_text()
    result = simulate(load_scenario(out))
    phases, messages = result.final_phases(), result.final_messages()
    assert {key: (phases[key], messages.get(key)) for key in live} == live


QUEUES = "queues.scheduling.x-k8s.io"


def _set_check_status(kubectl: Any, ns: str, name: str, attempts: int | None = None,
                      **states: str) -> None:
    """What a check's controller writes on the unit (every entry, some with a new state)."""
    unit = kq.get(kubectl, UNITS, name, ns)
    assert unit is not None
    entries = unit["status"]["admissionChecks"]
    for entry in entries:
        entry["state"] = states.get(entry["name"], entry["state"])
    status: dict[str, Any] = {"admissionChecks": entries}
    if attempts is not None:
        status["attempts"] = attempts
    kubectl("patch", UNITS, name, "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}))


def _without_delay(seen: Observed) -> Observed:
    """A back-off's message up to its delay (jittered +-10 % by the controller and by the
    replay alike); the delay itself is checked on its own."""
    return {k: (p, m.split("; retry in ")[0] if m else m) for k, (p, m) in seen.items()}


def test_a_snapshot_replays_reserved_units_as_their_admission_checks_decide(
    kubectl: Any, kubeconfig: Path, deployment: tuple[str, str],
    as_viewer: Callable[..., tuple[int, str, str]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A Queue asks for checks c1, c2 (max 3 cpu at --oversellrate=2: 6). held, freed and
    bounce reserve 5 cpu; waiter (2) waits. freed's checks go Ready and the controller
    releases it; held has c1 Ready, c2 Pending. The snapshot (as the viewer) carries the
    checks and states, and the replay shows what kubectl shows, unit by unit.

    Then, with the controller stopped, the checks' controllers answer: held's c2 Ready,
    bounce's c2 Retry (its 5th back-off: ~160 s, so it stays backed off while we look). A
    fresh snapshot's replay says held is released, bounce backed off and its cpu given to
    waiter, which is Reserved in turn; the controller started again does the same."""
    prefix = kq.unique("snap-ac")
    ns = kq.namespace(kubectl, prefix)
    q = f"{prefix}-q"
    kubectl.apply(kq.quota(q, ns, max_={"cpu": "3"}, policy="Priority"))
    held, freed, bounce, waiter = (f"{ns}/{n}" for n in ("held", "freed", "bounce", "waiter"))

    def replayed() -> Observed:
        out = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
        code, _, err = as_viewer("snapshot", "--controller-namespace", deployment[0],
                                 "--controller-deployment", deployment[1], "-o", out)
        assert code == 0, err
        text = out.read_text()
        assert "admissionChecks" in text and "not carried" not in text, text
        result = simulate(load_scenario(out))
        phases, messages = result.final_phases(), result.final_messages()
        return {k: (phases[k], messages.get(k)) for k in phases if k.startswith(f"{ns}/")}

    with RunningController(kubeconfig, oversell_rate="2"):
        kq.wait_for(lambda: kq.get(kubectl, QUEUES, q, "koord-queue"), what="queue made")
        checks = {"spec": {"admissionChecks": [{"name": "c1"}, {"name": "c2"}]}}
        kubectl("patch", QUEUES, q, "-n", "koord-queue", "--type=merge", "-p",
                json.dumps(checks))
        time.sleep(0.5)  # (the controller's Queue watch delivers the checks)
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
            unit_manifest(n, ns, q, cpu, 0) for n, cpu in (("held", 2), ("freed", 2),
                                                           ("bounce", 1))]})
        kq.wait_for(lambda: all(
            (kq.get(kubectl, UNITS, n, ns) or {}).get("status", {}).get("admissionChecks")
            for n in ("held", "freed", "bounce")), what="three units Reserved",
            state=lambda: observed(kubectl, ns))
        kubectl.apply(unit_manifest("waiter", ns, q, 2, 0))
        _set_check_status(kubectl, ns, "freed", c1="Ready", c2="Ready")
        _set_check_status(kubectl, ns, "held", c1="Ready")
        _set_check_status(kubectl, ns, "bounce", attempts=4)
        live = settled(kubectl, ns, 4)
        assert {k: v[0] for k, v in live.items()} == {
            held: "Reserved", freed: "Dequeued", bounce: "Reserved", waiter: "Enqueued"}
        assert live[freed][1] == "all admission checks success"
        assert live[held][1] == "Reserved resources success, waiting admission checks to be ready"
        assert replayed() == live
        assert observed(kubectl, ns) == live  # (still settled while it was read)

    _set_check_status(kubectl, ns, "held", c2="Ready")
    _set_check_status(kubectl, ns, "bounce", c2="Retry")
    predicted = replayed()
    assert {k: v[0] for k, v in predicted.items()} == {
        held: "Dequeued", freed: "Dequeued", bounce: "TimeoutBackoff", waiter: "Reserved"}
    assert predicted[held][1] == "all admission checks success"
    with RunningController(kubeconfig, oversell_rate="2"):
        kq.wait_for(lambda: _without_delay(observed(kubectl, ns)) == _without_delay(predicted),
                    timeout=30.0, what="the controller to do what the replay said",
                    state=lambda: (observed(kubectl, ns), predicted))
        for seen in (observed(kubectl, ns), predicted):
            message = seen[bounce][1] or ""
            assert message.startswith("admission check failed: c2 is Retry; retry in ")
            assert 144 <= int(message.rsplit(" ", 1)[1].rstrip("s")) <= 176  # the 5th: 160 s


def _running_pod(kubectl: Any, ns: str, name: str, node: str, cpu: str,
                 job: dict[str, Any] | None = None) -> None:
    """A pod where a kubelet would run it (none here does): created on `node`, its status
    Running, owned by `job` as the Job controller owns the pods it makes."""
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if job is not None:
        meta["ownerReferences"] = [{
            "apiVersion": "batch/v1", "kind": "Job", "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"], "controller": True}]
    kubectl.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "nodeName": node, "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox",
                        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}})
    kubectl("patch", "pod", name, "-n", ns, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"phase": "Running"}}))


def test_a_snapshot_with_nodes_replays_admitted_jobs_running_where_they_run(
    kubectl: Any, kubeconfig: Path, deployment: tuple[str, str],
    as_viewer: Callable[..., tuple[int, str, str]], tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Two 2-cpu nodes; Jobs r1 (two 1-cpu pods), r2 and new (one each) admitted, wait
    waiting on the quota (4 cpu at --oversellrate=2). r1's pods run on n1; r2's and a pod of
    no Job on n2; new has no pod yet (no Job controller here; a scheduler would find no room
    either). The viewer's `snapshot --nodes` carries the nodes, r1's and r2's running pods
    and n2's other pod, and `simulate` shows what kubectl shows: r1 and r2 Running where
    they run, new Dequeued (the replay's scheduler finds no room for it), wait Enqueued.
    Placed from scratch, new (first by name) would take the room and show Running."""
    prefix = kq.unique("snap-nodes")
    ns = kq.namespace(kubectl, prefix)
    pool = kq.unique("snappool")
    n1, n2 = f"{pool}-1", f"{pool}-2"
    for name in (n1, n2):
        make_node(kubectl, name, "2", labels={TEST_LABEL: pool})
    q = f"{prefix}-q"
    kubectl.apply(kq.quota(q, ns, max_={"cpu": "2", "memory": "8Gi"}, policy="Priority"))

    def job(name: str, pods: int) -> dict[str, Any]:
        made = kq.job(name, ns, q, cpu="1", memory="256Mi", parallelism=pods)
        made["spec"]["template"]["spec"]["nodeSelector"] = {TEST_LABEL: pool}
        return made

    keys = {n: f"{ns}/{n}" for n in ("r1", "r2", "new", "wait")}
    try:
        with RunningController(kubeconfig, oversell_rate="2"):
            kubectl.apply({"apiVersion": "v1", "kind": "List",
                           "items": [job("r1", 2), job("r2", 1), job("new", 1)]})
            kq.wait_for(lambda: all(kq.phase(kubectl, ns, n) == "Dequeued"
                                    for n in ("r1", "r2", "new")),
                        what="r1, r2 and new admitted", state=lambda: observed(kubectl, ns))
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            for name, node, pods in (("r1", n1, 2), ("r2", n2, 1)):
                made = kq.get(kubectl, "job", name, ns)
                assert made is not None
                for i in range(pods):
                    _running_pod(kubectl, ns, f"{name}-{i}", node, "1", made)
                kubectl("patch", "job", name, "-n", ns, "--subresource=status",
                        "--type=merge", "-p", json.dumps({"status": {
                            "startTime": now, "active": pods, "ready": pods}}))
            _running_pod(kubectl, ns, "other", n2, "1")
            kubectl.apply(job("wait", 1))
            live = settled(kubectl, ns, 4)
            assert {k: v[0] for k, v in live.items()} == {
                keys["r1"]: "Running", keys["r2"]: "Running", keys["new"]: "Dequeued",
                keys["wait"]: "Enqueued"}
            out = tmp_path_factory.mktemp("snap") / "snapshot.yaml"
            code, _, err = as_viewer("snapshot", "--nodes", "--controller-namespace",
                                     deployment[0], "--controller-deployment", deployment[1],
                                     "-o", out)
            assert code == 0, err
            assert observed(kubectl, ns) == live  # (still settled while it was read)
        doc = yaml.safe_load(out.read_text())
        nodes = {n["name"]: n for n in doc["nodes"]}
        assert "occupied" not in nodes[n1]
        assert nodes[n2]["occupied"] == {"pods": 1, "request": {"cpu": "1", "memory": "256Mi"}}
        units = {f"{u['namespace']}/{u['name']}": u for u in doc["units"]}
        assert {k: [(p["name"], p["node"]) for p in units[k].get("runningPods", [])]
                for k in keys.values()} == {
            keys["r1"]: [("r1-0", n1), ("r1-1", n1)], keys["r2"]: [("r2-0", n2)],
            keys["new"]: [], keys["wait"]: []}
        assert units[keys["new"]]["nodeSelector"] == {TEST_LABEL: pool}
        result = simulate(load_scenario(out))
        phases, messages = result.final_phases(), result.final_messages()
        assert {k: (phases[k], messages.get(k)) for k in live} == live
        assert not any(set(r.placements) & set(keys.values()) for r in result.steps)
        why = [e.message for r in result.steps for e in r.events if e.unit == keys["new"]]
        assert why and "Insufficient cpu" in why[0], why
    finally:
        kubectl("delete", "node", n1, n2, "--wait=false", check=False)


# --- what-if: each edit kind, then the same edit made for real --------------------------------


def whatif_after(as_viewer: Callable[..., tuple[int, str, str]], ns: str,
                 *edit: str) -> Observed:
    code, out, err = as_viewer("whatif", "-o", "json", "--steps", "3", *edit)
    assert code == 0, err
    doc = json.loads(out)
    return {
        u["unit"]: (u["after"]["phase"], u["after"]["message"] or None)
        for u in doc["units"] if u["unit"].startswith(f"{ns}/") and u["after"] is not None
    }


def patch_quota(kubectl: Any, name: str, ns: str, patch: dict[str, Any]) -> None:
    kubectl("patch", QUOTAS, name, "-n", ns, "--type=merge", "-p", json.dumps(patch))


def test_each_edit_kind_ends_where_the_live_cluster_ends_when_it_is_made(
    kubectl: Any, kubeconfig: Path, as_viewer: Callable[..., tuple[int, str, str]],
) -> None:
    """One small quota tree per edit kind (one namespace), each built so that its edit moves a
    unit: the edit is predicted from the cluster as the edits before it left it, the
    prediction must differ from what kubectl shows (else the comparison proves nothing; a min
    edit moves nothing, admission never reads min: docs/whatif.md), and then the edit is made
    for real and the units must end as predicted."""
    p = kq.unique("wi")
    ns = kq.namespace(kubectl, p)
    q = {n: f"{p}-{n}" for n in ("a", "m", "org1", "org2", "pq", "pol", "thr", "c")}
    intelligent = {"policy": "Intelligent"}
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
        kq.quota(q["a"], ns, max_={"cpu": "2"}, policy="Priority"),      # max, add
        kq.quota(q["m"], ns, max_={"cpu": "2"}, policy="Priority"),      # min
        kq.quota(q["org1"], ns, max_={"cpu": "2"}, policy="Priority"),   # parent
        kq.quota(q["org2"], ns, max_={"cpu": "4"}, policy="Priority"),
        kq.quota(q["pq"], ns, max_={"cpu": "4"}, parent=q["org1"], policy="Priority"),
        kq.quota(q["pol"], ns, max_={"cpu": "2"}, **intelligent),        # policy
        kq.quota(q["thr"], ns, max_={"cpu": "2"}, **intelligent),        # priority threshold
        kq.quota(q["c"], ns, max_={"cpu": "2"}, policy="Priority"),      # delete
    ]})
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
        # a: a2 waits on a's max (1 + 2 > 2)
        unit_manifest("a1", ns, q["a"], 1, 0), unit_manifest("a2", ns, q["a"], 2, 0),
        unit_manifest("m1", ns, q["m"], 1, 0), unit_manifest("m2", ns, q["m"], 2, 0),
        # pq under org1: p2 waits on org1 (2 + 1 > 2), not on pq
        unit_manifest("p1", ns, q["pq"], 2, 0), unit_manifest("p2", ns, q["pq"], 1, 0),
        # Intelligent (threshold 4): a high unit that never fits holds every low one back
        unit_manifest("ph", ns, q["pol"], 3, 7), unit_manifest("pl", ns, q["pol"], 1, 0),
        unit_manifest("th", ns, q["thr"], 3, 5), unit_manifest("tl", ns, q["thr"], 1, 0),
        unit_manifest("c1", ns, q["c"], 2, 0), unit_manifest("c2", ns, q["c"], 1, 0),
    ]})

    def patch(name: str, body: dict[str, Any]) -> Callable[[], None]:
        return lambda: patch_quota(kubectl, name, ns, body)

    def add() -> None:
        kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
            unit_manifest(f"a2-whatif-{i}", ns, q["a"], 2, 0) for i in (1, 2)]})

    edits: list[tuple[tuple[str, ...], Callable[[], Any]]] = [
        (("--max", f"{q['a']}=cpu=3"), patch(q["a"], {"spec": {"max": {"cpu": "3"}}})),
        (("--min", f"{q['m']}=cpu=1"), patch(q["m"], {"spec": {"min": {"cpu": "1"}}})),
        (("--parent", f"{q['pq']}={q['org2']}"),
         patch(q["pq"], {"metadata": {"labels": {QUOTA_PARENT_LABEL: q["org2"]}}})),
        (("--policy", f"{q['pol']}=Priority"),
         patch(q["pol"], {"metadata": {"labels": {QUEUE_POLICY_KEY: "Priority"}}})),
        (("--priority-threshold", f"{q['thr']}=8"),
         patch(q["thr"], {"metadata": {"annotations": {PRIORITY_THRESHOLD_ANNOTATION: "8"}}})),
        (("--add", f"{ns}/a2=2"), add),  # a is full again after its max edit: both wait
        (("--delete-quota", q["c"]), lambda: kubectl("delete", QUOTAS, q["c"], "-n", ns)),
    ]
    with RunningController(kubeconfig) as rc:
        settled(kubectl, ns, 12)
        for edit, make in edits:
            now = observed(kubectl, ns)
            expected = whatif_after(as_viewer, ns, *edit)
            if edit[0] == "--min":
                assert expected == now
            else:
                assert expected != now, f"{' '.join(edit)} changes nothing here: {now}"
            make()
            kq.wait_for(lambda: observed(kubectl, ns) == expected, timeout=20.0,  # noqa: B023
                        what=f"the cluster after {' '.join(edit)} to match the what-if",
                        state=lambda: (observed(kubectl, ns), expected))  # noqa: B023
        now = observed(kubectl, ns)
        expected = whatif_after(as_viewer, ns, "--set-oversellrate", "2", "--oversellrate", "1")
        assert expected != now, f"--set-oversellrate 2 changes nothing here: {now}"
        rc.stop()
    with RunningController(kubeconfig, oversell_rate="2"):
        kq.wait_for(lambda: observed(kubectl, ns) == expected, timeout=20.0,
                    what="the cluster at --oversellrate=2 to match the what-if",
                    state=lambda: (observed(kubectl, ns), expected))


def test_bad_edits_exit_2_name_the_edit_and_write_nothing(
    kubectl: Any, as_viewer: Callable[..., tuple[int, str, str]], tmp_path: Path,
) -> None:
    p = kq.unique("wibad")
    ns = kq.namespace(kubectl, p)
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
        kq.quota(f"{p}-top", ns, max_={"cpu": "4"}),
        kq.quota(f"{p}-leaf", ns, max_={"cpu": "2"}, parent=f"{p}-top"),
    ]})
    before = kubectl.json("get", QUOTAS, "-n", ns)["items"]
    plot = tmp_path / "never.png"
    for edit, says in (
        (("--max", f"{p}-nope=cpu=1"), f"no quota '{p}-nope'"),
        (("--parent", f"{p}-top={p}-leaf"), f"would close a cycle: {p}-top -> {p}-leaf"),
        (("--max", f"{p}-leaf=cpu=lots"), "'lots': does not match the quantity syntax"),
    ):
        code, out, err = as_viewer("whatif", "--plot", plot, *edit, reads=False)
        assert code == 2 and out == ""
        assert f"edit {' '.join(edit)}: " in err and says in err
        assert not plot.exists()
    assert kubectl.json("get", QUOTAS, "-n", ns)["items"] == before


# --- the scheduler core: whatif --nodes -------------------------------------------------------


def _why_unbound(kubectl: Any, ns: str, pods: tuple[str, ...]) -> dict[str, Any]:
    """What an operator would look at when a pod stays unbound: its gates and conditions,
    the queues it could be in, the nodes and the pods the scheduler sees there."""
    seen: dict[str, Any] = {}
    for name in pods:
        pod = kq.get(kubectl, "pod", name, ns) or {}
        seen[name] = {"gates": pod.get("spec", {}).get("schedulingGates"),
                      "conditions": pod.get("status", {}).get("conditions"),
                      "annotations": pod.get("metadata", {}).get("annotations")}
    seen["queues"] = {q["metadata"]["name"]: (q.get("spec"), q.get("status"))
                      for q in kubectl.json("get", "queues.scheduling.volcano.sh")["items"]}
    seen["podgroups"] = [(g["metadata"]["name"], g.get("spec"), g.get("status")) for g in
                         kubectl.json("get", "podgroups.scheduling.volcano.sh", "-n", ns)["items"]]
    seen["events"] = [(e.get("reason"), e.get("message")) for e in
                      kubectl.json("get", "events", "-n", ns)["items"]]
    return seen


def test_whatif_nodes_says_where_a_pending_pod_would_place_and_a_real_node_takes_it(
    kubectl: Any, kubeconfig: Path, as_viewer: Callable[..., tuple[int, str, str]],
) -> None:
    """Two 2-cpu pods, one 2-cpu node: one binds, one waits. `whatif --nodes --add-nodes`
    (as the viewer) says the waiting one would place on the added node; the same node made
    for real takes it. `--drain-node` says the bound one would be pending again."""
    ns = kq.namespace(kubectl, kq.unique("winodes"))
    pool = kq.unique("wipool")
    make_node(kubectl, f"{pool}-a", "2", labels={TEST_LABEL: pool})
    for name in ("p1", "p2"):
        make_pod(kubectl, ns, name, cpu="2", selector={TEST_LABEL: pool})
    settings = ControllerSettings(kubeconfig=str(kubeconfig), schedule_period=0.2,
                                  metrics_port=0, log_format="console")
    added: list[str] = []
    try:
        with SchedulerRunner(settings):
            bound = kq.wait_for(lambda: next((p for p in ("p1", "p2") if node_of(kubectl, ns, p)),
                                             None), what="one pod bound",
                                state=lambda: _why_unbound(kubectl, ns, ("p1", "p2")))
            waiting = "p2" if bound == "p1" else "p1"

            def mine(*edit: str) -> list[dict[str, str]]:
                code, out, err = as_viewer("whatif", "--nodes", "-o", "json", *edit)
                assert code == 0, err
                return [c for changes in json.loads(out)["queues"].values() for c in changes
                        if c["pod"].startswith(f"{ns}/")]

            (change,) = mine("--add-nodes", f"1=cpu=2,memory=8Gi,pods=110;{TEST_LABEL}={pool}")
            assert change["pod"] == f"{ns}/{waiting}" and change["before"] == "pending"
            node = change["after"].removeprefix("placed on ")
            assert node.startswith("whatif-node-"), change
            assert mine("--drain-node", f"{pool}-a") == [
                {"pod": f"{ns}/{bound}", "before": f"on {pool}-a", "after": "pending"}]
            make_node(kubectl, node, "2", labels={TEST_LABEL: pool})
            added.append(node)
            assert kq.wait_for(lambda: node_of(kubectl, ns, waiting), what="bound") == node
    finally:
        kubectl("delete", "node", f"{pool}-a", *added, "--wait=false", check=False)
