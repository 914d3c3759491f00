"""An example third-party scheduler plugin for koordqueue (see docs/plugins.md).

`draining` keeps pods off nodes an operator is emptying (label
`example.koordqueue.io/draining=true`) and prefers nodes of a configurable tier
(label `example.koordqueue.io/tier`, argument `draining.preferredTier`).
"""

from __future__ import annotations

from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.framework import Arguments, Plugin, Session

DRAINING_LABEL = "example.koordqueue.io/draining"
TIER_LABEL = "example.koordqueue.io/tier"


class DrainingPlugin(Plugin):
    """Plugins only register callbacks; the session decides when to call them."""

    name = "draining"

    def on_session_open(self, session: Session) -> None:
        tier = self.arguments.get_str("draining.preferredTier", "")
        bonus = self.arguments.get_float("draining.weight", 10.0)

        def not_draining(task: TaskInfo, node: NodeInfo) -> str | None:
            # None means "fits"; a string is the reason shown in the pod's fit errors.
            if node.labels.get(DRAINING_LABEL) == "true":
                return "node is draining"
            return None

        def prefer_tier(task: TaskInfo, node: NodeInfo) -> float:
            return bonus if tier and node.labels.get(TIER_LABEL) == tier else 0.0

        session.add_predicate_fn(self.name, not_draining)
        session.add_node_order_fn(self.name, prefer_tier)


def build(arguments: Arguments) -> Plugin:
    """The builder named by the `koordqueue.plugins` entry point."""
    return DrainingPlugin(arguments)
