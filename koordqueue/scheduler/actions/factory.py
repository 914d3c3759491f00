"""Registers the built-in actions with the framework (Volcano's actions/factory.go).

The `koordqueue.scheduler` package calls `register_builtin_actions` once when imported, so
that the framework itself imports no action.
"""

from __future__ import annotations

from koordqueue.scheduler.actions.allocate import AllocateAction
from koordqueue.scheduler.actions.backfill import BackfillAction
from koordqueue.scheduler.actions.enqueue import EnqueueAction
from koordqueue.scheduler.actions.gang_actions import GangPreemptAction, GangReclaimAction
from koordqueue.scheduler.actions.preempt import PreemptAction
from koordqueue.scheduler.actions.reclaim import ReclaimAction
from koordqueue.scheduler.actions.shuffle import ShuffleAction
from koordqueue.scheduler.framework.interface import Action
from koordqueue.scheduler.framework.registry import register_action

BUILTIN_ACTIONS: tuple[Action, ...] = (
    EnqueueAction(),
    AllocateAction(),
    BackfillAction(),
    PreemptAction(),
    ReclaimAction(),
    GangPreemptAction(),
    GangReclaimAction(),
    ShuffleAction(),
)



def register_builtin_actions() -> None:
    """Register every built-in action under its name (replacing what had that name)."""
    for action in BUILTIN_ACTIONS:
        register_action(action)
