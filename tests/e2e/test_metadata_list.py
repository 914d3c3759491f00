"""The periodic resync's first read on the real API server: a metadata-only list of the
QueueUnits (PartialObjectMetadataList) names every unit at the version a whole list gives,
without spec or status (the bytes the resync no longer decodes, issue 27)."""

from __future__ import annotations

from typing import Any

from koordqueue.domain import names
from koordqueue.kube.api import QUEUE_UNIT, KubeApi
from tests.e2e import kq
from tests.e2e.conftest import Kubectl


def _unit(name: str, ns: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {names.QUOTA_NAME_LABEL: "nowhere"}},
            "spec": {"resource": {"cpu": "1"}, "priority": 3}}


def test_a_metadata_only_list_names_each_unit_at_its_version(
    kubectl: Kubectl, api_client: Any
) -> None:
    ns = kq.namespace(kubectl, "metalist")
    api = KubeApi(api_client)
    for i in range(3):
        api.create(QUEUE_UNIT, _unit(f"u{i}", ns), ns)
    api.merge_patch(QUEUE_UNIT, "u1", {"status": {"phase": "Enqueued"}}, ns, "status")
    whole, _ = api.list_with_version(QUEUE_UNIT, ns)
    slim, version = api.list_with_version(QUEUE_UNIT, ns, metadata_only=True)
    assert version
    assert [i["kind"] for i in slim] == ["PartialObjectMetadata"] * 3
    assert all(set(i) == {"apiVersion", "kind", "metadata"} for i in slim)  # no spec, no status
    versions = lambda items: {  # noqa: E731
        i["metadata"]["name"]: (i["metadata"]["uid"], i["metadata"]["resourceVersion"])
        for i in items
    }
    assert versions(slim) == versions(whole)
    assert all("managedFields" not in i["metadata"] for i in slim)
