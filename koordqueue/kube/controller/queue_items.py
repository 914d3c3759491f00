"""Each Queue's `status.queueItemDetails` written from the admission round's record.

The owner thread asks after each round which Queues are due (domain/queue_items.py), builds
their lists from the round's order (`pending.queue_order`, the one reader of a queue's order
in the record, by which `pending.pending_units` numbers its units too), and hands a status
merge patch to the writer for each Queue whose list differs from what the API server holds
(seen on the Queue's watch events, or last written). An unchanged Queue costs no API call, so
a thousand idle Queues cost nothing; a Queue deleted and made again is written afresh, as its
events carry its (empty) status.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import structlog

from koordqueue.domain.engine import RoundResult
from koordqueue.domain.queue_items import Details, QueueItemsSchedule, queue_item_details
from koordqueue.kube.api import QUEUE, ApiError
from koordqueue.kube.controller.writes import Apis, Priority

log = structlog.get_logger(__name__)

@dataclass(frozen=True, slots=True)
class PatchQueueItems:
    """One Queue's status.queueItemDetails (a merge patch of the status subresource); the
    details written, or None when refused (the next due refresh tries again)."""

    name: str
    namespace: str
    details: Details
    priority: ClassVar[Priority] = Priority.BACKGROUND

    def run(self, apis: Apis) -> Details | None:
        api = apis.api
        patch = {"status": {"queueItemDetails": self.details}}
        try:
            api.merge_patch(QUEUE, self.name, patch, self.namespace, subresource="status")
        except ApiError as exc:
            if not exc.not_found:
                log.warning("queue items not written", queue=self.name, error=str(exc))
            return None
        return self.details


class QueueItemsPublisher:
    """Owner-thread bookkeeping: each Queue's refresh setting and what the API holds."""

    def __init__(self, namespace: str) -> None:
        self.namespace = namespace
        self.schedule = QueueItemsSchedule()
        self._held: dict[str, Details | None] = {}
        """Queue -> its status.queueItemDetails as the API server last had it."""

    def observe(self, obj: Mapping[str, Any], deleted: bool = False) -> None:
        """A Queue watch event: its annotations (refresh setting) and its status as stored."""
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        if deleted:
            self.schedule.remove(name)
            self._held.pop(name, None)
            return
        annotations = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
        setting = self.schedule.set(name, annotations)
        if setting.error is not None:
            log.warning("queue items refresh interval ignored", queue=name, error=setting.error)
        status = obj.get("status") or {}
        held = status.get("queueItemDetails")
        self._held[name] = held if isinstance(held, dict) else None

    def plan(self, result: RoundResult, now: float) -> list[PatchQueueItems]:
        """The writes of the Queues due at `now` whose list changed (marks them done)."""
        due = self.schedule.due(now)
        if not due:
            return []
        for name in due:
            self.schedule.done(name, now)
        wanted = queue_item_details(result, due)
        return [
            PatchQueueItems(name, self.namespace, details)
            for name, details in wanted.items()
            if self._held.get(name) != details
        ]

    def taken_in(self, name: str) -> Callable[[Details | None], None]:
        """The continuation of `name`'s write (on the owner thread): what it wrote is what
        the API holds now."""

        def written(details: Details | None) -> None:
            if details is not None and name in self._held:
                self._held[name] = details

        return written
