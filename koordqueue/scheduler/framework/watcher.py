"""Hot reload of the configuration file (SPEC 3.2) by polling its mtime and content hash.

Polling rather than inotify: it works on ConfigMap volumes (atomic symlink swaps), needs no
thread, and the adapter already wakes every schedule period.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import structlog

from koordqueue.scheduler.framework.config import (
    ConfigError,
    SchedulerConfig,
    default_config,
    parse_config,
)

_log = structlog.get_logger(__name__)


class ConfigWatcher:
    """Keeps the last good configuration of a file; `poll()` picks up changes.

    A file that fails to parse keeps the previous configuration and sets `last_error` (and
    logs it once per distinct content), so a typo never stops the scheduler. If the very
    first load fails the default configuration is used.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        on_change: Callable[[SchedulerConfig], None] | None = None,
        on_error: Callable[[ConfigError], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self._on_change = on_change
        self._on_error = on_error
        self._stamp: tuple[int, int] | None = None
        self._digest: str | None = None
        self.current: SchedulerConfig = default_config()
        self.last_error: ConfigError | None = None
        self.generation = 0
        self.poll()

    def _stat(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size)

    def poll(self) -> bool:
        """Reload when the file changed; True when a new configuration was installed."""
        stamp = self._stat()
        if stamp is not None and stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            self._fail(
                ConfigError(str(self.path), f"cannot read: {exc.strerror or exc}"), "missing"
            )
            return False
        digest = hashlib.sha256(data).hexdigest()
        if digest == self._digest:
            # Same content as the configuration in force (e.g. a bad edit was reverted).
            self.last_error = None
            return False
        try:
            config = parse_config(data.decode("utf-8", errors="replace"), str(self.path))
        except ConfigError as exc:
            self._fail(exc, digest)
            return False
        self._digest = digest
        self.current = config
        self.last_error = None
        self.generation += 1
        _log.info("scheduler configuration loaded", path=str(self.path), generation=self.generation)
        if self._on_change is not None:
            self._on_change(config)
        return True

    def _fail(self, error: ConfigError, key: str) -> None:
        repeated = self.last_error is not None and str(self.last_error) == str(error)
        self.last_error = error
        if not repeated:
            _log.error(
                "scheduler configuration rejected; keeping the previous one",
                error=str(error),
                key=key,
            )
            if self._on_error is not None:
                self._on_error(error)
