"""`koordqueue explain`: one test per pending reason, from scenarios and from API objects."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.names import MSG_NO_QUOTA_LABEL, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.simulation.explain import (
    ClusterView,
    Reason,
    add_job_notes,
    explain,
    explain_missing,
    view_from_scenario,
)
from koordqueue.simulation.scenario import load_scenario, parse_scenario
from tests.unit.cli.helpers import EXAMPLES, run

HIERARCHY = EXAMPLES / "hierarchy.yaml"
POLICIES = EXAMPLES / "policies.yaml"
PREEMPTION = EXAMPLES / "preemption.yaml"
ERRORS = EXAMPLES / "quota-errors.yaml"


def _explain(path: Path, key: str, step: int | None = None) -> Any:
    result = explain(view_from_scenario(load_scenario(path), step), key)
    assert result is not None
    return result


# --- each reason, from the example scenarios ----------------------------------------------


def test_ancestor_exhaustion_names_the_ancestor_although_own_quota_has_room() -> None:
    ex = _explain(HIERARCHY, "ml/a-eval", step=1)
    assert ex.reason is Reason.ANCESTOR_EXHAUSTED
    assert ex.message == "limited quotaName:org, limited resKey:cpu,"
    assert ex.blocking_quota == "org"
    assert [level.quota for level in ex.chain] == ["team-a", "org"]
    assert ex.chain[0].fits and not ex.chain[1].fits
    assert "although team-a itself has room" in ex.summary


def test_missing_ancestor_message_is_verbatim() -> None:
    ex = _explain(HIERARCHY, "ml/c-job")
    assert ex.reason is Reason.ANCESTOR_NOT_FOUND
    assert ex.message == (
        "CheckUsage found quota not exist, item:ml/c-job, quotaName:ghost, "
        "visited quota: team-c,ghost"
    )


def test_unknown_quota_is_queue_not_found_with_the_event_message() -> None:
    ex = _explain(HIERARCHY, "ml/stray")
    assert ex.reason is Reason.QUEUE_NOT_FOUND
    assert ex.message == "queue nope not found for queueUnit ml/stray"
    assert not ex.quota_exists and not ex.queue_exists


def test_no_label_unit_reports_the_status_message() -> None:
    ex = _explain(HIERARCHY, "ml/unlabeled")
    assert ex.reason is Reason.NO_QUOTA_LABEL
    assert ex.message == MSG_NO_QUOTA_LABEL
    assert ex.quota is None and ex.position is None
    assert "koordqueue_units_unmapped" in ex.summary


def test_invalid_label_value_is_its_own_reason() -> None:
    ex = _explain(ERRORS, "ops/typo")
    assert ex.reason is Reason.INVALID_QUOTA_LABEL
    assert "'fine quota'" in (ex.message or "")


def test_unregistered_policy_is_add_queue_fail() -> None:
    ex = _explain(ERRORS, "ops/unserved")
    assert ex.reason is Reason.ADD_QUEUE_FAIL
    assert ex.policy == "Round"
    assert ex.message is not None and "'Round'" in ex.message


def test_cycle_message_is_verbatim() -> None:
    ex = _explain(ERRORS, "ops/looped")
    assert ex.reason is Reason.QUOTA_CYCLE
    assert ex.message == (
        "CheckUsage found cycle reference, item:ops/looped, quotaName:loop-a, "
        "visited quota: loop-a,loop-b"
    )


def test_empty_max_rejects_any_request() -> None:
    ex = _explain(ERRORS, "ops/nothing-allowed")
    assert ex.reason is Reason.EMPTY_QUOTA_SPEC
    assert ex.message == (
        "limited quotaName:empty, quota spec is empty but queue unit res is not empty"
    )
    assert ex.chain[0].empty_max


def test_own_quota_full() -> None:
    ex = _explain(PREEMPTION, "ml/batch")
    assert ex.reason is Reason.QUOTA_EXCEEDED
    assert ex.message == "limited quotaName:train, limited resKey:cpu,"


def test_block_policy_head_holds_a_unit_that_fits() -> None:
    ex = _explain(POLICIES, "block/small", step=1)
    assert ex.reason is Reason.BLOCKED_BY_HEAD
    assert ex.position == 3 and ex.ahead == ["block/big", "block/mid"]
    assert "block/big" in ex.summary


def test_priority_policy_does_not_block_behind_a_unit_that_does_not_fit() -> None:
    assert _explain(POLICIES, "prio/small", step=1).reason is Reason.ADMITTED
    assert _explain(POLICIES, "prio/big", step=1).reason is Reason.QUOTA_EXCEEDED


def test_intelligent_high_subqueue_is_head_of_line_and_holds_the_low_units() -> None:
    assert _explain(POLICIES, "intel/mid", step=1).reason is Reason.BLOCKED_BY_HEAD
    low = _explain(POLICIES, "intel/small", step=1)
    assert low.reason is Reason.BLOCKED_BY_HEAD and "intel/big" in low.summary


def test_unit_beyond_max_depth() -> None:
    ex = _explain(POLICIES, "shallow/small")
    assert ex.reason is Reason.BEYOND_MAX_DEPTH
    assert ex.position == 2


def test_wait_for_pods_running_holds_the_queue() -> None:
    ex = _explain(PREEMPTION, "web/worker")
    assert ex.reason is Reason.WAITING_FOR_PODS_RUNNING
    assert "web/api" in ex.summary


def test_preempted_unit_is_reclaimed_then_back_in_the_queue() -> None:
    """Issue 35 point 7: marked at step 1 (still Dequeued, holding its quota), the next round
    reclaims it (explain's dry round says so), then it waits in its queue."""
    before = _explain(PREEMPTION, "ml/batch", step=0)
    marked = _explain(PREEMPTION, "ml/batch", step=1)
    after = _explain(PREEMPTION, "ml/batch", step=2)
    assert before.reason is Reason.ADMITTED
    assert marked.phase == "Dequeued" and marked.reason is Reason.RECLAIMED
    assert after.phase == "Enqueued" and after.reason is Reason.QUOTA_EXCEEDED


def test_admitted_and_finished_units() -> None:
    admitted = _explain(HIERARCHY, "data/b-report")
    assert admitted.reason is Reason.ADMITTED and admitted.phase == "Dequeued"
    finished = _explain(HIERARCHY, "ml/a-train")
    assert finished.reason is Reason.FINISHED and finished.phase == "Succeed"


def test_unit_that_fits_is_reported_as_fitting() -> None:
    scenario = parse_scenario(
        "quotas: [{name: q, max: {cpu: '2'}}]\n"
        "units: [{name: u, quota: q, resource: {cpu: '1'}, arrive: 1}]\nsteps: 2\n",
        "inline.yaml",
    )
    # arrives at step 1: at step 0 it does not exist yet; after step 1 it is admitted
    assert explain(view_from_scenario(scenario, 0), "default/u") is None
    assert explain(view_from_scenario(scenario, 1), "default/u").reason is Reason.ADMITTED  # type: ignore[union-attr]


def test_position_follows_priority_then_arrival() -> None:
    scenario = parse_scenario(
        "quotas: [{name: q, max: {cpu: '1'}}]\n"
        "units:\n"
        "  - {name: holder, quota: q, resource: {cpu: '1'}}\n"
        "  - {name: early, quota: q, resource: {cpu: '1'}, arrive: 1}\n"
        "  - {name: late, quota: q, resource: {cpu: '1'}, arrive: 2}\n"
        "  - {name: urgent, quota: q, priority: 9, resource: {cpu: '1'}, arrive: 3}\n"
        "steps: 4\n",
        "inline.yaml",
    )
    ex = explain(view_from_scenario(scenario), "default/late")
    assert ex is not None
    assert (ex.position, ex.queue_length) == (3, 3)
    assert ex.ahead == ["default/urgent", "default/early"]


def test_step_outside_the_scenario_is_rejected() -> None:
    with pytest.raises(ValueError, match="outside the scenario"):
        view_from_scenario(load_scenario(HIERARCHY), 99)


# --- the live view: API objects in, same engine ---------------------------------------------


def _quota(name: str, cpu: str, parent: str | None = None) -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"metadata": {"name": name, "namespace": "team", "labels": labels},
            "spec": {"max": {"cpu": cpu}}}


