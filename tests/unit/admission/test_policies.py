"""SPEC 2.3 / 2.4: queue factory and the order and gating of Priority, Block, Intelligent."""

from __future__ import annotations

import pytest

from koordqueue.domain.names import PREEMPTIBLE_ANNOTATION
from koordqueue.domain.policies import (
    BlockPolicy,
    IntelligentPolicy,
    PriorityPolicy,
    QueuePolicy,
    QueueSettings,
    UnknownPolicyError,
    make_policy,
    order_key,
    registered_policies,
)
from koordqueue.domain.queue_unit import QueueUnit


def unit(
    name: str, priority: int = 0, created: float = 0.0, preemptible: bool = False
) -> QueueUnit:
    annotations = {PREEMPTIBLE_ANNOTATION: "true"} if preemptible else {}
    return QueueUnit(
        "ns", name, uid=name, priority=priority, created=created, annotations=annotations
    )


def ordered(*units: QueueUnit) -> list[QueueUnit]:
    return sorted(units, key=lambda u: order_key(u, u.created))


def run_round(
    policy: QueuePolicy, units: list[QueueUnit], fits: set[str], now: float = 0.0
) -> list[str]:
    """Drive a policy like the engine does; returns the names tried, in order."""
    tried = []
    for u in policy.candidates(units, now):
        tried.append(u.name)
        policy.feedback(u, u.name in fits, now)
    return tried


def test_registered_policies_are_priority_block_intelligent() -> None:
    assert set(registered_policies()) == {"Priority", "Block", "Intelligent"}


@pytest.mark.parametrize("policy", ["Round", "FIFO", "", "priority"])
def test_unregistered_policy_is_refused_by_the_factory(policy: str) -> None:
    with pytest.raises(UnknownPolicyError, match="not registered"):
        make_policy(policy, QueueSettings())


def test_order_is_priority_descending_then_first_attempt_then_name() -> None:
    units = ordered(unit("c", 1, 5.0), unit("b", 1, 5.0), unit("a", 1, 9.0), unit("z", 3, 20.0))
    assert [u.name for u in units] == ["z", "b", "c", "a"]


def test_unset_priority_counts_as_zero() -> None:
    assert [u.name for u in ordered(unit("neg", -1), unit("unset"))] == ["unset", "neg"]


def test_at_equal_priority_non_preemptible_units_come_first() -> None:
    units = ordered(unit("p", 2, 0.0, preemptible=True), unit("n", 2, 10.0))
    assert [u.name for u in units] == ["n", "p"]


def test_priority_policy_tries_every_unit_and_a_misfit_blocks_nothing() -> None:
    units = ordered(unit("big", 9), unit("small", 1), unit("tiny", 0))
    assert run_round(PriorityPolicy(QueueSettings()), units, fits={"small", "tiny"}) == [
        "big",
        "small",
        "tiny",
    ]


def test_priority_policy_scans_at_most_max_depth_units() -> None:
    units = ordered(*(unit(f"u{i}", 10 - i) for i in range(5)))
    settings = QueueSettings.from_annotations({"koord-queue/max-depth": "2"})
    assert run_round(PriorityPolicy(settings), units, fits=set()) == ["u0", "u1"]


def test_max_depth_default_minus_one_means_no_limit() -> None:
    assert QueueSettings.from_annotations({}).max_depth == -1
    units = ordered(*(unit(f"u{i}") for i in range(7)))
    assert len(run_round(PriorityPolicy(QueueSettings()), units, fits=set())) == 7


def test_unparsable_max_depth_keeps_the_default() -> None:
    assert QueueSettings.from_annotations({"koord-queue/max-depth": "lots"}).max_depth == -1


def test_boolean_annotations_are_on_only_when_exactly_true() -> None:
    on = QueueSettings.from_annotations(
        {
            "koord-queue/wait-for-pods-running": "true",
            "koord-queue/enable-queueunit-preemption": "true",
        }
    )
    assert on.wait_for_pods_running and on.enable_preemption and on.preemption
    for value in ("True", "yes", "1", "TRUE", ""):
        off = QueueSettings.from_annotations({"koord-queue/wait-for-pods-running": value})
        assert not off.wait_for_pods_running


def test_preemption_needs_both_annotations() -> None:
    only_one = QueueSettings.from_annotations({"koord-queue/enable-queueunit-preemption": "true"})
    assert not only_one.preemption


def test_block_policy_stops_the_round_at_the_first_unit_that_does_not_fit() -> None:
    units = ordered(unit("head", 5), unit("next", 1), unit("last", 0))
    policy = BlockPolicy(QueueSettings())
    assert run_round(policy, units, fits={"next", "last"}) == ["head"]
    assert policy.blocked


def test_block_policy_unblocks_when_the_blocker_is_admitted() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings())
    run_round(policy, units, fits=set(), now=0.0)
    assert run_round(policy, units, fits={"head", "next"}, now=1.0) == ["head", "next"]
    assert not policy.blocked


def test_block_times_out_and_lets_the_others_through_once() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings(block_timeout=60.0))
    assert run_round(policy, units, fits={"next"}, now=0.0) == ["head"]
    assert run_round(policy, units, fits={"next"}, now=30.0) == ["head"]
    assert run_round(policy, units, fits={"next"}, now=61.0) == ["head", "next"]
    # the hold restarts after the one pass
    assert run_round(policy, [units[0]], fits=set(), now=62.0) == ["head"]


def test_forgetting_the_blocker_lifts_the_block() -> None:
    policy = BlockPolicy(QueueSettings())
    run_round(policy, ordered(unit("head", 5), unit("next")), fits=set())
    policy.forget("head")
    assert not policy.blocked


def test_intelligent_serves_high_units_first_block_style() -> None:
    units = ordered(unit("h1", 9), unit("h2", 5), unit("l1", 1), unit("l2", 0))
    policy = IntelligentPolicy(QueueSettings())  # threshold 4
    # h1 fails: the high sub-queue stops (h2 not tried), the low sub-queue is still served
    assert run_round(policy, units, fits={"h2", "l1", "l2"}) == ["h1", "l1", "l2"]


def test_intelligent_threshold_comes_from_its_annotation() -> None:
    settings = QueueSettings.from_annotations({"koord-queue/priority-threshold": "8"})
    units = ordered(unit("h", 9), unit("m", 5), unit("l", 1))
    assert settings.priority_threshold == 8
    assert run_round(IntelligentPolicy(settings), units, fits={"m", "l"}) == ["h", "m", "l"]


def test_intelligent_low_units_take_turns_at_the_front() -> None:
    low = ordered(unit("a", 1), unit("b", 1, 1.0), unit("c", 1, 2.0))
    policy = IntelligentPolicy(QueueSettings())
    firsts = [run_round(policy, low, fits=set())[0] for _ in range(3)]
    assert firsts == ["a", "b", "c"]


def test_intelligent_ignores_max_depth() -> None:
    settings = QueueSettings.from_annotations({"koord-queue/max-depth": "1"})
    units = ordered(unit("a"), unit("b"), unit("c"))
    assert len(run_round(IntelligentPolicy(settings), units, fits=set())) == 3
