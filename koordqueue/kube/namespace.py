"""The controller's namespace exists before anything is written there (issue 33 part 3).

The Queues (one per quota) and the Lease live in `--namespace` (default `koord-queue`). When it
did not exist, `koordqueue run` said "ready" and every unit then showed QueueNotFound, with
nothing saying why. At start-up the namespace is created when it is missing and this process
may create it; otherwise start-up fails with one line naming it.
"""

from __future__ import annotations

from typing import Final

import structlog

from koordqueue.kube.api import NAMESPACE, ApiError, ObjectApi, with_retries
from koordqueue.kube.queue_sync import MANAGED_BY, MANAGED_BY_LABEL

log = structlog.get_logger(__name__)

MSG_NAMESPACE_MISSING: Final = (
    "namespace {namespace} does not exist and could not be created ({reason}); the "
    "controller keeps its Queues and its Lease there: create it (kubectl create namespace "
    "{namespace}) or pass --namespace with one that exists"
)
MSG_NAMESPACE_ABSENT: Final = (
    "namespace {namespace}, where the controller keeps the Queues, does not exist: the "
    "controller creates it at start-up when allowed (kubectl create namespace {namespace})"
)
"""What explain says when it finds the namespace missing."""


class NamespaceMissingError(RuntimeError):
    """The controller's namespace does not exist and this process may not create it."""

    def __init__(self, namespace: str, reason: str) -> None:
        self.namespace = namespace
        self.reason = reason
        super().__init__(MSG_NAMESPACE_MISSING.format(namespace=namespace, reason=reason))


def ensure_namespace(api: ObjectApi, namespace: str) -> bool:
    """Create `namespace` when it is missing; True when this call created it.

    A namespace we may not read is taken as existing (a log line says so): start-up is not
    refused on a guess. Transient API errors are retried a few times, then raised.
    """
    try:
        if with_retries(lambda: api.get(NAMESPACE, namespace), retry_conflicts=False):
            return False
    except ApiError as exc:
        if exc.status != 403:
            raise
        log.warning(
            "may not read the controller's namespace; assuming it exists",
            namespace=namespace,
            error=str(exc),
        )
        return False
    body = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {MANAGED_BY_LABEL: MANAGED_BY}},
    }
    try:
        with_retries(lambda: api.create(NAMESPACE, body), retry_conflicts=False)
    except ApiError as exc:
        if exc.conflict:
            return False  # another replica made it meanwhile
        reason = f"{exc.status} {exc.reason}" if exc.status else str(exc)
        raise NamespaceMissingError(namespace, reason) from exc
    log.info("created the controller's namespace", namespace=namespace)
    return True