def _queue(name: str, policy: str = "Priority") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "koord-queue"},
            "spec": {"queuePolicy": policy, "priority": 1000}}


def _unit(name: str, quota: str | None, cpu: str, phase: str | None = None,
          message: str | None = None) -> dict[str, Any]:
    labels = {QUOTA_NAME_LABEL: quota} if quota else {}
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if message:
        status["message"] = message
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", "labels": labels,
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"resource": {"cpu": cpu}}, "status": status}


def test_admitted_phases_count_as_usage_in_the_live_view() -> None:
    view = ClusterView.from_objects(
        [_quota("org", "4"), _quota("team-a", "4", parent="org"), _quota("team-b", "4", "org")],
        [_queue("org"), _queue("team-a"), _queue("team-b")],
        [
            _unit("running", "team-b", "3", "Running"),
            _unit("waiting", "team-a", "2", "Enqueued",
                  "limited quotaName:org, limited resKey:cpu,"),
        ],
    )
    ex = explain(view, "ns/waiting")
    assert ex is not None
    assert ex.reason is Reason.ANCESTOR_EXHAUSTED and ex.blocking_quota == "org"
    assert ex.status_message == "limited quotaName:org, limited resKey:cpu,"


def test_oversell_rate_scales_every_limit() -> None:
    objects = ([_quota("q", "2")], [_queue("q")], [_unit("u", "q", "3")])
    plain = explain(ClusterView.from_objects(*objects), "ns/u")
    oversold = explain(ClusterView.from_objects(*objects, oversell_rate=2), "ns/u")
    assert plain is not None and plain.reason is Reason.QUOTA_EXCEEDED
    assert oversold is not None and oversold.reason is Reason.FITS


