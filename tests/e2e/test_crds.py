"""The CRDs in crds/ on a real kube-apiserver: valid objects round-trip and print their columns,
invalid ones are rejected by the API server with a message naming the field (SPEC section 1)."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import CRD_DIR, NAMESPACE, Kubectl

TEST_NS = "e2e-crds"
QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"
PARENT_LABEL = "quota.scheduling.koordinator.sh/parent"


@dataclass
class Case:
    crd: str  # CRD name == "<plural>.<group>"
    obj: dict
    columns: dict[str, str]  # printer column header -> value expected in `kubectl get`
    status: dict = field(default_factory=dict)  # written through the status subresource
    namespaced: bool = True

    @property
    def name(self) -> str:
        return self.obj["metadata"]["name"]

    def get_args(self) -> list[str]:
        ns = ["-n", self.obj["metadata"]["namespace"]] if self.namespaced else []
        return [self.crd, self.name, *ns]


def _cases() -> list[Case]:
    return [
        Case(
            crd="elasticquotas.scheduling.sigs.k8s.io",
            obj={
                "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
                "kind": "ElasticQuota",
                "metadata": {
                    "name": "team-a",
                    "namespace": TEST_NS,
                    "labels": {
                        PARENT_LABEL: "org-x",
                        "quota.scheduling.koordinator.sh/is-parent": "false",
                        "koord-queue/queue-policy": "Block",
                    },
                },
                "spec": {
                    "min": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1},
                    "max": {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": "2"},
                },
            },
            status={"used": {"cpu": "1500m", "memory": "2Gi"}},
            columns={"PARENT": "org-x", "IS-PARENT": "false", "POLICY": "Block"},
        ),
        Case(
            crd="queues.scheduling.x-k8s.io",
            obj={
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "Queue",
                "metadata": {
                    "name": "team-a",
                    "namespace": NAMESPACE,
                    "labels": {PARENT_LABEL: "org-x"},
                    "annotations": {"koord-queue/max-depth": "10"},
                },
                # an unregistered policy must be storable: the controller reports AddQueueFail
                "spec": {
                    "priority": 1000,
                    "queuePolicy": "Round",
                    "admissionChecks": [
                        {"name": "ad1"},
                        {
                            "name": "gpu",
                            "labelSelector": {
                                "matchLabels": {"kind": "gpu"},
                                "matchExpressions": [
                                    {"key": "size", "operator": "In", "values": ["l"]}
                                ],
                            },
                        },
                    ],
                },
            },
            status={
                "pending": 2,
                "admitted": 1,
                "queueItemDetails": {
                    "active": [
                        {
                            "name": "job-1",
                            "namespace": TEST_NS,
                            "priority": 5,
                            "position": 1,
                            "extra": "kept",
                        }
                    ]
                },
            },
            columns={"POLICY": "Round", "PRIORITY": "1000", "PARENT": "org-x"},
        ),
        Case(
            crd="queueunits.scheduling.x-k8s.io",
            obj={
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "QueueUnit",
                "metadata": {
                    "name": "job-1",
                    "namespace": TEST_NS,
                    "labels": {QUOTA_LABEL: "team-a"},
                },
                "spec": {
                    "consumerRef": {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": "job-1",
                        "namespace": TEST_NS,
                        "uid": "0b8c5f8e-1d1e-4c1b-9d55-2f0d7a1e2b3c",
                    },
                    "priority": 5,
                    "priorityClassName": "high",
                    "queue": "team-a",
                    "resource": {"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": 1},
                    "podSet": [
                        {
                            "name": "main",
                            "count": 3,
                            "template": {
                                "metadata": {"labels": {"app": "x"}},
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "c",
                                            "image": "busybox",
                                            "resources": {"requests": {"cpu": "500m"}},
                                        }
                                    ]
                                },
                            },
                        }
                    ],
                },
            },
            status={
                "phase": "Enqueued",
                "message": "waiting for quota team-a",
                "lastUpdateTime": "2026-01-02T03:04:05Z",
                "attempts": 2,
                "admissionTime": "2026-01-02T03:04:06Z",
                "admissionChecks": [
                    {
                        "name": "ad1",
                        "state": "Retry",
                        "lastTransitionTime": "2026-01-02T03:04:06Z",
                        "message": "no capacity yet",
                    }
                ],
            },
            columns={"PHASE": "Enqueued", "QUEUE": "team-a", "QUOTA": "team-a", "PRIORITY": "5"},
        ),
        Case(
            crd="podgroups.scheduling.volcano.sh",
            obj={
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "PodGroup",
                "metadata": {"name": "pg-1", "namespace": TEST_NS},
                "spec": {
                    "minMember": 2,
                    "minTaskMember": {"worker": 2},
                    "queue": "default",
                    "minResources": {"cpu": "2", "memory": "4Gi"},
                    "priorityClassName": "high",
                },
            },
            status={
                "phase": "Inqueue",
                "running": 1,
                "succeeded": 0,
                "failed": 0,
                "conditions": [
                    {
                        "type": "Scheduled",
                        "status": "True",
                        "lastTransitionTime": "2026-01-02T03:04:05Z",
                    }
                ],
            },
            columns={"PHASE": "Inqueue", "MINMEMBER": "2", "RUNNING": "1", "QUEUE": "default"},
        ),
        Case(
            crd="queues.scheduling.volcano.sh",
            obj={
                "apiVersion": "scheduling.volcano.sh/v1beta1",
                "kind": "Queue",
                "metadata": {"name": "e2e-root-child"},
                "spec": {
                    "weight": 3,
                    "priority": 10,
                    "capability": {"cpu": "8", "memory": "16Gi"},
                    "deserved": {"cpu": "4"},
                    "guarantee": {"resource": {"cpu": "1"}},
                    "parent": "root",
                    "reclaimable": True,
                },
            },
            status={"state": "Open", "allocated": {"cpu": "2"}, "pending": 1},
            columns={
                "STATE": "Open",
                "WEIGHT": "3",
                "PRIORITY": "10",
                "PARENT": "root",
                "RECLAIMABLE": "true",
            },
            namespaced=False,
        ),
    ]


CASES = {c.crd: c for c in _cases()}


@pytest.fixture(scope="module")
def test_ns(kubectl: Kubectl) -> Iterator[str]:
    """The module's namespace; afterwards its cluster-scoped objects are deleted: the
    Volcano Queue case (parent root, guarantee 1 cpu) left on a worker's plane made a later
    test's `default` queue refuse a 2-cpu pod on a 2-cpu cluster ("capability reached":
    Volcano's capacity keeps other queues' guarantees out of a queue's real capability)."""
    kubectl.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEST_NS}})
    yield TEST_NS
    # (the namespace stays: this plane runs no namespace controller, so a deleted namespace
    # would stay Terminating, and a later controller's events about its objects be refused)
    for case in CASES.values():
        if not case.namespaced:
            kubectl("delete", *case.get_args(), "--ignore-not-found", check=False)


