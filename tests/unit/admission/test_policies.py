"""SPEC 2.3 / 2.4: queue factory and the order and gating of Priority, Block, Intelligent."""

from __future__ import annotations

import pytest

from koordqueue.domain.names import (
    BLOCK_TIMEOUT_ANNOTATION,
    PREEMPTIBLE_ANNOTATION,
    QUOTA_NAME_LABEL,
)
from koordqueue.domain.policies import (
    BlockPolicy,
    IntelligentPolicy,
    PriorityPolicy,
    QueuePolicy,
    QueueSettings,
    UnknownPolicyError,
    make_policy,
    order_key,
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


@pytest.mark.parametrize("policy", ["Priority", "Block", "Intelligent"])
def test_the_factory_makes_the_registered_policies(policy: str) -> None:
    assert make_policy(policy, QueueSettings()).name == policy


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


def test_block_policy_tries_nothing_while_its_quota_stays_blocked() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings())
    run_round(policy, units, fits=set(), now=0.0)
    assert run_round(policy, units, fits={"head", "next"}, now=1.0) == []
    assert policy.blocked


def test_block_policy_retries_the_head_first_after_a_unit_is_added() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings())
    run_round(policy, units, fits=set(), now=0.0)
    newcomer = unit("new", 0, 2.0)
    policy.unit_added(newcomer)
    assert not policy.blocked
    assert run_round(policy, [*units, newcomer], fits={"next", "new"}, now=2.0) == ["head"]


def test_block_policy_retries_after_a_release_and_then_serves_in_order() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings())
    run_round(policy, units, fits=set(), now=0.0)
    policy.unit_released(unit("finished"))
    assert run_round(policy, units, fits={"head", "next"}, now=1.0) == ["head", "next"]
    assert not policy.blocked


def test_block_idle_clear_retries_the_same_head_after_three_minutes() -> None:
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(QueueSettings())
    run_round(policy, units, fits={"next"}, now=0.0)
    assert run_round(policy, units, fits={"next"}, now=180.0) == []
    assert run_round(policy, units, fits={"next"}, now=180.5) == ["head"]
    # the head still does not fit: it blocks again, `next` never passed it
    assert run_round(policy, units, fits={"next"}, now=200.0) == []
    assert run_round(policy, units, fits={"next"}, now=361.0) == ["head"]


def test_block_timeout_is_off_by_default() -> None:
    assert QueueSettings().block_timeout == 0
    assert QueueSettings.from_annotations({}).block_timeout == 0
    for value in ("soon", "-5", "0", "nan", "inf"):
        settings = QueueSettings.from_annotations({BLOCK_TIMEOUT_ANNOTATION: value})
        assert settings.block_timeout == 0, value


def test_opt_in_block_timeout_lets_the_others_through_once() -> None:
    settings = QueueSettings.from_annotations({BLOCK_TIMEOUT_ANNOTATION: "60"})
    assert settings.block_timeout == 60.0
    units = ordered(unit("head", 5), unit("next", 1))
    policy = BlockPolicy(settings)
    assert run_round(policy, units, fits={"next"}, now=0.0) == ["head"]
    assert run_round(policy, units, fits={"next"}, now=30.0) == []
    assert run_round(policy, units, fits={"next"}, now=60.0) == ["head", "next"]
    # the hold restarts after the one pass
    assert run_round(policy, [units[0]], fits=set(), now=62.0) == []
    assert run_round(policy, [units[0]], fits=set(), now=120.0) == ["head"]


def test_block_keys_the_block_by_the_units_quota_label() -> None:
    def labelled(name: str, quota: str, priority: int) -> QueueUnit:
        return QueueUnit("ns", name, uid=name, priority=priority, labels={QUOTA_NAME_LABEL: quota})

    units = ordered(labelled("a-big", "a", 9), labelled("b-small", "b", 5), labelled("a-2", "a", 1))
    policy = BlockPolicy(QueueSettings())
    assert run_round(policy, units, fits={"b-small", "a-2"}) == ["a-big", "b-small"]
    assert policy.blocked_quotas == {"a"}
    policy.unit_released(labelled("gone", "b", 0))
    assert policy.blocked_quotas == {"a"}


def test_priority_policy_never_blocks_a_quota() -> None:
    policy = PriorityPolicy(QueueSettings())
    run_round(policy, ordered(unit("big"), unit("small")), fits={"small"})
    assert policy.blocked_quotas == frozenset()


