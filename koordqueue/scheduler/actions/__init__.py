"""Built-in actions: enqueue, allocate, backfill, preempt, reclaim."""

from koordqueue.scheduler.actions.allocate import AllocateAction
from koordqueue.scheduler.actions.backfill import BackfillAction
from koordqueue.scheduler.actions.enqueue import EnqueueAction
from koordqueue.scheduler.actions.preempt import PreemptAction
from koordqueue.scheduler.actions.reclaim import ReclaimAction
from koordqueue.scheduler.framework.interface import Action

BUILTIN_ACTIONS: tuple[Action, ...] = (
    EnqueueAction(),
    AllocateAction(),
    BackfillAction(),
    PreemptAction(),
    ReclaimAction(),
)

__all__ = [
    "BUILTIN_ACTIONS",
    "AllocateAction",
    "BackfillAction",
    "EnqueueAction",
    "PreemptAction",
    "ReclaimAction",
]
