"""Pure domain model and algorithms: no I/O, no Kubernetes client; plain data in and out."""

from koordqueue.domain.admission import (
    AdmissionRejected,
    Admitted,
    Decision,
    EmptyQuotaSpec,
    QuotaCycle,
    QuotaExceeded,
    QuotaMissing,
    Rejection,
)
from koordqueue.domain.mapping import (
    QuotaName,
    Unresolved,
    UnresolvedReason,
    queue_name_for,
    quota_name_for,
)
from koordqueue.domain.quantity import InvalidQuantityError, format_nanos, parse_quantity
from koordqueue.domain.queue_derivation import DesiredQueue, derive_queue, merge_queue
from koordqueue.domain.quota import InvalidQuotaError, QuotaSpec, quota_from_object
from koordqueue.domain.quota_tree import QuotaTree, QuotaUsage
from koordqueue.domain.resources import Missing, Resources

__all__ = [
    "AdmissionRejected",
    "Admitted",
    "Decision",
    "DesiredQueue",
    "EmptyQuotaSpec",
    "InvalidQuantityError",
    "InvalidQuotaError",
    "Missing",
    "QuotaCycle",
    "QuotaExceeded",
    "QuotaMissing",
    "QuotaName",
    "QuotaSpec",
    "QuotaTree",
    "QuotaUsage",
    "Rejection",
    "Resources",
    "Unresolved",
    "UnresolvedReason",
    "derive_queue",
    "format_nanos",
    "merge_queue",
    "parse_quantity",
    "queue_name_for",
    "quota_from_object",
    "quota_name_for",
]
