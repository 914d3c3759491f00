"""The effective-request memo of pod conversion (issue 19: CPU per pod).

`effective_requests` must equal `pod_requests` on every spec, memo or not: a key that
missed a field `pod_requests` reads would hand one pod another's request.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.domain.job_extension import InvalidJobError, pod_requests
from koordqueue.kube.scheduler import convert

AMOUNTS = st.dictionaries(
    st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
    st.sampled_from(["1", "2", "100m", "128Mi", "1Gi", "0"]),
    max_size=2,
)
RESOURCES = st.fixed_dictionaries({}, optional={"limits": AMOUNTS, "requests": AMOUNTS})
CONTAINER = st.fixed_dictionaries(
    {"name": st.just("c"), "resources": RESOURCES},
    optional={"restartPolicy": st.just("Always")},
)
SPEC = st.fixed_dictionaries(
    {"containers": st.lists(CONTAINER, min_size=1, max_size=2)},
    optional={"initContainers": st.lists(CONTAINER, max_size=2), "overhead": AMOUNTS},
)


@settings(max_examples=150, deadline=None)
@given(specs=st.lists(SPEC, min_size=1, max_size=6))
def test_the_memo_answers_what_pod_requests_answers(specs: list[dict[str, Any]]) -> None:
    convert._requests_memo.clear()
    for spec in specs + specs:  # the second pass reads the memo
        assert convert.effective_requests(spec, "ns/p") == pod_requests(spec, "ns/p")


def spec(cpu: str, init_policy: str | None = None) -> dict[str, Any]:
    init: dict[str, Any] = {"name": "i", "resources": {"requests": {"cpu": "1"}}}
    if init_policy is not None:
        init["restartPolicy"] = init_policy
    return {
        "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}],
        "initContainers": [init],
    }


def test_pods_with_one_resource_spec_share_one_parsed_request() -> None:
    convert._requests_memo.clear()
    first = convert.effective_requests(spec("2"), "ns/a")
    assert convert.effective_requests(spec("2"), "ns/b") is first


def test_a_sidecar_init_container_is_not_mistaken_for_a_plain_one() -> None:
    convert._requests_memo.clear()
    plain = convert.effective_requests(spec("2"), "ns/a")  # max(2, 1) = 2 cpu
    sidecar = convert.effective_requests(spec("2", "Always"), "ns/b")  # 2 + 1 = 3 cpu
    assert plain != sidecar
    assert sidecar == pod_requests(spec("2", "Always"), "ns/b")


def test_an_invalid_request_raises_every_time_and_is_not_kept() -> None:
    convert._requests_memo.clear()
    for _ in range(2):
        with pytest.raises(InvalidJobError):
            convert.effective_requests(spec("lots"), "ns/a")
    assert convert._requests_memo == {}


def test_an_unhashable_amount_is_parsed_without_the_memo() -> None:
    bad = {"containers": [{"name": "c", "resources": {"requests": {"cpu": ["1"]}}}]}
    with pytest.raises((InvalidJobError, TypeError, AttributeError)):
        pod_requests(bad, "ns/a")  # what the unmemoized path does with it
    with pytest.raises((InvalidJobError, TypeError, AttributeError)):
        convert.effective_requests(bad, "ns/a")


def test_a_full_memo_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(convert, "REQUESTS_MEMO_SIZE", 3)
    convert._requests_memo.clear()
    for i in range(4):
        convert.effective_requests(spec(f"{i + 1}m"), "ns/a")
    assert len(convert._requests_memo) == 1
