"""Each quota's usage split written on its Queue, as Koord-Queue's queue controller does.

Koord-Queue (`elasticquotav1alpha1/controller.go`) keeps six annotations on every Queue —
`alibabacloud.com/queue-used`, `-guaranteed-used`, `-self-used`, `-self-guaranteed-used`,
`-children-used`, `-children-guaranteed-used` — JSON maps of whole units, rewritten only when
they changed (zeros ignored). Here they are written on the controller's usage cadence with a
merge patch of just the changed keys; what was last seen or written is remembered, so an
unchanged quota costs no API call. The Queues are listed once, on the first sync, so a restart
does not rewrite them all.

Each patch may take USAGE_WRITE_TIMEOUT seconds, and one that fails does not stop the others:
bench/soak.py found every Queue's annotations stale for 30 s after a half-open-connection
fault had ended, all held behind one patch that waited out the client's 30 s timeout (syncs
are single-flight: the ones due meanwhile were no-ops). The first sync's list of Queues has
the same short timeout (a new leader's list went into a half-open connection: 30 s stale).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Final

import structlog

from koordqueue.domain.quota_tree import QuotaUsage, changed_usage_annotations, queue_usage_values
from koordqueue.kube.api import QUEUE, ApiError, KubeApi, ObjectApi

log = structlog.get_logger(__name__)
USAGE_WRITE_TIMEOUT: Final = 5.0
"""Seconds one usage patch may take (the API's default is 30). Short, as a patch that fails
loses nothing: the next sync, one usage cadence later, writes the annotations again."""


class QueueUsageWriter:
    """Writes the usage annotations of every quota's Queue in `namespace` when they change."""

    def __init__(self, api: ObjectApi, namespace: str) -> None:
        self._patch_api = (
            api.with_timeout(USAGE_WRITE_TIMEOUT) if isinstance(api, KubeApi) else api
        )
        self._namespace = namespace
        self._known: dict[str, dict[str, str]] | None = None
        self._busy = threading.Lock()

    def sync(self, rows: Iterable[QuotaUsage]) -> int:
        """Patch the Queues whose usage changed; returns how many were written.

        A sync already running makes this one a no-op (the next one catches up); a Queue that
        does not exist yet is skipped (the controller creates it). A refused patch is tried
        again at the next sync; the first refusal is raised once the others were written.
        """
        if not self._busy.acquire(blocking=False):
            return 0
        started = time.monotonic()
        at = "(the list of Queues)"
        try:
            known = self._known
            if known is None:
                known = self._known = {
                    str(q["metadata"]["name"]): dict(q["metadata"].get("annotations") or {})
                    for q in self._patch_api.list_objects(QUEUE, self._namespace)
                }
            written = 0
            refused: ApiError | None = None
            for row in rows:
                if row.split is None:
                    continue
                current = known.get(row.name, {})
                changed = changed_usage_annotations(current, queue_usage_values(row.split))
                if not changed:
                    continue
                patch = {"metadata": {"annotations": changed}}
                at = row.name
                try:
                    self._patch_api.merge_patch(QUEUE, row.name, patch, self._namespace)
                except ApiError as exc:
                    if exc.not_found:
                        known.pop(row.name, None)
                    else:
                        refused = refused or exc
                    continue
                known[row.name] = {**current, **changed}
                written += 1
            if refused is not None:
                raise refused
            return written
        finally:
            took = time.monotonic() - started
            if took > USAGE_WRITE_TIMEOUT:  # every sync due meanwhile was skipped
                log.warning("queue usage sync was slow", seconds=round(took, 1), last=at)
            self._busy.release()
