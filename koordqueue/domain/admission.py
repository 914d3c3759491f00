"""CheckUsage outcomes (SPEC 2.5) as data.

Each rejection carries the unit, the quota that decided and the visited path, and renders the
exact event message from `names`; the controller never formats these strings itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordqueue.domain.names import (
    MSG_ADMITTED,
    MSG_ALREADY_RESERVED,
    MSG_CYCLE,
    MSG_EMPTY_QUOTA_SPEC,
    MSG_LIMITED,
    MSG_QUOTA_MISSING,
    MSG_RESERVE_QUOTA_MISSING,
)


@dataclass(frozen=True, slots=True)
class Admitted:
    """The unit fits every quota from its own up to (not including) the root."""

    unit: str
    quota: str
    path: tuple[str, ...]
    admitted: bool = True

    @property
    def message(self) -> str:
        return MSG_ADMITTED.format(quota=self.quota, path=",".join(self.path))


@dataclass(frozen=True, slots=True)
class QuotaExceeded:
    """`max × oversellrate − used < request` for `resource` at `quota` (maybe an ancestor)."""

    unit: str
    quota: str
    resource: str
    path: tuple[str, ...]
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_LIMITED.format(quota=self.quota, resource=self.resource)


@dataclass(frozen=True, slots=True)
class EmptyQuotaSpec:
    """`quota` on the path has an empty max while the unit requests something."""

    unit: str
    quota: str
    path: tuple[str, ...]
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_EMPTY_QUOTA_SPEC.format(quota=self.quota)


@dataclass(frozen=True, slots=True)
class QuotaCycle:
    """The parent chain from the unit's quota revisits `quota` after `visited`."""

    unit: str
    quota: str
    visited: tuple[str, ...]
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_CYCLE.format(unit=self.unit, quota=self.quota, visited=",".join(self.visited))


@dataclass(frozen=True, slots=True)
class QuotaMissing:
    """The parent chain reaches `quota`, which does not exist; `visited` ends with it.

    As in Koord-Queue's cache, the missing quota is part of the visited path, and every
    existing quota before it has already passed its usage check.
    """

    unit: str
    quota: str
    visited: tuple[str, ...]
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_QUOTA_MISSING.format(
            unit=self.unit, quota=self.quota, visited=",".join(self.visited)
        )


@dataclass(frozen=True, slots=True)
class AlreadyReserved:
    """The unit's UID already holds an admission in `reserved`, another quota than `quota`.

    Koord-Queue's Reserve refuses this; reserving again into the same quota is a no-op
    (`Admitted`), so callers can tell the two apart.
    """

    unit: str
    quota: str
    reserved: str
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_ALREADY_RESERVED.format(unit=self.unit, quota=self.quota, reserved=self.reserved)


@dataclass(frozen=True, slots=True)
class ReserveQuotaMissing:
    """A reservation (Koord-Queue's Reserve, `QuotaTree.admit`) into `quota`, which does not
    exist: refused and nothing recorded. (CheckUsage reports a missing quota as
    `QuotaMissing`; Reserve checks only the unit's own quota.)"""

    unit: str
    quota: str
    admitted: bool = False

    @property
    def message(self) -> str:
        return MSG_RESERVE_QUOTA_MISSING.format(unit=self.unit, quota=self.quota)


Rejection = (
    QuotaExceeded
    | EmptyQuotaSpec
    | QuotaCycle
    | QuotaMissing
    | AlreadyReserved
    | ReserveQuotaMissing
)
Decision = Admitted | Rejection


class AdmissionRejected(Exception):
    """Raised by callers that prefer exceptions; carries the rejection data."""

    def __init__(self, rejection: Rejection) -> None:
        self.rejection = rejection
        super().__init__(rejection.message)
