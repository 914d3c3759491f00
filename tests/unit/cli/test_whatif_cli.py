"""`koordqueue whatif` and `koordqueue snapshot` on the command line (issue 29)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from koordqueue.cli.snapshot import (
    SnapshotError,
    controller_flags,
    deployment_flags,
)
from tests.unit.cli.helpers import EXAMPLES, ROOT, run

SNAPSHOT = EXAMPLES / "whatif-snapshot.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_worked_example_admits_three_jobs_and_preempts_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT / "docs")  # the path the docs show
    result = run(capsys, "whatif", "--snapshot", "examples/whatif-snapshot.yaml",
                 "--max", "team-a=cpu=12")
    assert result.code == 0, result.err
    assert "summary: 3 admitted, 0 preempted, 1 still waiting" in result.out
    assert ("after:  team-a/eval-1-job-qu, team-a/eval-2-job-qu, team-a/sweep-job-qu"
            in result.out)
    doc_text = (ROOT / "docs" / "whatif.md").read_text("utf-8")
    assert result.out.strip() in doc_text  # the docs show this very output


def test_json_has_every_unit_both_worlds_and_the_usage_by_step(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "whatif", "--snapshot", SNAPSHOT, "--max", "team-a=cpu=12",
                 "-o", "json")
    doc = json.loads(result.out)
    units = {u["unit"]: u for u in doc["units"]}
    assert len(units) == 7
    assert units["team-a/sweep-job-qu"]["after"]["admittedAt"] == 0
    assert units["team-a/train-1-job-qu"]["change"] == "unchanged"
    assert units["team-a/train-1-job-qu"]["before"]["heldAtStart"] is True
    assert doc["admissionOrder"]["before"] == []
    assert len(doc["usageByStep"]["after"]) == doc["steps"] == 2
    assert {q["quota"]: q["used"]["after"] for q in doc["usage"]}["team-a"] == "cpu:12,memory:40Gi"


def test_edits_apply_in_order_from_the_file_then_the_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    edits = tmp_path / "edits.yaml"
    edits.write_text("edits:\n  - max: team-a=cpu=12\n  - add: team-a/finetune-job-qu=1\n")
    result = run(capsys, "whatif", "--snapshot", SNAPSHOT, "--edits", edits,
                 "--set-oversellrate", "2", "-o", "json")
    doc = json.loads(result.out)
    assert doc["edits"][0] == f"{edits}: edits[0] (max: team-a=cpu=12)"
    assert doc["edits"][2] == "--set-oversellrate 2"
    # twice the max: finetune and its copy get in too
    assert doc["summary"] == "4 admitted, 0 preempted, 1 new, admitted"


@pytest.mark.parametrize(("argv", "says"), [
    (("--max", "team-z=cpu=1"), "edit --max team-z=cpu=1: no quota 'team-z' in the snapshot"),
    (("--parent", "org=team-a"), "edit --parent org=team-a: would close a cycle: "
                                 "org -> team-a -> org"),
    (("--min", "team-a=cpu=1x"), "edit --min team-a=cpu=1x: min.cpu: '1x'"),
    (("--add", "team-a/nope=3"), "edit --add team-a/nope=3: no unit team-a/nope"),
    (("--runtime", "0"), "--runtime must be >= 1"),
])
def test_bad_input_exits_2_names_the_edit_and_writes_no_plot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, argv: tuple[str, ...], says: str
) -> None:
    plot = tmp_path / "p.png"
    result = run(capsys, "whatif", "--snapshot", SNAPSHOT, "--plot", plot, *argv)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("koordqueue whatif: error: ") and says in result.err
    assert not plot.exists()


def test_a_bad_edits_file_names_the_item(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    edits = tmp_path / "edits.yaml"
    edits.write_text("- max: team-a=cpu=12\n- grow: team-a\n")
    result = run(capsys, "whatif", "--snapshot", SNAPSHOT, "--edits", edits)
    assert result.code == 2
    assert f"edit {edits}: edits[1] (grow: team-a): unknown edit kind 'grow'" in result.err


def test_the_plot_has_both_worlds(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    plot = tmp_path / "whatif.png"
    result = run(capsys, "whatif", "--snapshot", SNAPSHOT, "--max", "team-a=cpu=12",
                 "--runtime", "2", "--plot", plot)
    assert result.code == 0, result.err
    assert plot.read_bytes().startswith(PNG_MAGIC)


def test_a_snapshot_file_round_trips_through_simulate(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "simulate", SNAPSHOT, "-o", "json")
    doc = json.loads(result.out)
    assert doc["final"]["team-a/train-1-job-qu"] == "Running"
    assert doc["final"]["team-a/eval-1-job-qu"] == "Enqueued"
    assert doc["steps"][0]["admitted"] == []


# --- the controller's flags ------------------------------------------------------------------


def _deployment(args: list[str], env: list[dict[str, str]] | None = None) -> dict[str, object]:
    return {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "args": ["serve"]},
        {"name": "controller", "args": args, "env": env or []},
    ]}}}}


def test_flags_come_from_the_shipped_deployment() -> None:
    shipped = next(d for d in yaml.safe_load_all((ROOT / "deploy" / "deployment.yaml").read_text())
                   if d and d["kind"] == "Deployment")
    assert deployment_flags(shipped) == {
        "oversell_rate": "1", "namespace": "koord-queue",
        "feature_gates": "SchedulingGatesQueueAdmission=false", "admission_period": "1.0"}


def test_flags_given_beat_the_env_and_the_defaults_stay_out() -> None:
    assert deployment_flags(_deployment(["run", "--oversellrate", "1.5"])) == {
        "oversell_rate": "1.5"}
    env = [{"name": "KOORDQUEUE_NAMESPACE", "value": "queues"},
           {"name": "KOORDQUEUE_OVERSELL_RATE", "value": "3"}]
    assert deployment_flags(_deployment(["run", "--oversellrate=2"], env)) == {
        "oversell_rate": "2", "namespace": "queues"}
    assert deployment_flags(None) == {}


def _args(**kw: object) -> argparse.Namespace:
    base = {"oversellrate": None, "queue_namespace": None, "feature_gates": None,
            "controller_namespace": "koord-queue", "controller_deployment": "koordqueue-controller"}
    return argparse.Namespace(**{**base, **kw})


def test_the_command_line_beats_the_deployment() -> None:
    deployment = _deployment(["run", "--oversellrate=2", "--namespace=kq"])
    flags = controller_flags(_args(), deployment)
    assert (flags.oversell_rate, flags.queue_namespace) == ("2", "kq")
    assert flags.source == "Deployment koord-queue/koordqueue-controller"
    flags = controller_flags(_args(oversellrate="3"), deployment)
    assert (flags.oversell_rate, flags.queue_namespace) == ("3", "kq")
    flags = controller_flags(_args(), None)
    assert (flags.oversell_rate, flags.queue_namespace, flags.source) == (
        "1", "koord-queue", "the defaults")
    with pytest.raises(SnapshotError, match="--oversellrate 'lots'"):
        controller_flags(_args(oversellrate="lots"), None)


def test_the_active_gate_comes_from_the_deployment_or_the_command_line() -> None:
    """spec.active counts only under QueueUnitActive: the snapshot must know the gate."""
    deployment = _deployment(["run", "--feature-gates=QueueUnitActive=true"])
    assert controller_flags(_args(), deployment).feature_gates == "QueueUnitActive=true"
    assert controller_flags(_args(feature_gates="QueueUnitActive=false"),
                            deployment).feature_gates == "QueueUnitActive=false"
    env = [{"name": "KOORDQUEUE_FEATURE_GATES", "value": "QueueUnitActive=true"}]
    assert deployment_flags(_deployment(["run"], env)) == {"feature_gates": "QueueUnitActive=true"}
    with pytest.raises(SnapshotError, match="--feature-gates 'Nope=true'"):
        controller_flags(_args(feature_gates="Nope=true"), None)


def test_snapshot_without_a_cluster_fails_cleanly_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("not: [a kubeconfig")
    out = tmp_path / "snap.yaml"
    result = run(capsys, "snapshot", "--kubeconfig", kubeconfig, "-o", out)
    assert result.code == 2 and "koordqueue snapshot: error: cannot load kubeconfig" in result.err
    assert not out.exists()


def test_the_viewer_role_lists_every_kind_the_schedulers_relist_reads() -> None:
    """`whatif --nodes` fills the scheduler's cache by its relist; a kind the role cannot list
    is read as empty (an optional kind's 403) and the dry session decides on less than the
    scheduler does (the e2e found ResourceQuotas refused after the resourcequota plugin)."""
    from koordqueue.kube.scheduler.scheduler import convert_kind
    from koordqueue.kube.scheduler.store import CachedKind

    role = yaml.safe_load((ROOT / "deploy" / "whatif-viewer.yaml").read_text("utf-8"))
    listed = {(group, resource) for rule in role["rules"] if "list" in rule["verbs"]
              for group in rule["apiGroups"] for resource in rule["resources"]}
    for kind in CachedKind:
        rest = convert_kind(kind)
        assert (rest.group, rest.plural) in listed, kind


def test_snapshot_nodes_are_the_schedulers_ready_nodes_and_the_rest_is_a_note() -> None:
    """`snapshot --nodes` reads what `whatif --nodes` reads (the scheduler's cache): its ready
    nodes, converted as it converts them, and the pods it keeps; a node that is not Ready, or
    whose allocatable cannot be read, is a note."""
    from koordqueue.cli.whatif_nodes import live_nodes
    from koordqueue.kube.scheduler.cache import SchedulerCache
    from koordqueue.kube.scheduler.store import CachedKind

    def node(name: str, ready: str, cpu: str) -> dict[str, object]:
        return {"metadata": {"name": name, "labels": {"zone": "a"}},
                "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"cpu": cpu},
                           "conditions": [{"type": "Ready", "status": ready}]}}

    cache = SchedulerCache()
    cache.replace(CachedKind.NODE, [node("up", "True", "4"), node("down", "False", "4"),
                                    node("odd", "True", "lots")])
    running = {"metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
               "spec": {"nodeName": "up", "schedulerName": "default-scheduler"},
               "status": {"phase": "Running"}}
    cache.replace(CachedKind.POD, [running])
    live = live_nodes(cache)
    assert sorted(n.name for n in live.nodes) == ["odd", "up"]
    up = next(n for n in live.nodes if n.name == "up")
    assert (up.allocatable.to_quantities(), up.labels, [t.key for t in up.taints]) == (
        {"cpu": "4"}, {"zone": "a"}, ["k"])
    assert [p["metadata"]["name"] for p in live.pods] == ["p"]
    assert live.notes[0] == "node down is not Ready: left out (the scheduler places nothing there)"
    assert "node odd allocatable" in live.notes[1] and "carried as empty" in live.notes[1]
