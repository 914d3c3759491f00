"""Registers the built-in plugins with the framework (Volcano's plugins/factory.go).

The `koordqueue.scheduler` package calls `register_builtin_plugins` once when imported, so
that the framework itself imports no plugin. Every plugin is opt-in: it runs only when a tier
of the configuration names it (`pdb` and the allocation gate are in no default tier, as
Volcano's default conf leaves pdb out).
"""

from __future__ import annotations

from koordqueue.scheduler.framework.interface import Plugin
from koordqueue.scheduler.framework.registry import register_plugin_builder
from koordqueue.scheduler.gates.plugin import QueueAllocationGatePlugin
from koordqueue.scheduler.plugins.binpack import BinpackPlugin
from koordqueue.scheduler.plugins.capacity import CapacityPlugin
from koordqueue.scheduler.plugins.cdp import CdpPlugin
from koordqueue.scheduler.plugins.conformance import ConformancePlugin
from koordqueue.scheduler.plugins.deviceshare import DeviceSharePlugin
from koordqueue.scheduler.plugins.drf import DrfPlugin
from koordqueue.scheduler.plugins.extender import ExtenderPlugin
from koordqueue.scheduler.plugins.gang import GangPlugin
from koordqueue.scheduler.plugins.network_topology_aware import NetworkTopologyAwarePlugin
from koordqueue.scheduler.plugins.nodegroup import NodeGroupPlugin
from koordqueue.scheduler.plugins.nodeorder import NodeOrderPlugin
from koordqueue.scheduler.plugins.numa_aware import NumaAwarePlugin
from koordqueue.scheduler.plugins.overcommit import OvercommitPlugin
from koordqueue.scheduler.plugins.pdb import PdbPlugin
from koordqueue.scheduler.plugins.predicates import PredicatesPlugin
from koordqueue.scheduler.plugins.priority import PriorityPlugin
from koordqueue.scheduler.plugins.proportion import ProportionPlugin
from koordqueue.scheduler.plugins.rescheduling import ReschedulingPlugin
from koordqueue.scheduler.plugins.resource_strategy_fit import ResourceStrategyFitPlugin
from koordqueue.scheduler.plugins.resourcequota import ResourceQuotaPlugin
from koordqueue.scheduler.plugins.sla import SlaPlugin
from koordqueue.scheduler.plugins.task_topology import TaskTopologyPlugin
from koordqueue.scheduler.plugins.tdm import TdmPlugin
from koordqueue.scheduler.plugins.usage import UsagePlugin

BUILTIN_PLUGINS: tuple[type[Plugin], ...] = (
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
    PdbPlugin,
    QueueAllocationGatePlugin,
    NetworkTopologyAwarePlugin,
    DeviceSharePlugin,
    NodeGroupPlugin,
    SlaPlugin,
    CdpPlugin,
    TaskTopologyPlugin,
    ResourceQuotaPlugin,
    TdmPlugin,
    NumaAwarePlugin,
    ResourceStrategyFitPlugin,
    UsagePlugin,
    ExtenderPlugin,
    ReschedulingPlugin,
)



def register_builtin_plugins() -> None:
    """Register every built-in plugin under its name (replacing what had that name)."""
    for plugin in BUILTIN_PLUGINS:
        register_plugin_builder(plugin.name, plugin)
