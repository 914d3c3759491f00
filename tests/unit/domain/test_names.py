"""SPEC 2: every label, annotation, reason and message is spelled once, exactly as specified."""

from __future__ import annotations

from koordqueue.domain import names


def test_labels_and_annotation_keys_are_spelled_as_in_the_spec() -> None:
    assert names.QUOTA_NAME_LABEL == "quota.scheduling.koordinator.sh/name"
    assert names.QUOTA_PARENT_LABEL == "quota.scheduling.koordinator.sh/parent"
    assert names.QUOTA_IS_PARENT_LABEL == "quota.scheduling.koordinator.sh/is-parent"
    assert names.QUEUE_POLICY_KEY == "koord-queue/queue-policy"
    assert names.SYNCED_ANNOTATION_PREFIX == "koord-queue/"


def test_policy_annotations_are_spelled_as_in_the_spec() -> None:
    assert names.MAX_DEPTH_ANNOTATION == "koord-queue/max-depth"
    assert names.WAIT_FOR_PODS_RUNNING_ANNOTATION == "koord-queue/wait-for-pods-running"
    assert names.ENABLE_PREEMPTION_ANNOTATION == "koord-queue/enable-queueunit-preemption"
    assert names.PRIORITY_THRESHOLD_ANNOTATION == "koord-queue/priority-threshold"


def test_defaults_are_those_of_the_spec() -> None:
    assert names.ROOT_QUOTA == "koordinator-root-quota"
    assert names.QUEUE_NAMESPACE == "koord-queue"
    assert names.QUEUE_PRIORITY == 1000
    assert names.DEFAULT_POLICY == "Priority"
    assert names.DEFAULT_MAX_DEPTH == -1
    assert names.DEFAULT_PRIORITY_THRESHOLD == 4
    assert names.DEFAULT_OVERSELL_RATE == 1


def test_registered_policies_exclude_round() -> None:
    assert set(names.REGISTERED_POLICIES) == {"Priority", "Block", "Intelligent"}
    assert "Round" in names.KNOWN_POLICIES and "Round" not in names.REGISTERED_POLICIES


def test_event_reasons_are_spelled_as_in_the_spec() -> None:
    assert names.REASON_QUEUE_NOT_FOUND == "QueueNotFound"
    assert names.REASON_ADD_QUEUE_FAIL == "AddQueueFail"
    assert names.REASON_FAILED_SCHEDULING == "FailedScheduling"


def test_queue_not_found_message_is_exact() -> None:
    rendered = names.MSG_QUEUE_NOT_FOUND.format(queue="team-a", namespace="ns", name="job-1")
    assert rendered == "queue team-a not found for queueUnit ns/job-1"


def test_rejection_message_formats_are_exact() -> None:
    assert (
        names.MSG_LIMITED.format(quota="q", resource="cpu")
        == "limited quotaName:q, limited resKey:cpu,"
    )
    assert names.MSG_CYCLE.format(unit="u", quota="q", visited="a,b") == (
        "CheckUsage found cycle reference, item:u, quotaName:q, visited quota: a,b"
    )
    assert names.MSG_QUOTA_MISSING.format(unit="u", quota="q", visited="a,b") == (
        "CheckUsage found quota not exist, item:u, quotaName:q, visited quota: a,b"
    )
    assert names.MSG_EMPTY_QUOTA_SPEC.format(quota="q") == (
        "limited quotaName:q, quota spec is empty but queue unit res is not empty"
    )
    assert names.MSG_ALREADY_RESERVED.format(unit="u", quota="q", reserved="p") == (
        "reserve item failed, itemName:u, quotaName:q, already reserved in another quota p"
    )
