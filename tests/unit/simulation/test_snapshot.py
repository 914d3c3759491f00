"""`koordqueue snapshot`'s fold (simulation/snapshot.py): API objects in, a scenario out that
replays the controller's next round (issue 29 part 1)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    QUEUE_POLICY_KEY,
    QUOTA_LAST_VALID_FIELD,
    QUOTA_NAME_LABEL,
    QUOTA_PARENT_LABEL,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import (
    QuotaDef,
    Scenario,
    ScenarioError,
    UnitDef,
    parse_scenario,
)
from koordqueue.simulation.simulator import simulate
from koordqueue.simulation.snapshot import snapshot_from_objects

NOW = 1_800_000_000.0


def _ts(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def quota(name: str, cpu: str, parent: str | None = None, policy: str | None = None,
          **extra: Any) -> dict[str, Any]:
    labels = {}
    if parent:
        labels[QUOTA_PARENT_LABEL] = parent
    if policy:
        labels[QUEUE_POLICY_KEY] = policy
    return {"metadata": {"name": name, "namespace": "default", "labels": labels,
                         "creationTimestamp": _ts(NOW - 1000)},
            "spec": {"max": {"cpu": cpu}}, **extra}


def unit(name: str, quota_name: str | None, cpu: str, *, phase: str | None = None,
         message: str | None = None, age: float = 100.0, priority: int = 0) -> dict[str, Any]:
    labels = {QUOTA_NAME_LABEL: quota_name} if quota_name else {}
    status = {k: v for k, v in (("phase", phase), ("message", message)) if v}
    return {"metadata": {"name": name, "namespace": "ns", "labels": labels,
                         "creationTimestamp": _ts(NOW - age)},
            "spec": {"resource": {"cpu": cpu}, "priority": priority}, "status": status}


def replay(objects: tuple[list[Any], list[Any], list[Any]], **kw: Any) -> tuple[Any, Any]:
    snap = snapshot_from_objects(*objects, now=NOW, **kw)
    result = simulate(parse_scenario(snap.to_yaml(), "snap"))
    return result.final_phases(), result.final_messages()


def test_an_admitted_unit_keeps_its_quota_though_a_fresh_round_would_pick_another() -> None:
    """The low unit got in first; a fresh round would admit the high one instead. The replay
    keeps low admitted and high waiting, as the controller does."""
    objects = (
        [quota("a", "2")], [],
        [unit("low", "a", "2", phase="Running", message="admitted", age=50),
         unit("high", "a", "2", priority=9, age=10)],
    )
    phases, messages = replay(objects)
    assert phases == {"ns/low": "Running", "ns/high": "Enqueued"}
    assert messages["ns/high"] == "limited quotaName:a, limited resKey:cpu,"
    assert messages["ns/low"] == "admitted"


def test_creation_order_breaks_ties_and_finished_units_are_left_out() -> None:
    objects = (
        [quota("a", "1")], [],
        [unit("zz-older", "a", "1", age=90), unit("aa-newer", "a", "1", age=10),
         unit("done", "a", "5", phase="Succeed")],
    )
    snap = snapshot_from_objects(*objects, now=NOW)
    assert [u["name"] for u in snap.doc["units"]] == ["zz-older", "aa-newer"]
    assert [u["created"] for u in snap.doc["units"]] == [-90.0, -10.0]
    phases, _ = replay(objects)
    assert phases == {"ns/zz-older": "Dequeued", "ns/aa-newer": "Enqueued"}


def test_the_queue_object_says_the_policy_and_settings_the_engine_serves() -> None:
    queue = {"metadata": {"name": "a", "namespace": "koord-queue",
                          "annotations": {PRIORITY_THRESHOLD_ANNOTATION: "7", "other": "x"}},
             "spec": {"queuePolicy": "Intelligent"}}
    snap = snapshot_from_objects([quota("a", "2", policy="Priority")], [queue], [], now=NOW)
    (entry,) = snap.doc["quotas"]
    assert entry["policy"] == "Intelligent"
    assert entry["annotations"] == {PRIORITY_THRESHOLD_ANNOTATION: "7"}
    assert snap.notes == []


def test_without_its_queue_a_quota_says_its_policy_by_its_label() -> None:
    snap = snapshot_from_objects([quota("a", "2", policy="Block")], [], [], now=NOW)
    assert snap.doc["quotas"][0]["policy"] == "Block"
    assert snap.notes == ["quota a has no Queue in koord-queue yet: the replay serves one"]


def test_a_refused_edit_is_snapshotted_as_the_definition_in_force() -> None:
    kept = {QUOTA_LAST_VALID_FIELD: {"labels": {}, "spec": {"max": {"cpu": "4"}}}}
    bad = quota("a", "2")
    bad["spec"]["min"] = {"cpu": "9"}  # min above max: refused, lastValid in force
    bad["status"] = kept
    snap = snapshot_from_objects([bad, quota("b", "1")], [], [], now=NOW)
    assert {q["name"]: q["max"] for q in snap.doc["quotas"]} == {
        "a": {"cpu": "4"}, "b": {"cpu": "1"}
    }
    lone = quota("c", "2")
    lone["spec"]["min"] = {"cpu": "9"}
    snap = snapshot_from_objects([lone], [], [], now=NOW)
    assert snap.doc["quotas"] == []
    assert any("ElasticQuota c is refused" in n for n in snap.notes)


def test_parents_come_first_and_a_missing_parent_is_kept() -> None:
    snap = snapshot_from_objects(
        [quota("child", "1", parent="mid"), quota("mid", "2", parent="top"), quota("top", "3"),
         quota("orphan", "1", parent="ghost")], [], [], now=NOW,
    )
    names = [q["name"] for q in snap.doc["quotas"]]
    assert names.index("top") < names.index("mid") < names.index("child")
    assert next(q for q in snap.doc["quotas"] if q["name"] == "orphan")["parent"] == "ghost"


def test_an_unreadable_unit_is_a_note_not_a_failure() -> None:
    broken = unit("bad", "a", "lots")
    snap = snapshot_from_objects([quota("a", "1")], [], [broken], now=NOW)
    assert snap.doc["units"] == []
    assert any("ns/bad" in n and "left out" in n for n in snap.notes)


def test_unit_state_a_scenario_carries_is_no_note() -> None:
    """spec.active, a reclaimState and a Reserved unit's admission checks are carried
    (`active`, `admissions`, `admissionChecks`: test_snapshot_checks.py), so they are no
    notes."""
    inactive = unit("off", "a", "1")
    inactive["spec"]["active"] = False
    marked = unit("marked", "a", "1", phase="Running", message="admitted")
    marked["status"]["admissions"] = [{"name": "ps", "replicas": 1,
                                       "reclaimState": {"replicas": 1}}]
    reserved = unit("held", "a", "1", phase="Reserved", message="waiting for checks")
    plain = unit("plain", "a", "1")
    snap = snapshot_from_objects([quota("a", "4")], [], [inactive, marked, reserved, plain],
                                 now=NOW)
    assert [n for n in snap.notes if n.startswith("QueueUnit")] == []


def test_a_reclaim_in_flight_is_carried_and_the_replay_takes_it_back_first() -> None:
    """A queue-level preemption marked `victim` (reclaimState.replicas 1 of 2, one replica
    running): the controller's next round takes the replica not running back (the victim
    keeps the running one's share, admitted) and admits the preemptor into the room."""
    victim = unit("victim", "a", "2", phase="Dequeued", message="Waiting job extension to "
                  "reclaim resources.", age=50)
    victim["status"]["admissions"] = [{"name": "ps", "replicas": 2, "running": 1,
                                       "reclaimState": {"replicas": 1}}]
    preemptor = unit("pre", "a", "1", priority=9, age=10)
    objects = ([quota("a", "2")], [], [victim, preemptor])
    snap = snapshot_from_objects(*objects, now=NOW)
    entry = next(u for u in snap.doc["units"] if u["name"] == "victim")
    assert entry["admissions"] == [{"name": "ps", "replicas": 2, "running": 1, "reclaim": 1}]
    result = simulate(parse_scenario(snap.to_yaml(), "snap"))
    phases, messages = result.final_phases(), result.final_messages()
    assert phases == {"ns/victim": "Dequeued", "ns/pre": "Dequeued"}
    assert messages["ns/victim"] == (
        "reclaimed: 1 admitted replica(s) not running were taken back"
    )


