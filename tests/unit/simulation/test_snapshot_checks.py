"""A Reserved unit's admission checks in a snapshot and its replay (issue 29, the checks of
issue 35 point 5): the Queue's checks and the unit's check states are carried, and the replay
decides on them with the controller's own functions (domain/reservation.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain import admission_checks as ac
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import ScenarioError, parse_scenario
from koordqueue.simulation.simulator import SimulationResult, simulate
from koordqueue.simulation.snapshot import snapshot_from_objects
from tests.unit.simulation.test_snapshot import NOW, quota, unit

BACKED_OFF = re.compile(r"admission check failed: (\S+) is (Retry|Rejected)(.*); retry in (\d+)s")


def queue(name: str, checks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "koord-queue"},
            "spec": {"queuePolicy": "Priority", "admissionChecks": checks}}


def reserved(name: str, cpu: str, age: float = 100.0, attempts: int = 0,
             labels: dict[str, str] | None = None, **states: str) -> dict[str, Any]:
    """A Reserved unit with `states` as its check controllers wrote them."""
    obj = unit(name, "a", cpu, phase="Reserved", message=ac.MSG_RESERVED, age=age)
    obj["status"]["admissionChecks"] = [
        {"name": n, "state": s, "lastTransitionTime": "2026-01-01T00:00:00Z",
         **({"message": "no room"} if s == ac.RETRY else {})}
        for n, s in states.items()
    ]
    if attempts:
        obj["status"]["attempts"] = attempts
    obj["metadata"]["labels"].update(labels or {})
    return obj


def replayed(objects: tuple[list[Any], list[Any], list[Any]]) -> SimulationResult:
    snap = snapshot_from_objects(*objects, now=NOW)
    return simulate(parse_scenario(snap.to_yaml(), "snap"))


def test_check_states_are_carried_and_decide_as_the_controller_decides() -> None:
    """Pending: stays Reserved holding its quota. All Ready: released (Dequeued, 'all
    admission checks success', event Admitted). Retry: backed off with the check named, its
    quota given back, so the waiting unit gets in, and is Reserved in turn (its queue asks
    for checks; nothing answers them in the replay)."""
    objects = (
        [quota("a", "4")], [queue("a", [{"name": "c1"}, {"name": "c2"}])],
        [reserved("pend", "1", c1="Ready", c2="Pending"),
         reserved("ready", "1", c1="Ready", c2="Ready"),
         reserved("retry", "2", attempts=2, c1="Ready", c2="Retry"),
         unit("waiter", "a", "2", age=50)],
    )
    snap = snapshot_from_objects(*objects, now=NOW)
    assert snap.doc["quotas"][0]["admissionChecks"] == [{"name": "c1"}, {"name": "c2"}]
    by_name = {u["name"]: u for u in snap.doc["units"]}
    assert by_name["retry"]["admissionChecks"] == [
        {"name": "c1", "state": "Ready"}, {"name": "c2", "state": "Retry", "message": "no room"}]
    assert by_name["retry"]["attempts"] == 2
    assert "admissionChecks" not in by_name["waiter"]
    assert [n for n in snap.notes if "QueueUnit" in n or "Queue " in n] == []

    result = replayed(objects)
    phases, messages = result.final_phases(), result.final_messages()
    assert phases == {"ns/pend": "Reserved", "ns/ready": "Dequeued",
                      "ns/retry": "TimeoutBackoff", "ns/waiter": "Reserved"}
    assert messages["ns/pend"] == ac.MSG_RESERVED
    assert messages["ns/ready"] == ac.MSG_ALL_READY
    assert messages["ns/waiter"] == ac.MSG_RESERVED
    backed = BACKED_OFF.fullmatch(messages["ns/retry"])
    assert backed is not None and backed.groups()[:3] == ("c2", "Retry", " (no room)")
    assert 36 <= int(backed.group(4)) <= 44  # third attempt: 40 s +-10 %
    events = {(e.unit, e.reason, e.message) for r in result.steps for e in r.events}
    assert ("ns/ready", "Admitted", ac.MSG_ALL_READY) in events
    assert ("ns/retry", "Backoff", messages["ns/retry"]) in events
    assert ("ns/waiter", "QuotaReserved",
            "quota reserved; waiting for admission checks c1, c2") in events
    # the quota holds pend, ready and waiter (1 + 1 + 2 cpu); retry's 2 were given back
    used = {u.name: u for u in result.steps[-1].usage}["a"]
    assert used.used == Resources.parse({"cpu": "4"}) and used.admitted_units == 3


def test_a_label_selector_asks_only_its_units_and_the_labels_it_reads_are_carried() -> None:
    checks = [{"name": "gpu", "labelSelector": {"matchLabels": {"tier": "gpu"}}}]
    objects = (
        [quota("a", "8")], [queue("a", checks)],
        [reserved("gpu-held", "1", labels={"tier": "gpu", "team": "x"}, gpu="Pending"),
         reserved("cpu-held", "1", labels={"tier": "cpu"}),
         unit("gpu-new", "a", "1", age=50), unit("cpu-new", "a", "1", age=40)],
    )
    objects[2][2]["metadata"]["labels"]["tier"] = "gpu"
    snap = snapshot_from_objects(*objects, now=NOW)
    assert snap.doc["quotas"][0]["admissionChecks"] == checks
    labels = {u["name"]: u.get("labels") for u in snap.doc["units"]}
    assert labels == {"gpu-held": {"tier": "gpu"}, "cpu-held": {"tier": "cpu"},
                      "gpu-new": {"tier": "gpu"}, "cpu-new": None}
    phases = replayed(objects).final_phases()
    assert phases == {"ns/gpu-held": "Reserved", "ns/cpu-held": "Dequeued",
                      "ns/gpu-new": "Reserved", "ns/cpu-new": "Dequeued"}


def test_states_the_controller_does_not_count_are_notes_not_failures() -> None:
    """A state of a check the Queue no longer asks for is left out (it counts as Ready); a
    state none of Kueue's four is carried as Pending (the controller waits on it); a Queue
    whose checks cannot be read asks for none, so its Reserved unit is released."""
    objects = (
        [quota("a", "4"), quota("b", "4")],
        [queue("a", [{"name": "c1"}]), queue("b", [{"name": "x"}, {"name": "x"}])],
        [reserved("gone", "1", c1="Ready", old="Rejected"),
         reserved("odd", "1", c1="Maybe"),
         reserved("on-b", "1", labels={QUOTA_NAME_LABEL: "b"}, x="Pending")],
    )
    snap = snapshot_from_objects(*objects, now=NOW)
    notes = [n for n in snap.notes if "check" in n]
    assert notes == [
        "Queue b: spec.admissionChecks[1].name: duplicate check 'x': the controller asks for "
        "no checks there, nor does the replay",
        "QueueUnit ns/gone: check 'old' is no check its Queue a asks for: left out (the "
        "controller counts it as Ready)",
        "QueueUnit ns/odd: check 'c1' has state 'Maybe', none of Pending, Ready, Retry, "
        "Rejected: carried as Pending (the controller waits)",
        "QueueUnit ns/on-b: check 'x' is no check its Queue b asks for: left out (the "
        "controller counts it as Ready)",
    ]
    phases = replayed(objects).final_phases()
    assert phases == {"ns/gone": "Dequeued", "ns/odd": "Reserved", "ns/on-b": "Dequeued"}


SCENARIO = """
quotas:
  - {name: a, max: {cpu: 4}, admissionChecks: [{name: c1}]}
units:
  - {name: u, quota: a, resource: {cpu: 1}, phase: Reserved, %s}
"""


@pytest.mark.parametrize(("unit_fields", "field", "says"), [
    ("admissionChecks: [{name: c1, state: Maybe}]", "units[0].admissionChecks[0].state",
     "must be one of Pending, Ready, Retry, Rejected, got 'Maybe'"),
    ("admissionChecks: [{name: zz, state: Ready}]", "units[0].admissionChecks[0].name",
     "'zz' is no admission check of quota a's queue (it asks for: c1)"),
    ("admissionChecks: [{name: c1}, {name: c1}]", "units[0].admissionChecks[1].name",
     "duplicate check 'c1'"),
    ("admissionChecks: [{name: c1, state: Ready, why: x}]", "units[0].admissionChecks[0].why",
     "unknown field"),
    (f"labels: {{{QUOTA_NAME_LABEL}: b}}", f"units[0].labels.{QUOTA_NAME_LABEL}",
     "say the unit's quota with quota:"),
    ("attempts: -1", "units[0].attempts", "must be an integer >= 0"),
])
def test_bad_check_input_is_an_error_naming_the_field(unit_fields: str, field: str,
                                                      says: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(SCENARIO % unit_fields, "s.yaml")
    assert caught.value.field == field
    assert says in caught.value.reason
    assert caught.value.line == 5 or field.startswith("units[0].admissionChecks[1]")


def test_check_states_only_on_a_reserved_unit_and_queue_checks_as_the_controller_reads() -> None:
    enqueued = SCENARIO.replace("phase: Reserved, ", "") % "admissionChecks: [{name: c1}]"
    with pytest.raises(ScenarioError, match="only a Reserved unit has check states"):
        parse_scenario(enqueued, "s.yaml")
    bad_queue = SCENARIO.replace("[{name: c1}]", "[{labelSelector: {}}]") % "priority: 1"
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(bad_queue, "s.yaml")
    assert caught.value.field == "quotas[0].admissionChecks[0].name"
    assert caught.value.line == 3


@settings(max_examples=80, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(["c1", "c2"]), st.sampled_from(ac.STATES)),
                min_size=1, max_size=4))
def test_every_reserved_unit_gets_the_verdict_of_its_states(states: list[dict[str, str]]) -> None:
    """Hypothesis-built check states: each Reserved unit is released, backed off or kept
    as the controller's evaluation says (Retry/Rejected first, then all Ready, else wait)."""
    objects = (
        [quota("a", "100")], [queue("a", [{"name": "c1"}, {"name": "c2"}])],
        [reserved(f"u{i}", "1", age=100 - i, **s) for i, s in enumerate(states)],
    )
    result = replayed(objects)
    phases, messages = result.final_phases(), result.final_messages()
    for i, s in enumerate(states):
        failed = next((n for n in ("c1", "c2") if s.get(n) in (ac.RETRY, ac.REJECTED)), None)
        key = f"ns/u{i}"
        if failed is not None:
            assert phases[key] == "TimeoutBackoff"
            assert messages[key].startswith(f"admission check failed: {failed} is {s[failed]}")
        elif s.get("c1") == s.get("c2") == ac.READY:
            assert (phases[key], messages[key]) == ("Dequeued", ac.MSG_ALL_READY)
        else:
            assert (phases[key], messages[key]) == ("Reserved", ac.MSG_RESERVED)