def test_quota_without_queue_is_queue_not_found_and_says_why() -> None:
    view = ClusterView.from_objects([_quota("q", "2")], [], [_unit("u", "q", "1")])
    ex = explain(view, "ns/u")
    assert ex is not None and ex.reason is Reason.QUEUE_NOT_FOUND
    assert ex.quota_exists and not ex.queue_exists
    assert "is it running" in ex.summary


def test_invalid_quota_is_mentioned_when_the_unit_names_it() -> None:
    bad = {"metadata": {"name": "q", "namespace": "team"}, "spec": {"max": {"cpu": "lots"}}}
    view = ClusterView.from_objects([bad], [_queue("q")], [_unit("u", "q", "1")])
    ex = explain(view, "ns/u")
    assert ex is not None and ex.reason is Reason.QUEUE_NOT_FOUND
    # one statement (issue 33.6: it said both "no ElasticQuota exists" and "exists but is
    # invalid"), with the controller's own reason for refusing it
    assert ex.summary.startswith("ElasticQuota team/q exists, but the controller refuses it")
    assert "spec.max[cpu]" in ex.summary and "no ElasticQuota" not in ex.summary
    assert ex.quota_refused == [{"namespace": "team", "problems": ex.quota_refused[0]["problems"],
                                 "kept": False}]


def test_job_without_unit_is_explained_and_unknown_names_are_not() -> None:
    view = ClusterView.from_objects([], [], [])
    job = {"metadata": {"name": "j", "namespace": "ns", "labels": {}}, "spec": {"suspend": False}}
    ex = explain_missing(view, "ns/j", job)
    assert ex is not None and ex.reason is Reason.NO_QUEUE_UNIT
    assert any("not suspended" in n for n in ex.notes)
    assert explain_missing(view, "ns/j", None) is None


# --- the command ---------------------------------------------------------------------------


def test_cli_json_output_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "explain", "--scenario", HIERARCHY, "--step", "1", "-o", "json",
                 "-n", "ml", "a-eval")
    assert result.code == 0
    doc = json.loads(result.out)
    assert doc["reason"] == "AncestorExhausted"
    assert doc["blockingQuota"] == "org"
    assert doc["chain"][1]["resources"]["cpu"] == {
        "limit": "8", "used": "8", "request": "1500m", "free": "0", "fits": False
    }


def test_cli_table_marks_the_blocking_level(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "explain", "--scenario", HIERARCHY, "--step", "1", "ml/a-eval")
    assert result.code == 0
    blocking = [line for line in result.out.splitlines() if "<- blocks" in line]
    assert len(blocking) == 1 and blocking[0].split()[:3] == ["1", "org", "cpu"]


@pytest.mark.parametrize(
    ("argv", "code"),
    [
        (["ml/nobody"], 1),
        (["a/b/c"], 2),
        (["-n", "other", "ml/a-eval"], 2),
        (["--step", "99", "ml/a-eval"], 2),
        (["--step", "x", "ml/a-eval"], 2),
    ],
)
def test_cli_exit_codes(capsys: pytest.CaptureFixture[str], argv: list[str], code: int) -> None:
    assert run(capsys, "explain", "--scenario", HIERARCHY, *argv).code == code


def test_step_without_scenario_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "explain", "--step", "1", "ml/a-eval")
    assert result.code == 2 and "--step needs --scenario" in result.err


def test_scenario_and_kubeconfig_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    result = run(capsys, "explain", "--scenario", HIERARCHY, "--kubeconfig", "k", "ml/a-eval")
    assert result.code == 2


