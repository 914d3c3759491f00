"""An admission round serves first the queue holding the least of its quota's min; equal
shares go to the queue whose head has the higher priority, then the one waiting longest."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.engine import AdmissionEngine
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_order import serve_order, share, under_min
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.quota import QuotaSpec
from koordqueue.domain.resources import Resources
from koordqueue.domain.round import Admit


def unit(name: str, quota: str, cpu: str = "1", created: float = 0.0) -> QueueUnit:
    return QueueUnit("ns", name, uid=name, resource=Resources.of(cpu=cpu),
                     labels={QUOTA_NAME_LABEL: quota}, created=created)


def siblings(min_cpu: str | None, *, incremental: bool = True, cohort: str = "3"
             ) -> AdmissionEngine:  # fmt: skip
    """cohort (max `cohort` cpu) over `a` and `z` (max 3 each, min `min_cpu`)."""
    engine = AdmissionEngine(skip_unchanged=incremental)
    engine.upsert_quota(QuotaSpec("cohort", max=Resources.of(cpu=cohort), is_parent=True))
    low = Resources.of(cpu=min_cpu) if min_cpu else Resources()
    for name in ("a", "z"):
        engine.upsert_quota(QuotaSpec(name, max=Resources.of(cpu="3"), min=low, parent="cohort"))
    for name in ("cohort", "a", "z"):
        engine.upsert_queue(name, "Priority")
    return engine


def admitted(engine: AdmissionEngine, now: float) -> list[str]:
    return [o.unit.name for o in engine.run_round(now).outcomes if isinstance(o, Admit)]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_queue_under_its_min_takes_freed_quota_before_one_that_borrows(
    incremental: bool,
) -> None:
    engine = siblings("1", incremental=incremental)
    for i in range(3):
        engine.upsert_unit(unit(f"a{i}", "a", created=float(i)))
    assert admitted(engine, 0.0) == ["a0", "a1", "a2"]  # `a` borrows the whole cohort
    engine.upsert_unit(unit("a3", "a", created=3.0))
    engine.upsert_unit(unit("z0", "z", created=4.0))
    assert admitted(engine, 1.0) == []  # full
    engine.remove_unit("a0")  # one cpu freed: `z` holds nothing of its min, `a` holds 2
    assert admitted(engine, 2.0) == ["z0"]


@pytest.mark.parametrize("incremental", [True, False])
def test_without_a_min_the_head_waiting_longest_goes_first_whatever_the_names(
    incremental: bool,
) -> None:
    engine = siblings(None, incremental=incremental)
    for i in range(3):
        engine.upsert_unit(unit(f"a{i}", "a", created=float(i)))
    admitted(engine, 0.0)
    engine.upsert_unit(unit("z0", "z", created=3.0))  # z's head came first
    engine.upsert_unit(unit("a3", "a", created=4.0))
    engine.remove_unit("a0")
    assert admitted(engine, 2.0) == ["z0"]


@pytest.mark.parametrize("incremental", [True, False])
def test_equal_shares_go_to_the_higher_priority_head_before_the_older(incremental: bool) -> None:
    engine = siblings(None, incremental=incremental)
    for i in range(3):
        engine.upsert_unit(unit(f"a{i}", "a", created=float(i)))
    admitted(engine, 0.0)
    engine.upsert_unit(unit("a3", "a", created=3.0))
    engine.upsert_unit(replace(unit("z0", "z", created=4.0), priority=10))
    engine.remove_unit("a0")
    assert admitted(engine, 2.0) == ["z0"]


@pytest.mark.parametrize("incremental", [True, False])
def test_a_queue_whose_head_backs_off_is_ordered_by_the_head_it_offers(incremental: bool) -> None:
    """The head a round offers, not one held back: `z`'s old head backs off, so its
    next unit (younger than `a`'s head) is what competes for the freed cpu."""
    engine = siblings(None, incremental=incremental)
    for i in range(3):
        engine.upsert_unit(unit(f"a{i}", "a", created=float(i)))
    admitted(engine, 0.0)
    engine.upsert_unit(unit("z0", "z", created=3.0))
    engine.upsert_unit(unit("a4", "a", created=4.0))
    engine.upsert_unit(unit("z5", "z", created=5.0))
    engine.defer("z0", 10.0)
    engine.remove_unit("a0")
    assert admitted(engine, 2.0) == ["a4"]


@pytest.mark.parametrize("incremental", [True, False])
def test_both_past_min_the_smaller_share_goes_first_whatever_the_names(incremental: bool) -> None:
    engine = siblings("1", incremental=incremental, cohort="4")
    for i, quota in enumerate("aaz"):
        engine.upsert_unit(unit(f"{quota}{i}", quota, created=float(i)))
    assert admitted(engine, 0.0) == ["a0", "a1", "z2"]  # a: 2 (share 2), z: 1 (share 1)
    engine.upsert_unit(unit("a3", "a", created=3.0))
    engine.upsert_unit(unit("z4", "z", created=4.0))
    assert admitted(engine, 1.0) == ["z4"]  # one cpu left: z's share is the smaller


def test_under_min_needs_every_guaranteed_resource_below_its_min() -> None:
    engine = AdmissionEngine()
    engine.upsert_quota(QuotaSpec("q", max=Resources.of(cpu="4", memory="4Gi"),
                                  min=Resources.of(cpu="2", memory="0")))  # fmt: skip
    engine.upsert_quota(QuotaSpec("none", max=Resources.of(cpu="4")))
    engine.upsert_queue("q", "Priority")
    tree = engine.tree
    assert under_min(tree, "q") and not under_min(tree, "none") and not under_min(tree, "gone")
    engine.upsert_unit(unit("u", "q", cpu="2"))
    admitted(engine, 0.0)
    assert not under_min(tree, "q")  # 2 of min 2 held: guaranteed no more
    assert share(tree, "q") == 1.0 and share(tree, "none") == math.inf
    # a quota with a min before those without; those without (unknown too) in name order
    assert serve_order(tree, ["z", "q", "none", "a"]) == ["q", "a", "none", "z"]


@pytest.mark.parametrize("incremental", [True, False])
def test_past_their_min_the_least_share_then_the_older_head_goes_first(incremental: bool) -> None:
    """Both at or past min 1: the smaller share takes the room; equal shares go to the queue
    whose head waited longest, so no name is served first round after round."""
    engine = siblings("1", incremental=incremental)
    engine.upsert_unit(unit("a0", "a", created=0.0))
    engine.upsert_unit(unit("a1", "a", created=1.0))
    engine.upsert_unit(unit("z0", "z", created=2.0))
    assert admitted(engine, 0.0) == ["a0", "a1", "z0"]  # (both hold nothing yet: a's head first)
    engine.upsert_unit(unit("a2", "a", created=3.0))
    engine.upsert_unit(unit("z1", "z", created=4.0))
    engine.remove_unit("a0")  # a: 1 held, z: 1 held: equal shares, a2 waited longest
    assert admitted(engine, 1.0) == ["a2"]
    engine.upsert_unit(unit("a3", "a", created=5.0))
    engine.remove_unit("a1")  # equal again: z1 waited longer than a3 (by name: a3)
    assert admitted(engine, 2.0) == ["z1"]
    engine.remove_unit("a2")  # a: 0, z: 2 -> a first
    assert admitted(engine, 3.0) == ["a3"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("az"), st.integers(1, 2)), min_size=1, max_size=12),
       st.lists(st.integers(0, 11), max_size=6))
def test_full_and_incremental_rounds_admit_the_same_under_min(
    arrivals: list[tuple[str, int]], removals: list[int],
) -> None:
    """The order is read from usage at the round's start: both rounds serve it alike."""
    engines = [siblings("1", incremental=True), siblings("1", incremental=False)]
    outcomes: list[list[list[str]]] = [[], []]
    for step, (quota, cpu) in enumerate(arrivals):
        for n, engine in enumerate(engines):
            engine.upsert_unit(unit(f"u{step}", quota, cpu=str(cpu), created=float(step)))
            if step in removals and engine.unit(f"u{removals[0]}") is not None:
                engine.remove_unit(f"u{removals[0]}")
            outcomes[n].append(admitted(engine, float(step)))
    assert outcomes[0] == outcomes[1]
