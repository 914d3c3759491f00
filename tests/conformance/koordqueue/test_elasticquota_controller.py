"""Koord-Queue `controller_test.go` (pkg/framework/plugins/elasticquotav1alpha1): the usage
annotations the queue controller keeps on each quota's Queue.

`updateQueueAnnotation` is `render_usage`; `isQueueAnnotationDiff` and
`updateQueueStatusIfChanged` are `changed_usage_annotations` (it returns the annotations to
write: none when nothing changed, which upstream reports as a nil Queue).
"""

from __future__ import annotations

import json

from koordqueue.domain.names import (
    QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION,
    QUEUE_CHILDREN_USED_ANNOTATION,
    QUEUE_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_USED_ANNOTATION,
    QUEUE_USED_ANNOTATION,
)
from koordqueue.domain.quota_tree import changed_usage_annotations, render_usage

KEYS = (
    QUEUE_USED_ANNOTATION,
    QUEUE_GUARANTEED_USED_ANNOTATION,
    QUEUE_SELF_USED_ANNOTATION,
    QUEUE_SELF_GUARANTEED_USED_ANNOTATION,
    QUEUE_CHILDREN_USED_ANNOTATION,
    QUEUE_CHILDREN_GUARANTEED_USED_ANNOTATION,
)


def _summary(*cpus: int) -> dict[str, dict[str, int]]:
    """Used, GuaranteedUsed, SelfUsed, SelfGuaranteedUsed, ChildrenUsed, ChildrenGuaranteedUsed
    with the given cpu each and memory 50, as the Go test's ElasticQuotaDebugInfo."""
    return {key: {"cpu": cpu, "memory": 50} for key, cpu in zip(KEYS, cpus, strict=True)}


def _rendered(*cpus: int) -> dict[str, str]:
    pairs = zip(KEYS, cpus, strict=True)
    return {key: json.dumps({"cpu": cpu, "memory": 50}) for key, cpu in pairs}


def test_update_queue_annotation_renders_go_json() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_updateQueueAnnotation "normal"."""
    assert render_usage({"cpu": 1, "memory": 2}) == '{"cpu":1,"memory":2}'


def test_is_queue_annotation_diff_ignores_zero_entries() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_isQueueAnnotationDiff "not diff":
    {"cpu":1,"memory":2} against cpu 1, memory 2, gpu 0."""
    current = {"k": '{"cpu":1,"memory":2}'}
    assert changed_usage_annotations(current, {"k": {"cpu": 1, "memory": 2, "gpu": 0}}) == {}


def test_is_queue_annotation_diff_sees_a_new_resource() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_isQueueAnnotationDiff "diff":
    {"cpu":1,"memory":2} against cpu 1, memory 2, gpu 2, tt 0."""
    current = {"k": '{"cpu":1,"memory":2}'}
    changed = changed_usage_annotations(current, {"k": {"cpu": 1, "memory": 2, "gpu": 2, "tt": 0}})
    assert list(changed) == ["k"]
    assert json.loads(changed["k"]) == {"cpu": 1, "memory": 2, "gpu": 2, "tt": 0}


def test_update_queue_status_full_sync() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_updateQueueStatusIfChanged
    "full sync": a Queue without annotations gets all six."""
    changed = changed_usage_annotations({}, _summary(1, 2, 3, 4, 5, 6))
    assert {k: json.loads(v) for k, v in changed.items()} == {
        k: json.loads(v) for k, v in _rendered(1, 2, 3, 4, 5, 6).items()
    }


def test_update_queue_status_diff_sync() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_updateQueueStatusIfChanged
    "diff sync": used, self-used and children-used change (cpu 100, 300, 500), the
    guaranteed ones do not."""
    changed = changed_usage_annotations(
        _rendered(1, 2, 3, 4, 5, 6), _summary(100, 2, 300, 4, 500, 6)
    )
    assert {k: json.loads(v) for k, v in changed.items()} == {
        QUEUE_USED_ANNOTATION: {"cpu": 100, "memory": 50},
        QUEUE_SELF_USED_ANNOTATION: {"cpu": 300, "memory": 50},
        QUEUE_CHILDREN_USED_ANNOTATION: {"cpu": 500, "memory": 50},
    }


def test_update_queue_status_no_sync() -> None:
    """koordinator-sh/koord-queue controller_test.go Test_updateQueueStatusIfChanged
    "no sync": nothing changed, nothing to write."""
    assert changed_usage_annotations(_rendered(1, 2, 3, 4, 5, 6), _summary(1, 2, 3, 4, 5, 6)) == {}