def _table(text: str) -> dict[str, str]:
    """`kubectl get` output with one row -> {HEADER: value} (columns split on 2+ spaces)."""
    import re

    lines = [ln for ln in text.splitlines() if ln.strip()]
    assert len(lines) == 2, text
    header, row = lines
    starts = [m.start() for m in re.finditer(r"\S+", header)]
    names = header.split()
    out = {}
    for i, name in enumerate(names):
        end = starts[i + 1] if i + 1 < len(starts) else None
        out[name] = row[starts[i] : end].strip()
    return out


VENDORED = {
    "hypernodes.topology.volcano.sh", "numatopologies.nodeinfo.volcano.sh",
    "admissionchecks.kueue.x-k8s.io",
}
"""Volcano's and Kueue's own CRDs shipped unchanged (crds/README.md): their shape is theirs,
not checked here; tests/e2e/test_hypernodes.py and test_numatopology.py install and use
HyperNodes and Numatopologies."""


def test_every_crd_file_is_covered() -> None:
    names = {
        yaml.safe_load(p.read_text())["metadata"]["name"] for p in Path(CRD_DIR).glob("*.yaml")
    }
    assert names == set(CASES) | VENDORED


def test_crds_are_established_with_structural_schemas(kubectl: Kubectl) -> None:
    for name in CASES:
        crd = kubectl.json("get", "crd", name)
        conds = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conds.get("Established") == "True", (name, conds)
        assert conds.get("NamesAccepted") == "True", (name, conds)
        assert conds.get("NonStructuralSchema") in (None, "False"), (name, conds)
        version = crd["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}, name
        assert {c["name"] for c in version["additionalPrinterColumns"]} >= {"Age"}


@pytest.mark.parametrize("crd", list(CASES))
def test_valid_object_round_trips_and_prints_columns(
    crd: str, kubectl: Kubectl, test_ns: str
) -> None:
    case = CASES[crd]
    kubectl.apply(case.obj)
    if case.status:
        kubectl(
            "patch",
            *case.get_args(),
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": case.status}),
        )
    got = kubectl.json("get", *case.get_args())

    assert got["kind"] == case.obj["kind"]
    assert got["apiVersion"] == case.obj["apiVersion"]
    assert got["spec"] == case.obj["spec"]  # quantities stored exactly as written ("500m", 4)
    for key, value in case.obj["metadata"].get("labels", {}).items():
        assert got["metadata"]["labels"][key] == value
    for key, value in case.status.items():
        if key == "queueItemDetails":  # free-form detail entries keep unknown fields
            assert got["status"][key]["active"][0]["extra"] == "kept"
        assert got["status"][key] == value, key

    table = _table(kubectl("get", *case.get_args()).stdout)
    assert table["NAME"] == case.name
    for header, value in case.columns.items():
        assert table.get(header) == value, (header, table)
    assert "AGE" in table


def test_queue_unit_wide_columns_and_short_names(kubectl: Kubectl, test_ns: str) -> None:
    kubectl.apply(CASES["queueunits.scheduling.x-k8s.io"].obj)
    kubectl(
        "patch",
        "qu",
        "job-1",
        "-n",
        TEST_NS,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "Backoff", "message": "retry", "attempts": 3}}),
    )
    table = _table(kubectl("get", "qu", "job-1", "-n", TEST_NS, "-o", "wide").stdout)
    assert table["PHASE"] == "Backoff"
    assert table["ATTEMPTS"] == "3"
    for short in ("eq", "pg", "q"):
        assert kubectl("get", short, "-A", check=False).returncode == 0, short


