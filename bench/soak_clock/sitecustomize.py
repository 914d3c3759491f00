"""A wall-clock step for one soak replica (bench/soak.py's clock-step fault).

On the replicas' PYTHONPATH, so Python imports it at start-up. When
$KOORDQUEUE_SOAK_CLOCK_FILE names a file, a thread reads it every 0.2 s (a number of seconds,
possibly negative) and from then on `time.time()` and `time.time_ns()` (log, Event and status
timestamps) and the leader election's `datetime.now()` (the Lease's acquire and renew times)
are that much ahead. The monotonic clock is left alone, as a real step of the system clock
(NTP, a VM resumed) leaves CLOCK_MONOTONIC alone. Stepping the system clock itself would need
root and would move the API server's and etcd's clocks too. `datetime` is replaced only in
koordqueue.kube.leader's namespace (a subclass everywhere would fail other libraries'
isinstance checks of datetimes they make themselves).
"""

from __future__ import annotations

import datetime as _dt
import os
import threading
import time

_PATH = os.environ.get("KOORDQUEUE_SOAK_CLOCK_FILE")

if _PATH:
    _offset = [0.0]
    _real_time, _real_time_ns = time.time, time.time_ns

    def _poll() -> None:
        import sys

        while True:
            leader = sys.modules.get("koordqueue.kube.leader")
            if leader is not None and getattr(leader, "datetime", None) is not _SteppedDatetime:
                leader.datetime = _SteppedDatetime  # type: ignore[attr-defined]
            try:
                with open(_PATH) as f:  # (the path checked non-empty above)
                    _offset[0] = float(f.read().strip() or 0)
            except (OSError, ValueError):
                pass
            time.sleep(0.2)

    def _time() -> float:
        return _real_time() + _offset[0]

    def _time_ns() -> int:
        return _real_time_ns() + int(_offset[0] * 1e9)

    class _SteppedDatetime(_dt.datetime):
        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]
            return super().now(tz) + _dt.timedelta(seconds=_offset[0])

        @classmethod
        def utcnow(cls) -> _dt.datetime:  # type: ignore[override]
            return super().utcnow() + _dt.timedelta(seconds=_offset[0])

    time.time = _time
    time.time_ns = _time_ns
    threading.Thread(target=_poll, name="soak-clock", daemon=True).start()
