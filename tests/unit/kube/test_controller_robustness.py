"""The controller survives any object the API could hand it, and says what was wrong.

The handlers are driven directly with hypothesis-generated objects (wrong types, missing
fields, bad quantities, odd phases) against an in-memory API; nothing may escape, and every
invalid quota/unit/job is reported with an event naming the problem.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.kube.api import Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi


def _nest(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    _nest,
    max_leaves=8,
)
quantity = st.one_of(st.sampled_from(["1", "500m", "2Gi", "12xyz", "", "-1", "1e999"]), junk)
labels = st.dictionaries(
    st.sampled_from(
        [
            "quota.scheduling.koordinator.sh/name",
            "quota.scheduling.koordinator.sh/parent",
            "koord-queue/queue-policy",
            "other",
        ]
    ),
    st.one_of(st.sampled_from(["q", "root", "Round", "Block", "", "bad name!"]), junk),
    max_size=3,
)


def meta(name: str, extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "ns",
        "uid": f"uid-{name}",
        "resourceVersion": "1",
        "labels": extra,
    }


quota_objects = st.builds(
    lambda lab, mx, mn: {"metadata": meta("q", lab), "spec": {"max": mx, "min": mn}},
    labels,
    st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2) | junk,
    st.dictionaries(st.sampled_from(["cpu"]), quantity, max_size=1) | junk,
)
unit_objects = st.builds(
    lambda lab, res, prio, phase: {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": meta("u", lab),
        "spec": {"resource": res, "priority": prio},
        "status": {"phase": phase},
    },
    labels,
    st.dictionaries(st.sampled_from(["cpu"]), quantity, max_size=1) | junk,
    st.one_of(st.integers(-5, 5), junk),
    st.one_of(st.sampled_from(["Enqueued", "Running", "Succeed", "SchedFailed", "Bogus"]), junk),
)
job_objects = st.builds(
    lambda lab, par, req, suspend: {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta("j", lab),
        "spec": {
            "suspend": suspend,
            "parallelism": par,
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": req}}]}},
        },
    },
    labels,
    st.one_of(st.integers(0, 4), st.none()),
    st.dictionaries(st.sampled_from(["cpu", "memory"]), quantity, max_size=2),
    st.booleans(),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["quota", "unit", "job"]),
            st.sampled_from(["ADDED", "MODIFIED", "DELETED", None]),
            st.one_of(quota_objects, unit_objects, job_objects),
        ),
        max_size=6,
    )
)
def test_handlers_never_raise_on_any_object(
    events: list[tuple[str, str | None, dict[str, Any]]],
) -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)
    try:
        handlers = {
            "quota": controller.on_quota,
            "unit": controller.on_unit,
            "job": controller.consumers["Job"].on_event,
        }
        for kind, event_type, obj in events:
            handlers[kind](event_type, obj)
            controller.admission_round()
    finally:
        controller.close()


def test_invalid_quota_is_reported_with_the_field() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)
    controller.on_quota(
        "ADDED",
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "ElasticQuota",
            "metadata": meta("q", {}),
            "spec": {"max": {"cpu": "12xyz"}},
        },
    )
    controller.close()
    assert [e["reason"] for e in api.events] == ["InvalidQuota"]
    assert "spec.max[cpu]" in api.events[0]["message"] and "12xyz" in api.events[0]["message"]


def test_invalid_job_template_is_reported_and_gets_no_unit() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta("j", {}),
        "spec": {
            "suspend": True,
            "template": {
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}]}
            },
        },
    }
    controller.consumers["Job"].on_event("ADDED", job)
    controller.close()
    assert [e["reason"] for e in api.events] == ["InvalidJob"]
    assert "containers[0].resources.requests.cpu" in api.events[0]["message"]
    assert (
        api.list_objects(Kind("scheduling.x-k8s.io", "v1alpha1", "queueunits", "QueueUnit")) == []
    )


def test_invalid_unit_is_reported_once() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)
    unit = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": meta("u", {}),
        "spec": {"priority": "high"},
    }
    controller.on_unit("ADDED", unit)
    controller.on_unit("MODIFIED", unit)
    controller.close()
    assert [e["reason"] for e in api.events] == ["InvalidQueueUnit"]
    assert "spec.priority" in api.events[0]["message"]
