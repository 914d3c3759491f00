"""QueueUnit -> quota/queue resolution (SPEC 2.1).

The result is a small sum type so callers cannot confuse "this unit has no quota label"
(silently pending upstream; we make it visible) with "this unit names quota X" (which may or
may not exist yet) or "the label is there but unusable".
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import Final

from koordqueue.domain.names import MSG_NO_QUOTA_LABEL, QUOTA_NAME_LABEL

# Label values: at most 63 chars of [A-Za-z0-9._-], starting and ending alphanumeric.
_LABEL_VALUE_RE: Final = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]{0,61}[A-Za-z0-9])?)$")


class UnresolvedReason(Enum):
    """Why a unit has no quota."""

    NO_LABEL = "no quota label"
    EMPTY = "empty quota label"
    NOT_A_STRING = "quota label is not a string"
    INVALID = "quota label is not a valid name"


@dataclass(frozen=True, slots=True)
class QuotaName:
    """The unit names a quota (whether it exists is the quota tree's business)."""

    name: str


@dataclass(frozen=True, slots=True)
class Unresolved:
    """The unit names no usable quota; it is never admitted."""

    reason: UnresolvedReason
    value: object = None

    @property
    def message(self) -> str:
        """Status message for the unit, so the misconfiguration is visible."""
        if self.reason is UnresolvedReason.NO_LABEL:
            return MSG_NO_QUOTA_LABEL
        return f"{self.reason.value}: {QUOTA_NAME_LABEL}={self.value!r}"


Resolution = QuotaName | Unresolved


def quota_name_for(labels: Mapping[str, object] | None) -> Resolution:
    """The quota a unit counts against: the value of its quota-name label, nothing else."""
    if not labels or QUOTA_NAME_LABEL not in labels:
        return Unresolved(UnresolvedReason.NO_LABEL)
    value = labels[QUOTA_NAME_LABEL]
    if not isinstance(value, str):
        return Unresolved(UnresolvedReason.NOT_A_STRING, value)
    return _resolve_label_value(value)


@lru_cache(maxsize=8192)
def _resolve_label_value(value: str) -> Resolution:
    # cached: every admission round and metrics export resolves every unit's label, and a
    # cluster has few distinct quota names; the results are immutable, so sharing is safe
    if value == "":
        return Unresolved(UnresolvedReason.EMPTY, value)
    if not _LABEL_VALUE_RE.fullmatch(value):  # match() + $ accepted a trailing newline
        return Unresolved(UnresolvedReason.INVALID, value)
    return QuotaName(value)


def queue_name_for(labels: Mapping[str, object] | None) -> Resolution:
    """The queue a unit waits in: the same string as its quota (no namespace fallback)."""
    return quota_name_for(labels)