def test_admissions_only_on_a_unit_that_arrives_admitted() -> None:
    text = """
name: bad
quotas: [{name: a, max: {cpu: "1"}}]
units: [{name: u, quota: a, resource: {cpu: "1"}, admissions: [{name: ps, replicas: 1}]}]
"""
    with pytest.raises(ScenarioError, match=r"units\[0\]\.admissions: only a unit that arrives"):
        parse_scenario(text, "bad.yaml")
    text = text.replace('resource: {cpu: "1"},', 'resource: {cpu: "1"}, phase: Running,')
    text = text.replace("replicas: 1}", "replicas: 1, reclaim: 2}")
    with pytest.raises(ScenarioError, match="must not exceed replicas"):
        parse_scenario(text, "bad.yaml")


def test_spec_active_false_is_carried_and_replayed_inactive() -> None:
    """spec.active false without the Job's annotation (removed since, or set on the unit):
    the controller never admits it and says so; the replay does the same, and the room it
    does not take goes to the next unit, as live."""
    inactive = unit("off", "a", "2", age=50)
    inactive["spec"]["active"] = False
    objects = (
        [quota("a", "2")], [],
        [inactive, unit("next", "a", "2", age=10)],
    )
    snap = snapshot_from_objects(*objects, now=NOW, honour_active=True)
    entry = next(u for u in snap.doc["units"] if u["name"] == "off")
    assert entry["active"] is False and "annotations" not in entry
    phases, messages = replay(objects, honour_active=True)
    assert phases == {"ns/off": "Enqueued", "ns/next": "Dequeued"}
    assert messages["ns/off"] == (
        "inactive (spec.active is false): never admitted until it is activated"
    )