def test_unreadable_kubeconfig_is_bad_input(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run(capsys, "explain", "--kubeconfig", tmp_path / "missing", "-n", "ns", "job")
    assert result.code == 2 and "kubeconfig" in result.err


def test_unreachable_cluster_exits_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    result = run(capsys, "explain", "--kubeconfig", kubeconfig, "-n", "ns", "job")
    assert result.code == 1 and "cannot read the cluster" in result.err


def test_bad_oversell_rate_is_bad_input_before_any_cluster_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    result = run(capsys, "explain", "--oversellrate", "-1", "-n", "ns", "job")
    assert result.code == 2 and "oversell rate" in result.err


def test_admitted_unit_whose_job_is_still_suspended_gets_a_note() -> None:
    view = ClusterView.from_objects(
        [_quota("q", "2")], [_queue("q")], [_unit("u", "q", "1", "Dequeued")]
    )
    ex = explain(view, "ns/u")
    assert ex is not None and ex.reason is Reason.ADMITTED
    add_job_notes(ex, {"metadata": {"name": "u"}, "spec": {"suspend": True}})
    assert any("still suspended" in note for note in ex.notes)


# --- explain reads the engine's dry round (issue 15): the real policy state, not a re-derivation


def _inline(text: str) -> Any:
    return parse_scenario(text, "inline.yaml")


def test_intelligent_queue_ignores_max_depth_like_the_engine() -> None:
    scenario = _inline(
        "quotas: [{name: q, policy: Intelligent, max: {cpu: '1'},"
        " annotations: {koord-queue/max-depth: '1'}}]\n"
        "units:\n"
        "  - {name: holder, quota: q, resource: {cpu: '1'}}\n"
        "  - {name: a, quota: q, resource: {cpu: '1'}, arrive: 1}\n"
        "  - {name: b, quota: q, resource: {cpu: '1'}, arrive: 1}\n"
        "steps: 2\n"
    )
    ex = explain(view_from_scenario(scenario), "default/b")
    assert ex is not None
    assert ex.reason is Reason.QUOTA_EXCEEDED  # tried (no depth limit), does not fit


def test_block_timeout_pass_lets_a_fitting_unit_through_in_explain() -> None:
    scenario = _inline(
        "quotas: [{name: q, policy: Block, max: {cpu: '2'},"
        " annotations: {koord-queue/block-timeout-seconds: '2'}}]\n"
        "units:\n"
        "  - {name: holder, quota: q, resource: {cpu: '1'}}\n"
        "  - {name: big, quota: q, priority: 5, resource: {cpu: '2'}, arrive: 1}\n"
        "  - {name: small, quota: q, resource: {cpu: '1'}, arrive: 1}\n"
        "steps: 3\n"
    )
    # blocked at step 1: the next round (t=2) is still inside the 2 s hold
    held = explain(view_from_scenario(scenario, 1), "default/small")
    assert held is not None and held.reason is Reason.BLOCKED_BY_HEAD
    # after step 2 the next round (t=3) is past the hold: the opt-in pass admits small
    passing = explain(view_from_scenario(scenario, 2), "default/small")
    assert passing is not None and passing.reason is Reason.FITS


def test_block_head_is_told_it_holds_its_own_quota() -> None:
    scenario = _inline(
        "quotas: [{name: q, policy: Block, max: {cpu: '2'}}]\n"
        "units:\n"
        "  - {name: holder, quota: q, resource: {cpu: '1'}}\n"
        "  - {name: big, quota: q, resource: {cpu: '2'}, arrive: 1}\n"
        "steps: 3\n"
    )
    ex = explain(view_from_scenario(scenario), "default/big")
    assert ex is not None and ex.reason is Reason.BLOCKED_BY_HEAD
    assert "its head" in ex.summary
    assert ex.message == "limited quotaName:q, limited resKey:cpu,"


def test_live_view_says_it_cannot_see_the_block() -> None:
    view = ClusterView.from_objects(
        [_quota("q", "1")],
        [_queue("q", "Block")],
        [_unit("holder", "q", "1", phase="Dequeued"), _unit("u", "q", "1")],
        now=0.0,
    )
    ex = explain(view, "ns/u")
    assert ex is not None and ex.reason is Reason.QUOTA_EXCEEDED
    assert any("controller's memory" in note for note in ex.notes)


def test_a_reserved_unit_is_explained_as_waiting_on_its_admission_checks() -> None:
    """Issue 35 point 5: explain knows the state "waiting on a check"."""
    from koordqueue.simulation.explain import NOTE_RESERVED

    quota = {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
        "metadata": {"name": "q", "namespace": "default"}, "spec": {"max": {"cpu": "2"}},
    }
    unit = {
        "metadata": {"name": "u", "namespace": "ns", "uid": "u1",
                     "labels": {QUOTA_NAME_LABEL: "q"}},
        "spec": {"resource": {"cpu": "1"}},
        "status": {"phase": "Reserved",
                   "admissionChecks": [{"name": "ad1", "state": "Pending"}]},
    }
    ex = explain(ClusterView.from_objects([quota], [], [unit]), "ns/u")
    assert ex is not None and ex.phase == "Reserved"
    assert NOTE_RESERVED in ex.notes
