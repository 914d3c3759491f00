"""The per-placement share shortcuts (issue 16, part 2) equal the plain formulas.

drf's `share_in` lists the cluster's offered dimensions once; proportion's `QueueAttr`
changes its allocated amounts in place and lists the deserved's dimensions once. Both must
give exactly the floats (and the allocated list) of the plain computation.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api.resource import deserved_share
from koordqueue.scheduler.plugins.drf import offered_dims, share, share_in
from koordqueue.scheduler.plugins.proportion import QueueAttr

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
