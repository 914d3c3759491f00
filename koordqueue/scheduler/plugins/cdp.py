"""cdp: Volcano's cool-down protection (its plugin of that name).

A running pod with a `volcano.sh/cooldown-time` label or annotation (a Go duration; the
label wins; one that does not parse means no protection) may not be preempted or reclaimed
until that long after its PodScheduled condition turned True. Every other candidate stays a
victim. The clock is `CdpPlugin.clock` (wall time; tests set their own).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import ClassVar

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.api import vc_names as vn
from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.session import Session


def cooldown_time(labels: Mapping[str, str], annotations: Mapping[str, str]) -> float | None:
    """Volcano's podCooldownTime: seconds of the label, else the annotation; None when
    neither is set or the value does not parse."""
    value = labels.get(vn.COOLDOWN_TIME)
    if value is None:
        value = annotations.get(vn.COOLDOWN_TIME)
    if value is None:
        return None
    try:
        return parse_go_duration(value)
    except ValueError:
        return None


def protected(task: TaskInfo, now: float) -> bool:
    """A running pod still inside its cool-down after being scheduled."""
    if task.status is not TaskStatus.RUNNING or task.scheduled_at is None or not task.vc:
        return False
    cooldown = cooldown_time(task.vc, task.vc)
    return cooldown is not None and task.scheduled_at + cooldown > now


class CdpPlugin(Plugin):
    """Keeps pods in their cool-down out of preempt's and reclaim's victims."""

    name = vn.CDP
    quiet = True
    clock: ClassVar[Callable[[], float]] = time.time

    def on_session_open(self, session: Session) -> None:
        now = type(self).clock()

        def victims(_preemptor: TaskInfo, candidates: list[TaskInfo]) -> list[TaskInfo]:
            return [c for c in candidates if not protected(c, now)]

        session.add_preemptable_fn(self.name, victims)
        session.add_reclaimable_fn(self.name, victims)
