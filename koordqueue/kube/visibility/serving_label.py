"""Route the visibility Service to the leader only: a label on the pod that has rounds.

Only the leader runs admission rounds; a standby could only answer 503. The Service
(deploy/visibility.yaml) selects `koord-queue/visibility: serving`, which this process puts
on its own pod once it has published a round, and takes off at start-up (a container
restarted inside the same pod keeps its labels) and on a graceful stop. A leader that loses
its lease exits, so its pod's label goes with the restart. Outside a pod (no POD_NAME), it
does nothing.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Final

import structlog

from koordqueue.domain import names
from koordqueue.kube.api import POD, ApiError, ObjectApi
from koordqueue.kube.visibility.view import Publication

log = structlog.get_logger(__name__)

WATCH_INTERVAL: Final = 0.5
"""Seconds between looks for the first published round."""


class ServingLabel:
    def __init__(self, api: ObjectApi, pod: str, namespace: str) -> None:
        self.api, self.pod, self.namespace = api, pod, namespace
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def from_env(cls, api: ObjectApi, env: Mapping[str, str] = os.environ
                 ) -> ServingLabel | None:
        pod, namespace = env.get(names.POD_NAME_ENV), env.get(names.POD_NAMESPACE_ENV)
        return cls(api, pod, namespace) if pod and namespace else None

    def set(self, serving: bool) -> bool:
        """Put the label on (or take it off) this pod; False when the API refused."""
        value = names.VISIBILITY_SERVING if serving else None
        patch = {"metadata": {"labels": {names.VISIBILITY_SERVING_LABEL: value}}}
        try:
            self.api.merge_patch(POD, self.pod, patch, self.namespace)
        except ApiError as exc:
            log.warning("visibility serving label not written", pod=self.pod, error=str(exc))
            return False
        return True

    def serve_once_published(self, publication: Publication) -> None:
        """Off now; on (from a thread) once this process has published a round."""
        self.set(False)

        def watch() -> None:
            while not self._stop.wait(WATCH_INTERVAL):
                if publication.last() is not None and self.set(True):
                    return

        self._thread = threading.Thread(target=watch, name="kq-visibility-label", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self.set(False)
