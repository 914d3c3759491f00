"""The controller survives any object the API could hand it, and says what was wrong.

The handlers are driven directly with hypothesis-generated objects (wrong types, missing
fields, bad quantities, odd phases) against an in-memory API; nothing may escape, and every
invalid quota/unit/job is reported with an event naming the problem.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.kube.api import ApiError, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings


class MemoryApi:
    """Just enough of KubeApi, in memory, with resourceVersions and 404/409 like the server."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str | None, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._rv = itertools.count(1)

    def _key(self, kind: Kind, namespace: str | None, name: str) -> tuple[str, str | None, str]:
        return (kind.plural, namespace if kind.namespaced else None, name)

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return self.objects.get(self._key(kind, namespace, name))

    def list_objects(
        self, kind: Kind, namespace: str | None = None, label_selector: str | None = None
    ) -> list[dict[str, Any]]:
        return [
            o
            for (plural, ns, _), o in self.objects.items()
            if plural == kind.plural and (namespace is None or ns == namespace)
        ]

    def create(
        self, kind: Kind, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        if kind.plural == "events":
            self.events.append(body)
            return {**body, "metadata": {**body["metadata"], "name": f"ev{len(self.events)}"}}
        meta = body["metadata"]
        key = self._key(kind, namespace or meta.get("namespace"), meta["name"])
        if key in self.objects:
            raise ApiError(409, "AlreadyExists", "exists", "POST", kind.path())
        obj = {
            **body,
            "metadata": {
                **meta,
                "uid": f"uid-{meta['name']}",
                "resourceVersion": str(next(self._rv)),
            },
        }
        self.objects[key] = obj
        return obj

    def apply(self, kind: Kind, body: dict[str, Any], force: bool = True) -> dict[str, Any]:
        meta = body["metadata"]
        key = self._key(kind, meta.get("namespace"), meta["name"])
        obj = {**self.objects.get(key, {}), **body}
        obj["metadata"] = {**meta, "resourceVersion": str(next(self._rv))}
        self.objects[key] = obj
        return obj

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind.plural == "events":
            return {}
        key = self._key(kind, namespace, name)
        obj = self.objects.get(key)
        if obj is None:
            raise ApiError(404, "NotFound", "not found", "PATCH", kind.path())
        want = (patch.get("metadata") or {}).get("resourceVersion")
        if want and want != obj["metadata"].get("resourceVersion"):
            raise ApiError(409, "Conflict", "modified", "PATCH", kind.path())
        for field, value in patch.items():
            if field != "metadata" and isinstance(value, dict):
                obj[field] = {**(obj.get(field) or {}), **value}
        obj["metadata"]["resourceVersion"] = str(next(self._rv))
        return obj

    def delete(
        self, kind: Kind, name: str, namespace: str | None = None, uid: str | None = None
    ) -> bool:
        return self.objects.pop(self._key(kind, namespace, name), None) is not None


junk = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
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
    controller = Controller(api, ControllerSettings(), writers=1)  # type: ignore[arg-type]
    try:
        handlers = {
            "quota": controller.on_quota,
            "unit": controller.on_unit,
            "job": controller.on_job,
        }
        for kind, event_type, obj in events:
            handlers[kind](event_type, obj)
            controller.admission_round()
    finally:
        controller.close()


def test_invalid_quota_is_reported_with_the_field() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)  # type: ignore[arg-type]
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
    assert "spec.max.cpu" in api.events[0]["message"] and "12xyz" in api.events[0]["message"]


def test_invalid_job_template_is_reported_and_gets_no_unit() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)  # type: ignore[arg-type]
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
    controller.on_job("ADDED", job)
    controller.close()
    assert [e["reason"] for e in api.events] == ["InvalidJob"]
    assert "containers[0].resources.requests.cpu" in api.events[0]["message"]
    assert (
        api.list_objects(Kind("scheduling.x-k8s.io", "v1alpha1", "queueunits", "QueueUnit")) == []
    )


def test_invalid_unit_is_reported_once() -> None:
    api = MemoryApi()
    controller = Controller(api, ControllerSettings(), writers=1)  # type: ignore[arg-type]
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
