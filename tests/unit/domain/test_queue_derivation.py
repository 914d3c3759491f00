"""SPEC 2.2 queue ownership: the Queue is derived from its quota; merge keeps foreign data."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain import DesiredQueue, derive_queue, merge_queue
from koordqueue.domain.names import (
    KNOWN_POLICIES,
    QUEUE_NAMESPACE,
    QUEUE_POLICY_KEY,
    QUOTA_PARENT_LABEL,
)
from koordqueue.domain.queue_derivation import queue_needs_update

from .helpers import elastic_quota


def test_queue_is_named_after_its_quota() -> None:
    assert derive_queue(elastic_quota("team-a")).name == "team-a"


def test_queue_lives_in_the_koord_queue_namespace_whatever_the_quota_namespace() -> None:
    assert derive_queue(elastic_quota(namespace="somewhere")).namespace == QUEUE_NAMESPACE
    assert QUEUE_NAMESPACE == "koord-queue"


def test_queue_priority_is_1000() -> None:
    assert derive_queue(elastic_quota()).priority == 1000


@pytest.mark.parametrize("policy", ["Priority", "Block", "Round", "Intelligent"])
def test_policy_label_with_known_value_becomes_the_queue_policy(policy: str) -> None:
    desired = derive_queue(elastic_quota(labels={QUEUE_POLICY_KEY: policy}))
    assert desired.policy == policy


@pytest.mark.parametrize("value", ["FIFO", "priority", "", " Block", "Block ", "anything"])
def test_policy_falls_back_to_priority_for_unknown_value(value: str) -> None:
    assert derive_queue(elastic_quota(labels={QUEUE_POLICY_KEY: value})).policy == "Priority"


@pytest.mark.parametrize("value", [None, 3, True, ["Block"]])
def test_policy_falls_back_to_priority_for_non_string_value(value: object) -> None:
    assert derive_queue(elastic_quota(labels={QUEUE_POLICY_KEY: value})).policy == "Priority"


def test_policy_falls_back_to_priority_when_label_missing() -> None:
    assert derive_queue(elastic_quota()).policy == "Priority"


def test_known_policies_are_exactly_those_of_the_spec() -> None:
    assert set(KNOWN_POLICIES) == {"Priority", "Block", "Round", "Intelligent"}


def test_parent_label_is_copied_from_the_quota() -> None:
    desired = derive_queue(elastic_quota(labels={QUOTA_PARENT_LABEL: "org"}))
    assert desired.parent == "org"
    assert desired.to_manifest()["metadata"]["labels"] == {QUOTA_PARENT_LABEL: "org"}


def test_queue_without_parent_label_carries_none() -> None:
    desired = derive_queue(elastic_quota())
    assert desired.parent is None
    assert "labels" not in desired.to_manifest()["metadata"]


def test_koord_queue_annotations_are_synced_except_the_policy_key() -> None:
    desired = derive_queue(
        elastic_quota(
            annotations={
                "koord-queue/max-depth": "5",
                "koord-queue/wait-for-pods-running": "true",
                QUEUE_POLICY_KEY: "Block",
                "other.io/x": "y",
                "koord-queuex/nope": "z",
            }
        )
    )
    assert dict(desired.annotations) == {
        "koord-queue/max-depth": "5",
        "koord-queue/wait-for-pods-running": "true",
    }


def test_manifest_has_exactly_the_owned_fields() -> None:
    manifest = derive_queue(
        elastic_quota(
            "q",
            labels={QUEUE_POLICY_KEY: "Block", QUOTA_PARENT_LABEL: "p"},
            annotations={"koord-queue/a": "1"},
        )
    ).to_manifest()
    assert manifest == {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {
            "name": "q",
            "namespace": "koord-queue",
            "labels": {QUOTA_PARENT_LABEL: "p"},
            "annotations": {"koord-queue/a": "1"},
        },
        "spec": {"priority": 1000, "queuePolicy": "Block"},
    }


@pytest.mark.parametrize("metadata", [{}, {"name": ""}, {"name": None}, {"name": 5}])
def test_quota_without_a_name_is_rejected_naming_the_field(metadata: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"metadata\.name"):
        derive_queue({"metadata": metadata})


def test_merge_creates_the_queue_when_missing() -> None:
    desired = derive_queue(elastic_quota("q", annotations={"koord-queue/a": "1"}))
    assert merge_queue(None, desired) == desired.to_manifest()


def _existing_queue(**overrides: Any) -> dict[str, Any]:
    queue: dict[str, Any] = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "Queue",
        "metadata": {
            "name": "team-a",
            "namespace": "koord-queue",
            "resourceVersion": "42",
            "labels": {"owner": "ops"},
            "annotations": {"note": "hand-written", "koord-queue/manual": "keep"},
        },
        "spec": {"priority": 1000, "queuePolicy": "Priority"},
        "status": {"x": 1},
    }
    queue.update(overrides)
    return queue


def test_hand_edited_policy_is_reverted_by_merge() -> None:
    existing = _existing_queue(spec={"priority": 1000, "queuePolicy": "Round"})
    desired = derive_queue(elastic_quota(labels={QUEUE_POLICY_KEY: "Block"}))
    assert merge_queue(existing, desired)["spec"]["queuePolicy"] == "Block"


def test_hand_edited_priority_is_reverted_by_merge() -> None:
    existing = _existing_queue(spec={"priority": 7, "queuePolicy": "Priority"})
    assert merge_queue(existing, derive_queue(elastic_quota()))["spec"]["priority"] == 1000


def test_annotations_written_directly_on_the_queue_are_kept_by_merge() -> None:
    merged = merge_queue(_existing_queue(), derive_queue(elastic_quota()))
    assert merged["metadata"]["annotations"]["note"] == "hand-written"
    assert merged["metadata"]["annotations"]["koord-queue/manual"] == "keep"


def test_merge_adds_and_updates_synced_annotations() -> None:
    existing = _existing_queue()
    existing["metadata"]["annotations"]["koord-queue/max-depth"] = "1"
    desired = derive_queue(
        elastic_quota(annotations={"koord-queue/max-depth": "9", "koord-queue/new": "n"})
    )
    annotations = merge_queue(existing, desired)["metadata"]["annotations"]
    assert annotations["koord-queue/max-depth"] == "9"
    assert annotations["koord-queue/new"] == "n"


def test_merge_never_deletes_annotations_it_did_not_sync() -> None:
    existing = _existing_queue()
    merged = merge_queue(
        existing, derive_queue(elastic_quota()), previously_synced=["koord-queue/x"]
    )
    assert merged["metadata"]["annotations"] == existing["metadata"]["annotations"]


def test_merge_drops_a_previously_synced_annotation_removed_from_the_quota() -> None:
    existing = _existing_queue()
    existing["metadata"]["annotations"]["koord-queue/max-depth"] = "1"
    merged = merge_queue(
        existing, derive_queue(elastic_quota()), previously_synced=["koord-queue/max-depth"]
    )
    assert "koord-queue/max-depth" not in merged["metadata"]["annotations"]
    assert merged["metadata"]["annotations"]["koord-queue/manual"] == "keep"


def test_merge_keeps_foreign_labels_and_sets_the_parent_label() -> None:
    desired = derive_queue(elastic_quota(labels={QUOTA_PARENT_LABEL: "org"}))
    labels = merge_queue(_existing_queue(), desired)["metadata"]["labels"]
    assert labels == {"owner": "ops", QUOTA_PARENT_LABEL: "org"}


def test_merge_removes_the_parent_label_when_the_quota_lost_it() -> None:
    existing = _existing_queue()
    existing["metadata"]["labels"][QUOTA_PARENT_LABEL] = "old-parent"
    labels = merge_queue(existing, derive_queue(elastic_quota()))["metadata"]["labels"]
    assert labels == {"owner": "ops"}


def test_merge_keeps_fields_it_does_not_own() -> None:
    merged = merge_queue(_existing_queue(), derive_queue(elastic_quota()))
    assert merged["metadata"]["resourceVersion"] == "42"
    assert merged["status"] == {"x": 1}


def test_merge_does_not_modify_its_input() -> None:
    existing = _existing_queue(spec={"priority": 1, "queuePolicy": "Round"})
    snapshot = repr(existing)
    merge_queue(existing, derive_queue(elastic_quota(annotations={"koord-queue/a": "1"})))
    assert repr(existing) == snapshot


def test_reconcile_of_an_up_to_date_queue_is_a_no_op() -> None:
    desired = derive_queue(elastic_quota(annotations={"koord-queue/a": "1"}))
    merged = merge_queue(_existing_queue(), desired)
    assert merge_queue(merged, desired) == merged
    assert not queue_needs_update(merged, desired)


def test_reconcile_detects_a_hand_edit() -> None:
    desired = derive_queue(elastic_quota())
    merged = merge_queue(_existing_queue(), desired)
    merged["spec"]["queuePolicy"] = "Round"
    assert queue_needs_update(merged, desired)


def test_desired_queue_defaults_match_the_spec() -> None:
    q = DesiredQueue(name="x")
    assert (q.namespace, q.priority, q.policy, q.parent) == ("koord-queue", 1000, "Priority", None)
