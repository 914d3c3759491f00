"""The vendored CRDs of Kueue's further kinds (issue 26) serve what each integration reads and
writes: kind, plural and version, the field that holds it, and the fields its pod sets and
state are read from."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.integrations import APPWRAPPER, Integration

CRDS = Path(__file__).resolve().parents[2] / "crds" / "integrations"
FILES = {
    APPWRAPPER.name: "workload.codeflare.dev_appwrappers.yaml",
}
HELD_BY = {  # the field the queue writes to hold and release the kind
    APPWRAPPER.name: ("spec", "suspend"),
}
READ = {  # fields the pod sets and the state are read from
    APPWRAPPER.name: [
        ("spec", "components", "[]", "template"),
        ("spec", "components", "[]", "podSets", "[]", "path"),
        ("spec", "components", "[]", "podSets", "[]", "replicas"),
        ("status", "phase"),
        ("status", "conditions", "[]", "type"),
        ("status", "componentStatus", "[]", "podSets", "[]", "path"),
    ],
}
KINDS = [APPWRAPPER]


@functools.cache
def load(name: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the files are large
    with (CRDS / name).open() as f:
        crd: dict[str, Any] = yaml.load(f, Loader=loader)
    return crd


def version_of(integration: Integration) -> dict[str, Any]:
    crd = load(FILES[integration.name])
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == integration.workload.version]
    return version


def schema_at(integration: Integration, *path: str) -> dict[str, Any]:
    node: dict[str, Any] = version_of(integration)["schema"]["openAPIV3Schema"]
    for step in path:
        node = node["items"] if step == "[]" else node["properties"][step]
    return node


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
def test_crd_serves_the_integrations_kind_and_version(integration: Integration) -> None:
    crd = load(FILES[integration.name])
    w = integration.workload
    assert crd["spec"]["group"] == w.group
    assert crd["spec"]["names"]["kind"] == w.kind
    assert crd["spec"]["names"]["plural"] == w.plural
    assert crd["metadata"]["name"] == f"{w.plural}.{w.group}"
    version = version_of(integration)
    assert version["served"] and "status" in version["subresources"]


@pytest.mark.parametrize("integration", KINDS, ids=lambda i: i.name)
def test_the_hold_field_is_a_boolean(integration: Integration) -> None:
    assert schema_at(integration, *HELD_BY[integration.name])["type"] == "boolean"


@pytest.mark.parametrize(
    ("integration", "path"),
    [(i, p) for i in KINDS for p in READ[i.name]],
    ids=lambda x: x.name if isinstance(x, Integration) else ".".join(x),
)
def test_the_fields_read_are_in_the_schema(integration: Integration, path: tuple[str, ...]) -> None:
    assert schema_at(integration, *path) is not None