def test_without_the_active_gate_spec_active_and_the_annotation_change_nothing() -> None:
    """A controller without QueueUnitActive (alpha, off by default) admits a unit whatever
    spec.active or its Job's annotation says; the replay must too."""
    annotated = unit("annotated", "a", "1", age=50)
    annotated["metadata"]["annotations"] = {"scheduling.x-k8s.io/active": "false"}
    inactive = unit("off", "a", "1", age=40)
    inactive["spec"]["active"] = False
    objects = ([quota("a", "2")], [], [annotated, inactive])
    snap = snapshot_from_objects(*objects, now=NOW)
    entries = {u["name"]: u for u in snap.doc["units"]}
    assert entries["annotated"]["active"] is True and "active" not in entries["off"]
    phases, _ = replay(objects)
    assert phases == {"ns/annotated": "Dequeued", "ns/off": "Dequeued"}


def test_a_scenario_active_field_must_be_a_boolean() -> None:
    text = """
name: bad
quotas: [{name: a, max: {cpu: "1"}}]
units: [{name: u, quota: a, resource: {cpu: "1"}, active: "no"}]
"""
    with pytest.raises(ScenarioError, match=r"units\[0\]\.active: must be true or false"):
        parse_scenario(text, "bad.yaml")


# --- round trip: the state a replay reached, snapshotted, replays the same next round ---------


class Q(NamedTuple):
    cpu: int
    parent: int | None
    preemption: bool


PREEMPTION = {ENABLE_PREEMPTION_ANNOTATION: "true", WAIT_FOR_PODS_RUNNING_ANNOTATION: "true"}
"""(Admitted units stay Dequeued: not running, so preemptible.)"""


