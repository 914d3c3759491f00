"""capacity queue share: volcano-sh/volcano pkg/scheduler/plugins/capacity/capacity_test.go,
Test_updateQueueAttrShare — share = max over the deserved's dimensions of allocated/deserved;
a queue with no (or an all-zero) deserved is best effort and has share 1; the request never
counts. Each parameter id is the Volcano case name (its `request` input is not part of the
computation and is left out)."""

from __future__ import annotations

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.resource import capacity_share

from .harness import rl

EMPTY = Resources()
CASES: list[tuple[str, Resources, Resources, float]] = [
    ("best-effort queue with allocated resources", EMPTY, rl("1", "1Gi"), 1.0),
    ("best-effort queue with pending requests only (no allocated)", EMPTY, EMPTY, 1.0),
    ("best-effort queue with both allocated and request", EMPTY, rl("1", "1Gi"), 1.0),
    ("best-effort queue completely idle", EMPTY, EMPTY, 1.0),
    ("queue with deserved but no allocated", rl("2", "2Gi"), EMPTY, 0.0),
    (
        "queue with deserved, allocated < deserved (CPU dimension)",
        rl("2", "2Gi"),
        rl("1", "1Gi"),
        0.5,
    ),
    ("queue with deserved, allocated = deserved", rl("2", "2Gi"), rl("2", "2Gi"), 1.0),
    (
        "queue with deserved, allocated > deserved (CPU dimension)",
        rl("2", "2Gi"),
        rl("3", "2Gi"),
        1.5,
    ),
    ("queue with deserved, memory is dominant resource", rl("2", "4Gi"), rl("1", "3Gi"), 0.75),
    ("queue with deserved, CPU is dominant resource", rl("2", "4Gi"), rl("1.5", "2Gi"), 0.75),
    (
        "queue with deserved, allocated exceeds on both dimensions",
        rl("2", "2Gi"),
        rl("3", "3Gi"),
        1.5,
    ),
    (
        "queue with deserved, request should not affect share calculation",
        rl("2", "2Gi"),
        rl("1", "1Gi"),
        0.5,
    ),
    (
        "queue with deserved but zero values",
        Resources.of(cpu="0", memory="0Gi"),
        rl("1", "1Gi"),
        1.0,
    ),
    (
        "queue with deserved, allocated is zero",
        rl("2", "2Gi"),
        Resources.of(cpu="0", memory="0"),
        0.0,
    ),
    ("best-effort queue with only CPU allocated", EMPTY, rl("1", "0Gi"), 1.0),
    ("best-effort queue with only memory allocated", EMPTY, rl("0", "1Gi"), 1.0),
    ("best-effort queue with only CPU request (no allocated)", EMPTY, EMPTY, 1.0),
]


@pytest.mark.parametrize(
    ("deserved", "allocated", "want"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_queue_share_is_allocated_over_deserved_and_one_without_deserved(
    deserved: Resources, allocated: Resources, want: float
) -> None:
    """Test_updateQueueAttrShare (all cases)."""
    assert capacity_share(allocated, deserved) == pytest.approx(want)
