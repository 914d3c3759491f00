"""What-if edits and the difference of two replays (simulation/whatif.py, issue 29 part 2)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    PRIORITY_THRESHOLD_ANNOTATION,
    ROOT_QUOTA,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import QuotaDef, Scenario, UnitDef
from koordqueue.simulation.simulator import simulate
from koordqueue.simulation.whatif import (
    ADMITTED,
    NEW_ADMITTED,
    NEW_WAITING,
    PREEMPTED,
    EditError,
    apply_edits,
    parse_edit,
    what_if,
    with_runtime,
)

CPU = Resources.of


def world(team_a_max: str = "8") -> Scenario:
    """team-a (max 8 of org's 16) runs two 4-cpu Jobs; three more wait."""
    quotas = (
        QuotaDef("org", max=CPU(cpu="16")),
        QuotaDef("team-a", parent="org", max=CPU(cpu=team_a_max)),
        QuotaDef("team-b", parent="org", max=CPU(cpu="8")),
    )
    held = {"phase": "Running", "message": "admitted"}
    units = (
        UnitDef("train-1", "a", "team-a", CPU(cpu="4"), created=-600, **held),  # type: ignore[arg-type]
        UnitDef("train-2", "a", "team-a", CPU(cpu="4"), created=-500, **held),  # type: ignore[arg-type]
        UnitDef("eval-1", "a", "team-a", CPU(cpu="1"), created=-400),
        UnitDef("eval-2", "a", "team-a", CPU(cpu="1"), created=-300),
        UnitDef("sweep", "a", "team-a", CPU(cpu="2"), created=-200),
        UnitDef("etl", "b", "team-b", CPU(cpu="6"), created=-700, **held),  # type: ignore[arg-type]
    )
    return Scenario("w", "test", 2, "1", quotas, units)


def changes(scenario: Scenario, *edits: tuple[str, str]) -> dict[str, str]:
    result = what_if(scenario, [parse_edit(k, v) for k, v in edits])
    return {u.key: u.change for u in result.changed()}


def test_raising_a_max_admits_what_now_fits_and_preempts_nothing() -> None:
    assert changes(world(), ("max", "team-a=cpu=12")) == {
        "a/eval-1": ADMITTED, "a/eval-2": ADMITTED, "a/sweep": "still waiting (message changed)",
    }  # sweep now waits for org (16: 8 + 2 of team-a, 6 of team-b), not for team-a


def test_the_after_world_is_the_world_with_the_edit_made() -> None:
    """The proposed world replays exactly as a scenario written with the edit does."""
    result = what_if(world(), [parse_edit("max", "team-a=cpu=12")])
    direct = simulate(world(team_a_max="12"))
    assert result.after.final_phases() == direct.final_phases()
    assert result.after.final_messages() == direct.final_messages()
    assert result.order_after == ["a/eval-1", "a/eval-2"]
    assert {q.name: (q.used_before, q.used_after) for q in result.usage}["team-a"] == (
        "cpu:8", "cpu:10")


def test_added_units_are_new_and_admitted_in_name_order_while_they_fit() -> None:
    base = Scenario("add", "t", 2, "1", (QuotaDef("q", max=CPU(cpu="3")),), (
        UnitDef("job", "n", "q", CPU(cpu="1"), phase="Running", message="in", created=-9),
    ))
    result = what_if(base, [parse_edit("add", "n/job=3")])
    assert {u.key: u.change for u in result.changed()} == {
        "n/job-whatif-1": NEW_ADMITTED, "n/job-whatif-2": NEW_ADMITTED,
        "n/job-whatif-3": NEW_WAITING,
    }
    assert result.order_after == ["n/job-whatif-1", "n/job-whatif-2"]
    assert result.order_before == []
    assert result.after.final_messages()["n/job-whatif-3"] == (
        "limited quotaName:q, limited resKey:cpu,")


def test_lowering_a_max_preempts_nothing_by_itself() -> None:
    """Admitted units keep their quota when a max shrinks (the controller undoes no
    admission), the waiting ones stay out, with their message."""
    result = what_if(world(), [parse_edit("max", "team-a=cpu=2")])
    assert result.changed() == []
    assert [u.key for u in result.waiting()] == ["a/eval-1", "a/eval-2", "a/sweep"]


def test_a_unit_added_above_an_admitted_not_yet_running_one_preempts_it() -> None:
    on = {ENABLE_PREEMPTION_ANNOTATION: "true", WAIT_FOR_PODS_RUNNING_ANNOTATION: "true"}
    base = Scenario("p", "t", 2, "1", (QuotaDef("q", max=CPU(cpu="4"), annotations=on),), (
        UnitDef("low", "n", "q", CPU(cpu="2"), priority=1, phase="Dequeued", message="in",
                created=-10),
        UnitDef("urgent", "n", "q", CPU(cpu="2"), priority=9, phase="Running", message="in",
                created=-20),
    ))
    assert what_if(base, []).changed() == []
    result = what_if(base, [parse_edit("add", "n/urgent=1")])
    assert {u.key: u.change for u in result.changed()} == {
        "n/low": PREEMPTED, "n/urgent-whatif-1": NEW_ADMITTED,
    }
    (event,) = [e for e in result.after.steps[0].events if e.reason == "Preempted"]
    assert (event.unit, event.message) == ("n/low", "preempted by n/urgent-whatif-1; back in queue")


@pytest.mark.parametrize(("kind", "raw", "says"), [
    ("max", "nope=cpu=1", "no quota 'nope' in the snapshot (quotas: org, team-a, team-b)"),
    ("max", "team-a=cpu=lots", "max.cpu: 'lots': does not match the quantity syntax"),
    ("max", "team-a=cpu", "expected RESOURCE=QUANTITY[,...], got 'cpu'"),
    ("min", "team-a=cpu=10", "the controller would refuse quota team-a: spec.min[cpu]"),
    ("parent", "org=team-a", "would close a cycle: org -> team-a -> org"),
    ("parent", "team-a=ghost", "no quota 'ghost' in the snapshot to be the parent"),
    ("policy", "team-a=Fifo", "unknown policy 'Fifo'"),
    ("priority-threshold", "team-a=high", "must be an integer, got 'high'"),
    ("set-oversellrate", "-1", "oversell"),
    ("add", "a/ghost=2", "no unit a/ghost in the snapshot to copy"),
    ("add", "a/eval-1=0", "N must be 1..10000, got 0"),
    ("delete-quota", "org", "quota org has child quotas (team-a, team-b)"),
    ("delete-quota", "nope", "no quota 'nope'"),
    ("max", "team-a", "expected QUOTA=cpu=12,memory=64Gi, got 'team-a'"),
])
def test_bad_edits_name_the_edit_and_say_why(kind: str, raw: str, says: str) -> None:
    with pytest.raises(EditError) as caught:
        apply_edits(world(), [parse_edit(kind, raw)])
    assert str(caught.value).startswith(f"edit --{kind} {raw}: ")
    assert says in str(caught.value)


def test_each_edit_changes_exactly_what_it_names() -> None:
    edited = apply_edits(world(), [parse_edit(k, v) for k, v in (
        ("max", "team-a=cpu=12,memory=4Gi"), ("min", "team-b=cpu=2"),
        ("parent", f"team-b={ROOT_QUOTA}"), ("policy", "team-a=Block"),
        ("priority-threshold", "team-b=6"), ("set-oversellrate", "1.5"),
    )])
    by = {q.name: q for q in edited.quotas}
    assert by["team-a"].max == CPU(cpu="12", memory="4Gi") and by["team-a"].policy == "Block"
    assert by["team-b"].min == CPU(cpu="2") and by["team-b"].parent == ROOT_QUOTA
    assert by["team-b"].annotations[PRIORITY_THRESHOLD_ANNOTATION] == "6"
    assert by["org"] == world().quotas[0] and edited.oversell_rate == "1.5"
    gone = apply_edits(world(), [parse_edit("delete-quota", "team-b")])
    assert [q.name for q in gone.quotas] == ["org", "team-a"]


def test_runtime_says_when_each_waiting_unit_gets_in() -> None:
    result = what_if(with_runtime(world(), 2, None), [parse_edit("max", "team-a=cpu=12")])
    admitted = {u.key: (u.before.admitted_at if u.before else None,
                        u.after.admitted_at if u.after else None) for u in result.units}
    assert admitted["a/eval-1"] == (2, 0)  # waited for train-1/2 to finish; now at once
    assert admitted["a/sweep"] == (2, 2)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    maxes=st.lists(st.integers(0, 20), min_size=3, max_size=3),
    rate=st.sampled_from(["1", "1.5", "2"]),
)
def test_no_edit_changes_nothing_and_a_max_edit_is_the_world_written_with_it(
    maxes: list[int], rate: str
) -> None:
    base = world()
    unedited = what_if(base, [])
    assert unedited.changed() == [] and all(u.before == u.after for u in unedited.units)
    edits = [parse_edit("max", f"{q.name}=cpu={m}") for q, m in zip(base.quotas, maxes,
                                                                       strict=True)]
    edits.append(parse_edit("set-oversellrate", rate))
    try:
        result = what_if(base, edits)
    except EditError as exc:  # min above max cannot happen (no mins): nothing else may fail
        raise AssertionError(exc) from exc
    written = Scenario("w", "test", 2, rate, tuple(
        QuotaDef(q.name, parent=q.parent, max=CPU(cpu=str(m))) for q, m in zip(
            base.quotas, maxes, strict=True)
    ), base.units)
    direct = simulate(written)
    assert result.after.final_phases() == direct.final_phases()
    assert result.after.final_messages() == direct.final_messages()