def test_api_client_reads_custom_objects(api_client: Any, kubectl: Kubectl, test_ns: str) -> None:
    from kubernetes import client

    case = CASES["elasticquotas.scheduling.sigs.k8s.io"]
    kubectl.apply(case.obj)
    api = client.CustomObjectsApi(api_client)
    got = api.get_namespaced_custom_object(
        "scheduling.sigs.k8s.io", "v1alpha1", TEST_NS, "elasticquotas", case.name
    )
    assert got["spec"]["max"]["memory"] == "8Gi"
    assert got["spec"]["min"]["cpu"] == "500m"


# --------------------------------------------------------------------------- rejections


BAD_QUANTITY = "12xyz"

INVALID = [
    # (crd, field path in the object, bad value, text the error must contain)
    # ElasticQuota: CEL rules with a sentence (issue 33), in the API server's spelling
    ("elasticquotas.scheduling.sigs.k8s.io", "spec.max.cpu", BAD_QUANTITY, "spec.max[cpu]"),
    ("elasticquotas.scheduling.sigs.k8s.io", "spec.min.memory", "1.5.Gi", "spec.min[memory]"),
    ("elasticquotas.scheduling.sigs.k8s.io", "spec.max.cpu", "-1", "must not be negative"),
    ("elasticquotas.scheduling.sigs.k8s.io", "spec.max.memory", -5, "must not be negative"),
    ("elasticquotas.scheduling.sigs.k8s.io", "spec.max.nvidia.com/gpu", True, "spec.max"),
    ("queues.scheduling.x-k8s.io", "spec.priority", "high", "spec.priority"),
    ("queues.scheduling.x-k8s.io", "spec.queuePolicy", 7, "spec.queuePolicy"),
    ("queueunits.scheduling.x-k8s.io", "spec.priority", "high", "spec.priority"),
    (
        "queueunits.scheduling.x-k8s.io",
        "spec.resource.memory",
        BAD_QUANTITY,
        "spec.resource.memory",
    ),
    (
        "queueunits.scheduling.x-k8s.io",
        "spec.podSet",
        [{"name": "main", "count": -1}],
        "spec.podSet[0].count",
    ),
    (
        "queueunits.scheduling.x-k8s.io",
        "spec.consumerRef",
        {"kind": "Job"},
        "spec.consumerRef.name",
    ),
    ("podgroups.scheduling.volcano.sh", "spec.minMember", -1, "spec.minMember"),
    (
        "podgroups.scheduling.volcano.sh",
        "spec.minResources.cpu",
        BAD_QUANTITY,
        "spec.minResources.cpu",
    ),
    (
        "podgroups.scheduling.volcano.sh",
        "spec.minTaskMember.worker",
        "two",
        "spec.minTaskMember.worker",
    ),
    ("queues.scheduling.volcano.sh", "spec.weight", 0, "spec.weight"),
    ("queues.scheduling.volcano.sh", "spec.capability.cpu", BAD_QUANTITY, "spec.capability.cpu"),
    (
        "queues.scheduling.volcano.sh",
        "spec.guarantee.resource.memory",
        BAD_QUANTITY,
        "spec.guarantee.resource.memory",
    ),
    ("queues.scheduling.volcano.sh", "spec.reclaimable", "yes", "spec.reclaimable"),
]