def test_intelligent_serves_high_units_first_block_style() -> None:
    units = ordered(unit("h1", 9), unit("h2", 5), unit("l1", 1), unit("l2", 0))
    policy = IntelligentPolicy(QueueSettings())  # threshold 4
    # h1 fails: its quota blocks (h2 not tried) and no low unit is served while h1, h2 wait
    assert run_round(policy, units, fits={"h2", "l1", "l2"}) == ["h1"]


def test_intelligent_blocked_high_units_keep_holding_the_low_ones() -> None:
    units = ordered(unit("h1", 9), unit("l1", 1))
    policy = IntelligentPolicy(QueueSettings())
    run_round(policy, units, fits={"l1"}, now=0.0)
    assert run_round(policy, units, fits={"l1"}, now=10.0) == []
    assert run_round(policy, units, fits={"l1"}, now=100.0) == []


def test_intelligent_serves_low_units_in_the_same_round_once_no_high_unit_waits() -> None:
    units = ordered(unit("h1", 9), unit("l1", 1), unit("l2", 0))
    policy = IntelligentPolicy(QueueSettings())
    assert run_round(policy, units, fits={"h1", "l2"}) == ["h1", "l1", "l2"]


def test_intelligent_adding_a_unit_does_not_lift_a_block_but_a_release_does() -> None:
    units = ordered(unit("h1", 9), unit("l1", 1))
    policy = IntelligentPolicy(QueueSettings())
    run_round(policy, units, fits=set(), now=0.0)
    h2 = unit("h2", 9, 1.0)
    policy.unit_added(h2)
    assert run_round(policy, ordered(*units, h2), fits={"h2"}, now=1.0) == []
    policy.unit_released(unit("finished"))
    assert run_round(policy, ordered(*units, h2), fits={"h1", "h2"}, now=2.0) == ["h1", "h2", "l1"]


def test_intelligent_idle_clear_retries_the_high_head_after_three_minutes() -> None:
    units = ordered(unit("h1", 9), unit("l1", 1))
    policy = IntelligentPolicy(QueueSettings())
    run_round(policy, units, fits={"l1"}, now=0.0)
    assert run_round(policy, units, fits={"l1"}, now=180.0) == []
    assert run_round(policy, units, fits={"l1"}, now=181.0) == ["h1"]


def test_intelligent_threshold_comes_from_its_annotation() -> None:
    settings = QueueSettings.from_annotations({"koord-queue/priority-threshold": "8"})
    units = ordered(unit("m", 5), unit("l", 1))
    assert settings.priority_threshold == 8
    # m is low under threshold 8: its failure holds nothing; under the default 4 it would
    assert run_round(IntelligentPolicy(settings), units, fits={"l"}) == ["m", "l"]
    assert run_round(IntelligentPolicy(QueueSettings()), units, fits={"l"}) == ["m"]


def test_intelligent_low_pass_starts_at_the_head_every_round() -> None:
    low = ordered(unit("a", 1), unit("b", 1, 1.0), unit("c", 1, 2.0))
    policy = IntelligentPolicy(QueueSettings())
    rounds = [run_round(policy, low, fits=set(), now=float(r)) for r in range(3)]
    assert rounds == [["a", "b", "c"]] * 3


def test_intelligent_low_failure_does_not_stop_later_low_units() -> None:
    low = ordered(unit("big", 2), unit("small", 1), unit("tiny", 0))
    policy = IntelligentPolicy(QueueSettings())
    assert run_round(policy, low, fits={"small", "tiny"}) == ["big", "small", "tiny"]


def test_intelligent_reads_only_the_priority_threshold() -> None:
    annotations = {
        "koord-queue/max-depth": "1",
        "koord-queue/wait-for-pods-running": "true",
        "koord-queue/enable-queueunit-preemption": "true",
        BLOCK_TIMEOUT_ANNOTATION: "60",
        "koord-queue/priority-threshold": "7",
    }
    assert QueueSettings.from_annotations(annotations, "Intelligent") == QueueSettings(
        priority_threshold=7
    )
    block = QueueSettings.from_annotations(annotations, "Block")
    assert block.max_depth == 1 and block.preemption and block.block_timeout == 60.0


def test_intelligent_ignores_max_depth() -> None:
    settings = QueueSettings.from_annotations({"koord-queue/max-depth": "1"})
    units = ordered(unit("a"), unit("b"), unit("c"))
    assert len(run_round(IntelligentPolicy(settings), units, fits=set())) == 3