class U(NamedTuple):
    quota: int | None
    cpu: int
    priority: int
    arrive: int


@st.composite
def worlds(draw: st.DrawFn) -> Scenario:
    quotas = []
    for i in range(draw(st.integers(1, 3))):
        q = Q(draw(st.integers(1, 4)), draw(st.sampled_from([None, *range(i)])),
              draw(st.booleans()))
        quotas.append(QuotaDef(name=f"q{i}", parent=f"q{q.parent}" if q.parent is not None
                               else "koordinator-root-quota",
                               max=Resources.of(cpu=str(q.cpu)),
                               annotations=PREEMPTION if q.preemption else {}))
    units = draw(st.lists(st.builds(U, st.sampled_from([None, *range(len(quotas))]),
                                    st.integers(1, 3), st.integers(0, 6), st.integers(0, 2)),
                          min_size=1, max_size=7))
    return Scenario("world", "generated", 5, "1", tuple(quotas), tuple(
        UnitDef(f"u{i}", "ns", None if u.quota is None else f"q{u.quota}",
                Resources.of(cpu=str(u.cpu)), priority=u.priority, arrive=u.arrive)
        for i, u in enumerate(units)
    ))


SETTLE_STEPS = 16
"""Steps a world may run to settle (queue-level preemption marks in one round and reclaims in
the next, and a reclaim can let a unit in that marks another: a chain of several rounds)."""


def _settled(world: Scenario) -> Any:
    """The world run until one more round changes no unit's phase or message, or None.

    A snapshot is read from the API, where a marked victim's reclaimState is not yet folded
    (the replay reclaims and admits as a fresh controller would): the round trip is claimed
    for a settled cluster. Hypothesis found a world whose last of 5 steps reclaimed a victim
    (u0 Enqueued 'reclaimed: ...') that the next round admits, as the replay did."""
    for steps in range(world.steps, SETTLE_STEPS):
        now, then = simulate(replace(world, steps=steps)), simulate(replace(world, steps=steps + 1))
        state = (now.final_phases(), now.final_messages())
        if state == (then.final_phases(), then.final_messages()):
            return now
    return None


def _objects(world: Scenario) -> tuple[list[Any], list[Any], list[Any]]:
    """What the cluster shows once the controller ran the world's rounds (settled)."""
    result = _settled(world)
    assume(result is not None)
    phases, messages = result.final_phases(), result.final_messages()
    quotas = [q.as_object() for q in world.quotas]
    queues = [derive_queue(q).to_manifest() for q in quotas]
    units = []
    for u in world.units:
        key = f"{u.namespace}/{u.name}"
        obj = unit(u.name, u.quota, str(u.resource.value("cpu")), phase=phases[key],
                   message=messages.get(key), age=100.0 - u.arrive, priority=u.priority)
        units.append(obj)
    return quotas, queues, units


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(world=worlds())
def test_a_snapshot_replays_the_state_it_was_taken_in(world: Scenario) -> None:
    """Units arrive over steps (an admitted low unit may hold what a later high one wants),
    the world settles, it is snapshotted; the replay's round keeps every unit's phase and
    message. Without the arrival phase (every unit Enqueued) the replay admits by priority
    afresh and hypothesis finds a unit whose phase differs.

    Priority queues only: a Block or Intelligent queue's memory of which unit blocks it is
    not in the API, so a replay (like a restarted controller) starts it afresh; hypothesis
    found an Intelligent queue whose earlier low head kept a later high unit out in the
    world, and the replay admitting it (docs/whatif.md says so)."""
    objects = _objects(world)
    expected = {f"ns/{u['metadata']['name']}": (u["status"].get("phase"),
                                                u["status"].get("message"))
                for u in objects[2]}
    phases, messages = replay(objects)
    assert {k: (phases[k], messages.get(k)) for k in phases} == expected
