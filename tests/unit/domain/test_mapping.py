"""SPEC 2.1 resolution: a unit's quota and queue are its quota-name label, nothing else."""

from __future__ import annotations

import pytest

from koordqueue.domain import (
    QuotaName,
    Unresolved,
    UnresolvedReason,
    queue_name_for,
    quota_name_for,
)
from koordqueue.domain.names import MSG_NO_QUOTA_LABEL, QUOTA_NAME_LABEL


def test_unit_with_quota_label_resolves_to_that_quota() -> None:
    assert quota_name_for({QUOTA_NAME_LABEL: "team-a"}) == QuotaName("team-a")


def test_queue_name_is_the_same_string_as_the_quota_name() -> None:
    labels = {QUOTA_NAME_LABEL: "team-a"}
    assert queue_name_for(labels) == quota_name_for(labels) == QuotaName("team-a")


def test_unit_without_quota_label_resolves_to_nothing() -> None:
    assert quota_name_for({"app": "x"}) == Unresolved(UnresolvedReason.NO_LABEL)


@pytest.mark.parametrize("labels", [None, {}])
def test_unit_without_any_labels_resolves_to_nothing(labels: dict[str, str] | None) -> None:
    assert quota_name_for(labels) == Unresolved(UnresolvedReason.NO_LABEL)


def test_there_is_no_namespace_fallback() -> None:
    # A label naming the namespace is not the quota label; the namespace is never used.
    result = quota_name_for({"namespace": "team-a", "kubernetes.io/metadata.name": "team-a"})
    assert isinstance(result, Unresolved)


def test_missing_label_status_message_says_no_quota_label() -> None:
    message = quota_name_for({}).message  # type: ignore[union-attr]
    assert message == MSG_NO_QUOTA_LABEL
    assert "no quota label" in message
    assert QUOTA_NAME_LABEL in message


def test_no_label_is_distinguishable_from_a_name() -> None:
    assert not isinstance(quota_name_for({}), QuotaName)
    assert isinstance(quota_name_for({QUOTA_NAME_LABEL: "a"}), QuotaName)


def test_empty_label_value_is_unresolved_not_a_quota_named_empty() -> None:
    assert quota_name_for({QUOTA_NAME_LABEL: ""}) == Unresolved(UnresolvedReason.EMPTY, "")


@pytest.mark.parametrize("value", [5, None, True, ["team-a"], {"name": "team-a"}, b"team-a"])
def test_non_string_label_value_is_unresolved_and_reports_the_value(value: object) -> None:
    result = quota_name_for({QUOTA_NAME_LABEL: value})
    assert isinstance(result, Unresolved)
    assert result.reason is UnresolvedReason.NOT_A_STRING
    assert result.value == value
    assert QUOTA_NAME_LABEL in result.message and repr(value) in result.message


@pytest.mark.parametrize(
    "value", ["team a", "-team", "team-", "a" * 64, "team/a", "team-a\n", "\nteam-a", "tëam"]
)
def test_label_value_that_is_not_a_valid_name_is_unresolved(value: str) -> None:
    result = quota_name_for({QUOTA_NAME_LABEL: value})
    assert result == Unresolved(UnresolvedReason.INVALID, value)


@pytest.mark.parametrize("value", ["a", "team-a", "Team_A.1", "a" * 63])
def test_any_valid_label_value_is_a_quota_name(value: str) -> None:
    assert quota_name_for({QUOTA_NAME_LABEL: value}) == QuotaName(value)
