"""The per-placement share shortcuts (issue 16, part 2) equal the plain formulas.

drf's `share_in` lists the cluster's offered dimensions once; proportion's `QueueAttr`
changes its allocated amounts in place and lists the deserved's dimensions once. Both must
give exactly the floats (and the allocated list) of the plain computation.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler import ClusterSnapshot
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo, TaskStatus
from koordqueue.scheduler.api.resource import deserved_share
from koordqueue.scheduler.framework.session import open_session
from koordqueue.scheduler.plugins.drf import offered_dims, share, share_in
from koordqueue.scheduler.plugins.proportion import QueueAttr

from .builders import DEFAULT_TIERS, config, milli

DEFAULT = config("enqueue, allocate, backfill", *DEFAULT_TIERS)

_NAMES = ["cpu", "memory", "pods", "nvidia.com/gpu"]
_amounts = st.dictionaries(st.sampled_from(_NAMES), st.integers(-(10**12), 10**13), max_size=4)


@settings(max_examples=60, deadline=None)
@given(_amounts, _amounts)
def test_drf_share_in_equals_share(allocated: dict[str, int], total: dict[str, int]) -> None:
    assert share_in(allocated, offered_dims(total)) == share(allocated, Resources(total))


@settings(max_examples=60, deadline=None)
@given(
    _amounts,
    _amounts,
    st.lists(st.tuples(_amounts, st.sampled_from([1, -1])), max_size=6),
)
def test_queue_attr_changes_like_resource_arithmetic(
    start: dict[str, int],
    deserved: dict[str, int],
    events: list[tuple[dict[str, int], int]],
) -> None:
    """In-place changes give the same allocated list and share as `allocated +/- request`
    and `deserved_share`, also after the deserved is replaced."""
    attr = QueueAttr("q", 1, Resources(), Resources(), deserved=Resources(deserved))
    attr.allocated = Resources(start)
    expected = Resources(start)
    for i, (request, sign) in enumerate(events):
        if i == 2:
            attr.deserved = Resources({k: v + 1 for k, v in deserved.items()})
        attr.change(Resources(request), sign)
        expected = expected + Resources(request) if sign > 0 else expected - Resources(request)
        assert attr.allocated == expected
        assert attr.share == deserved_share(expected, attr.deserved)


@settings(max_examples=40, deadline=None)
@given(
    _amounts,
    _amounts,
    st.lists(st.tuples(_amounts, st.sampled_from([1, -1]), st.booleans()), max_size=8),
)
def test_queue_attr_share_read_after_several_changes(
    start: dict[str, int],
    deserved: dict[str, int],
    events: list[tuple[dict[str, int], int, bool]],
) -> None:
    """The share is recomputed when read, not per change: read after any run of changes it
    is the share of the allocated amounts as they are then."""
    attr = QueueAttr("q", 1, Resources(), Resources(), deserved=Resources(deserved))
    attr.allocated = Resources(start)
    attr.update_share()
    expected = Resources(start)
    for request, sign, read in events:
        attr.change(Resources(request), sign)
        expected = expected + Resources(request) if sign > 0 else expected - Resources(request)
        if read:
            assert attr.share == deserved_share(expected, attr.deserved)
    assert attr.share == deserved_share(expected, attr.deserved)


_SHAPES = [
    milli({"cpu": 500, "memory": 2**30 * 1000}),
    milli({"cpu": 2000}),
]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.booleans()), max_size=30))
def test_drf_job_key_follows_the_placements(moves: list[tuple[int, bool]]) -> None:
    """drf's job order key (its share, recomputed when asked after the job's placements
    moved it) equals `share` of the job's allocated amounts after any allocate/undo run."""
    nodes = [
        NodeInfo(f"n{i}", milli({"cpu": 64000, "memory": 2**38 * 1000}))
        for i in range(3)
    ]
    jobs = [
        JobInfo(
            f"j{j}",
            queue="q",
            min_available=1,
            tasks=[TaskInfo(f"j{j}t{t}", f"j{j}t{t}", resreq=_SHAPES[j % 2]) for t in range(4)],
        )
        for j in range(3)
    ]
    session = open_session(ClusterSnapshot(nodes, jobs, [QueueInfo("q")]), DEFAULT)
    key = session._job_order_keys["drf"]
    tasks = [t for job in session.jobs.values() for t in job.tasks.values()]
    for n, (which, place) in enumerate(moves):
        task = tasks[which]
        if place and task.status is TaskStatus.PENDING:
            session.allocate_task(task, session.node_list[n % len(nodes)])
        elif not place and task.status is TaskStatus.ALLOCATED:
            session.unallocate_task(task)
        for job in session.jobs.values():
            if n % 3 == which % 3:  # asked after some moves only
                expected = share(job.allocated, session.total_resource)
                assert key(job) == expected
