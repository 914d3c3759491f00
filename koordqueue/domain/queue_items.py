"""A Queue's published order (`status.queueItemDetails`), and when each Queue publishes it.

Koord-Queue's queue controller refreshes, per Queue, a map from queue kind to the ordered
list of its waiting units (name, namespace, priority, 1-based position), every 15 s unless the
Queue's `koord-queue/queue-items-refresh-interval` (a Go duration) says otherwise; the presence
of `koord-queue/disable-show-queue-items` stops the refresh and leaves the last value in place.
Every policy publishes one kind, `active`.

The order is the admission round's (`pending.queue_order`, which `pending.pending_units`
numbers its units by): nothing here sorts units. Units
no round offers (backing off, queue not served) are not listed, as Koord-Queue lists only
what its queue holds in order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from koordqueue.domain.names import (
    DEFAULT_QUEUE_ITEMS_REFRESH_SECONDS,
    DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION,
    QUEUE_ITEMS_KIND_ACTIVE,
    QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION,
)
from koordqueue.domain.pending import queue_order
from koordqueue.domain.queue_unit import QueueUnit
from koordqueue.domain.round import RoundResult

_GO_UNITS: Final = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0,
}
_GO_PART: Final = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")

Details = dict[str, list[dict[str, Any]]]
"""status.queueItemDetails: queue kind -> ordered items (JSON as the API stores it)."""


def parse_go_duration(text: str) -> float:
    """Seconds of a Go `time.ParseDuration` string ("30s", "1m30s", "1.5h", "0");
    ValueError naming the text otherwise."""
    raw = text.strip()
    body = raw.lstrip("+-")
    sign = -1.0 if raw.startswith("-") else 1.0
    if body == "0":
        return 0.0
    seconds = 0.0
    at = 0
    while at < len(body):
        match = _GO_PART.match(body, at)
        if match is None:
            raise ValueError(f"time: invalid duration {text!r}")
        seconds += float(match.group(1)) * _GO_UNITS[match.group(2)]
        at = match.end()
    if not body:
        raise ValueError(f"time: invalid duration {text!r}")
    return sign * seconds


@dataclass(frozen=True, slots=True)
class RefreshSetting:
    """How one Queue publishes: `disabled`, else every `interval` seconds; `error` says why
    an interval annotation was not taken (the default is used then)."""

    interval: float = DEFAULT_QUEUE_ITEMS_REFRESH_SECONDS
    disabled: bool = False
    error: str | None = None


def refresh_setting(annotations: Mapping[str, str]) -> RefreshSetting:
    """The Queue's publishing from its annotations (presence of the disable key is enough)."""
    if DISABLE_SHOW_QUEUE_ITEMS_ANNOTATION in annotations:
        return RefreshSetting(disabled=True)
    raw = annotations.get(QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION)
    if raw is None:
        return RefreshSetting()
    try:
        seconds = parse_go_duration(raw)
    except ValueError as exc:
        return RefreshSetting(error=f"{QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION}: {exc}")
    if seconds <= 0:
        return RefreshSetting(
            error=f"{QUEUE_ITEMS_REFRESH_INTERVAL_ANNOTATION}: must be > 0, got {raw!r}"
        )
    return RefreshSetting(interval=seconds)


def item_detail(unit: QueueUnit, position: int) -> dict[str, Any]:
    """One item as Koord-Queue's QueueItemDetail serialises (priority 0 omitted)."""
    item: dict[str, Any] = {"name": unit.name, "namespace": unit.namespace}
    if unit.priority:
        item["priority"] = unit.priority
    item["position"] = position
    return item


def queue_item_details(result: RoundResult, queues: Iterable[str]) -> dict[str, Details]:
    """queue -> its status.queueItemDetails, for each of `queues` (an empty list when none
    wait), positions as the round's record has them (`pending.queue_order`)."""
    return {
        name: {
            QUEUE_ITEMS_KIND_ACTIVE: [
                item_detail(unit, position) for position, unit in queue_order(result, name)
            ]
        }
        for name in queues
    }


@dataclass(slots=True)
class _Schedule:
    setting: RefreshSetting
    next_at: float


@dataclass(slots=True)
class QueueItemsSchedule:
    """Which Queues publish now: each on its own interval, at once when its setting changes
    (Koord-Queue restarts the Queue's ticker, which fires at once, on a new interval)."""

    _queues: dict[str, _Schedule] = field(default_factory=dict)

    def set(self, queue: str, annotations: Mapping[str, str]) -> RefreshSetting:
        setting = refresh_setting(annotations)
        known = self._queues.get(queue)
        if known is None or known.setting != setting:
            self._queues[queue] = _Schedule(setting, float("-inf"))
        return setting

    def remove(self, queue: str) -> None:
        self._queues.pop(queue, None)

    def due(self, now: float) -> list[str]:
        """The Queues whose refresh is due at `now` (disabled ones never)."""
        return [
            name
            for name, sched in self._queues.items()
            if not sched.setting.disabled and sched.next_at <= now
        ]

    def done(self, queue: str, now: float) -> None:
        """`queue` published at `now`: next at now + its interval."""
        sched = self._queues.get(queue)
        if sched is not None:
            sched.next_at = now + sched.setting.interval
