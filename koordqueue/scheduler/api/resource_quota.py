"""A namespace's ResourceQuota as the resourcequota plugin reads it: `status.hard` and
`status.used` (what the API server's quota controller writes), as Volcano's cache keeps
them (NamespaceInfo.QuotaStatus)."""

from __future__ import annotations

from dataclasses import dataclass, field

from koordqueue.domain.resources import Resources


@dataclass(frozen=True, slots=True)
class ResourceQuotaStatus:
    """One ResourceQuota: its namespace and name, and its status's hard and used."""

    namespace: str
    name: str
    hard: Resources = field(default_factory=Resources)
    used: Resources = field(default_factory=Resources)