def _set_path(obj: dict, path: str, value: Any) -> dict:
    # resource names contain dots ("nvidia.com/gpu"): split the known prefix only
    out = copy.deepcopy(obj)
    parts = path.split(".")
    if "nvidia" in parts:
        i = parts.index("nvidia")
        parts = [*parts[:i], ".".join(parts[i:])]
    cur = out
    for k in parts[:-1]:
        cur = cur.setdefault(k, {})
    cur[parts[-1]] = value
    return out


@pytest.mark.parametrize(
    ("crd", "path", "value", "expected"),
    INVALID,
    ids=[f"{c.split('.')[0]}-{p}={v!r}" for c, p, v, _ in INVALID],
)
def test_invalid_object_is_rejected_naming_the_field(
    crd: str, path: str, value: Any, expected: str, kubectl: Kubectl, test_ns: str
) -> None:
    case = CASES[crd]
    obj = _set_path(case.obj, path, value)
    obj["metadata"]["name"] = "invalid-" + case.name
    proc = kubectl.create(obj, check=False)
    assert proc.returncode != 0, f"{crd} accepted {path}={value!r}: {proc.stdout}"
    err = proc.stderr
    assert "is invalid" in err or "Invalid value" in err, err
    assert expected in err, err
    if crd.startswith("elasticquotas") and value != True:  # noqa: E712 (a boolean case)
        assert "should match" not in err, err  # a sentence, never the regular expression
        assert "must be a Kubernetes quantity" in err or "must not be negative" in err, err
    elif value == BAD_QUANTITY:
        assert "should match" in err, err  # the quantity pattern did the rejecting
    # nothing was stored
    get = kubectl("get", *Case(crd, obj, {}, namespaced=case.namespaced).get_args(), check=False)
    assert get.returncode != 0 and "NotFound" in get.stderr


@pytest.mark.parametrize(
    ("crd", "path", "value", "expected"),
    [
        ("queueunits.scheduling.x-k8s.io", "status.phase", "Sleeping", "status.phase"),
        (
            "queueunits.scheduling.x-k8s.io",
            "status.lastUpdateTime",
            "yesterday",
            "status.lastUpdateTime",
        ),
        (
            "queueunits.scheduling.x-k8s.io",
            "status.admissionChecks",
            [{"name": "ad1", "state": "Maybe", "lastTransitionTime": "2026-01-02T03:04:06Z"}],
            "status.admissionChecks[0].state",
        ),
        ("podgroups.scheduling.volcano.sh", "status.phase", "Done", "status.phase"),
        ("queues.scheduling.volcano.sh", "status.state", "Half-open", "status.state"),
        (
            "elasticquotas.scheduling.sigs.k8s.io",
            "status.used.cpu",
            BAD_QUANTITY,
            "status.used.cpu",
        ),
    ],
)
def test_invalid_status_is_rejected_naming_the_field(
    crd: str, path: str, value: Any, expected: str, kubectl: Kubectl, test_ns: str
) -> None:
    case = CASES[crd]
    kubectl.apply(case.obj)
    patch = _set_path({}, path, value)
    proc = kubectl(
        "patch",
        *case.get_args(),
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
        check=False,
    )
    assert proc.returncode != 0, proc.stdout
    assert expected in proc.stderr, proc.stderr
    if crd.startswith(("queueunits", "podgroups")) or "state" in path:
        assert (
            "Unsupported value" in proc.stderr
            or "should match" in proc.stderr
            or "must be of type" in proc.stderr
        ), proc.stderr


def test_unknown_field_is_rejected_by_strict_field_validation(
    kubectl: Kubectl, test_ns: str
) -> None:
    obj = copy.deepcopy(CASES["podgroups.scheduling.volcano.sh"].obj)
    obj["metadata"]["name"] = "pg-unknown-field"
    obj["spec"]["minMembers"] = 3  # typo of minMember
    proc = kubectl.create(obj, check=False)
    assert proc.returncode != 0
    assert 'unknown field "spec.minMembers"' in proc.stderr, proc.stderr
