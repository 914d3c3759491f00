"""SPEC 2.5 parent resolution and ElasticQuota parsing: bad quotas give typed field errors."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.domain import InvalidQuotaError, QuotaSpec, Resources, quota_from_object
from koordqueue.domain.names import QUOTA_IS_PARENT_LABEL, QUOTA_PARENT_LABEL, ROOT_QUOTA

from .helpers import elastic_quota, res


def test_quota_object_is_parsed_into_name_namespace_min_and_max() -> None:
    spec = quota_from_object(elastic_quota("team-a", namespace="ns"))
    assert (spec.name, spec.namespace) == ("team-a", "ns")
    assert spec.max == res(cpu="10", memory="20Gi")
    assert spec.min == res(cpu="1")


def test_parent_label_names_the_parent_quota() -> None:
    assert quota_from_object(elastic_quota(labels={QUOTA_PARENT_LABEL: "org"})).parent == "org"


def test_missing_parent_label_means_root() -> None:
    assert quota_from_object(elastic_quota()).parent == ROOT_QUOTA == "koordinator-root-quota"


def test_empty_parent_label_means_root() -> None:
    assert quota_from_object(elastic_quota(labels={QUOTA_PARENT_LABEL: ""})).parent == ROOT_QUOTA


def test_self_parent_is_accepted_here_and_reported_as_a_cycle_by_the_tree() -> None:
    assert quota_from_object(elastic_quota("a", labels={QUOTA_PARENT_LABEL: "a"})).parent == "a"


def test_is_parent_label_true_marks_an_inner_node() -> None:
    assert quota_from_object(elastic_quota(labels={QUOTA_IS_PARENT_LABEL: "true"})).is_parent
    assert not quota_from_object(elastic_quota(labels={QUOTA_IS_PARENT_LABEL: "yes"})).is_parent


def test_quota_without_max_has_an_empty_max() -> None:
    assert quota_from_object(elastic_quota(spec={})).max.is_empty()


@pytest.mark.parametrize("value", [5, True, ["org"], {"name": "org"}])
def test_non_string_parent_label_is_an_invalid_quota_naming_the_label(value: object) -> None:
    with pytest.raises(InvalidQuotaError) as info:
        quota_from_object(elastic_quota("a", labels={QUOTA_PARENT_LABEL: value}))
    assert info.value.name == "a"
    assert QUOTA_PARENT_LABEL in info.value.field


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"max": {"cpu": "12xyz"}}, "spec.max.cpu"),
        ({"max": {"memory": "1.2.3"}}, "spec.max.memory"),
        ({"max": {"nvidia.com/gpu": True}}, "spec.max.nvidia.com/gpu"),
        ({"min": {"cpu": " 1"}}, "spec.min.cpu"),
        ({"max": {"cpu": "-1"}}, "spec.max.cpu"),
        ({"max": {"cpu": "1e999"}}, "spec.max.cpu"),
        ({"max": {"cpu": None}}, "spec.max.cpu"),
        ({"max": ["cpu", "1"]}, "spec.max"),
        ({"max": "cpu=1"}, "spec.max"),
    ],
)
def test_bad_quantity_in_quota_is_an_invalid_quota_naming_the_field(
    spec: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidQuotaError) as info:
        quota_from_object(elastic_quota("a", spec=spec))
    assert info.value.field == field
    assert field in str(info.value)
    assert "ElasticQuota a" in str(info.value)


@pytest.mark.parametrize(
    ("obj", "field"),
    [
        ({}, "metadata"),
        ({"metadata": None}, "metadata"),
        ({"metadata": {}}, "metadata.name"),
        ({"metadata": {"name": ""}}, "metadata.name"),
        ({"metadata": {"name": 7}}, "metadata.name"),
        ({"metadata": {"name": "a", "labels": ["x"]}}, "metadata.labels"),
        ({"metadata": {"name": "a"}, "spec": ["max"]}, "spec"),
    ],
)
def test_malformed_quota_object_is_an_invalid_quota_naming_the_field(
    obj: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidQuotaError) as info:
        quota_from_object(obj)
    assert info.value.field == field


@pytest.mark.parametrize("obj", [None, [], "team-a", 3])
def test_quota_object_that_is_not_a_map_is_an_invalid_quota(obj: Any) -> None:
    with pytest.raises(InvalidQuotaError):
        quota_from_object(obj)


@pytest.mark.parametrize("name", ["", None, 3])
def test_quota_spec_with_empty_name_is_rejected(name: Any) -> None:
    with pytest.raises(InvalidQuotaError) as info:
        QuotaSpec(name=name)
    assert info.value.field == "metadata.name"


@pytest.mark.parametrize("parent", ["", None])
def test_quota_spec_with_empty_parent_is_rejected(parent: Any) -> None:
    with pytest.raises(InvalidQuotaError):
        QuotaSpec(name="a", parent=parent)


def test_quota_spec_defaults_to_root_parent_and_empty_limits() -> None:
    q = QuotaSpec(name="a")
    assert q.parent == ROOT_QUOTA
    assert q.max == Resources() and q.min == Resources()
