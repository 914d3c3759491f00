"""Built-in plugins, by configuration name."""

from koordqueue.scheduler.framework.interface import PluginBuilder
from koordqueue.scheduler.plugins.binpack import BinpackPlugin
from koordqueue.scheduler.plugins.capacity import CapacityPlugin
from koordqueue.scheduler.plugins.conformance import ConformancePlugin
from koordqueue.scheduler.plugins.drf import DrfPlugin
from koordqueue.scheduler.plugins.gang import GangPlugin
from koordqueue.scheduler.plugins.nodeorder import NodeOrderPlugin
from koordqueue.scheduler.plugins.overcommit import OvercommitPlugin
from koordqueue.scheduler.plugins.predicates import PredicatesPlugin
from koordqueue.scheduler.plugins.priority import PriorityPlugin
from koordqueue.scheduler.plugins.proportion import ProportionPlugin

BUILTIN_PLUGINS: dict[str, PluginBuilder] = {
    cls.name: cls
    for cls in (
        PriorityPlugin,
        GangPlugin,
        ConformancePlugin,
        OvercommitPlugin,
        DrfPlugin,
        PredicatesPlugin,
        ProportionPlugin,
        NodeOrderPlugin,
        BinpackPlugin,
        CapacityPlugin,
    )
}

__all__ = [
    "BUILTIN_PLUGINS",
    "BinpackPlugin",
    "CapacityPlugin",
    "ConformancePlugin",
    "DrfPlugin",
    "GangPlugin",
    "NodeOrderPlugin",
    "OvercommitPlugin",
    "PredicatesPlugin",
    "PriorityPlugin",
    "ProportionPlugin",
]
