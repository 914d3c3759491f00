"""numa-aware: Volcano's plugin of that name (v1.14.1) — places Guaranteed pods where the
node's kubelet topology manager will admit them, from the node's Numatopology
(nodeinfo.volcano.sh/v1alpha1, written by Volcano's resource exporter).

As in Volcano:
- only Guaranteed pods are judged; a pod's policy is its `volcano.sh/numa-topology-policy`
  annotation (none / best-effort / restricted / single-numa-node);
- a pod asking for a policy other than none needs a node with a Numatopology, cpu manager
  `static`, the same TopologyManagerPolicy, and allocatable cpus, else the node is refused
  with Volcano's reason; a pod with no policy is judged only on nodes that are static with a
  policy other than none;
- per container, the cpu-manager provider's hints (whole cpus per NUMA mask, the system's
  reserved cpus left out) go through the node's policy; a container the policy does not admit
  refuses the node (the reason names the container, the policy and "cannot be assigned by
  numa"); admitted containers get cpus, the next container sees them taken;
- the **score** (pods with a policy other than none): fewer NUMA nodes spanned is better,
  normalised to 0..100 over the candidates (reversed), times the argument `weight` (1);
- cpus go to a pod on allocate and come back on deallocate, so later pods of the session
  see them taken; at close, the cpus of the pods bound are reported
  (`SessionResult.numa_assigned`) for the cache to keep until the exporter reports them
  (Volcano's UpdateSchedulerNumaInfo).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from koordqueue.scheduler.api import NodeInfo, TaskInfo
from koordqueue.scheduler.api import numa_names as nn
from koordqueue.scheduler.api.numa import CpuSet, NumaTopology, TaskNuma, mask_count
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import EventHandler, Session
from koordqueue.scheduler.interpod import plugin_enabled
from koordqueue.scheduler.numa import cpumanager
from koordqueue.scheduler.numa.policy import policy_for

ResSets = dict[str, CpuSet]


class NumaAwarePlugin(Plugin):
    """Registers the NUMA predicate and score and the allocate/deallocate handler."""

    name = nn.PLUGIN_NAME
    quiet = True

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        self.weight = self.arguments.get_int(nn.WEIGHT, 1)
        self.state: NumaState | None = None

    def on_session_open(self, session: Session) -> None:
        state = self.state = NumaState(session, self.weight)
        if plugin_enabled(session, self.name, ExtensionPoint.PREDICATE):
            session.placement.add_dynamic_predicate(state.predicate, state.explain)
        if plugin_enabled(session, self.name, ExtensionPoint.NODE_ORDER):
            session.placement.add_dynamic_score(state.scorer)
        session.add_event_handler(
            self.name, EventHandler(allocate=state.allocate, deallocate=state.deallocate)
        )

    def on_session_close(self, session: Session) -> None:
        if self.state is None:
            return
        bound = {b.task for b in session.binds}
        for uid, node in self.state.bound_to.items():
            given = self.state.assigned.get(uid, {}).get(node)
            if uid in bound and given:
                session.numa_assigned[uid] = (node, dict(given))


def _no_policy(numa: TaskNuma) -> bool:
    return numa.policy in ("", nn.POLICY_NONE)


class NumaState:
    """One session's free cpus per node and the cpus each pod was given per node."""

    def __init__(self, session: Session, weight: int) -> None:
        self.session = session
        self.weight = weight
        self.size = session.tensor.size
        self.topologies: dict[str, NumaTopology] = dict(session.numatopologies)
        self.free: dict[str, ResSets] = {
            name: {res: r.allocatable for res, r in topo.resources.items()}
            for name, topo in self.topologies.items()
        }
        self.index = {n.name: n.index for n in session.node_list}
        self.assigned: dict[str, dict[str, ResSets]] = {}
        """Task uid -> node -> the cpus the predicate chose there (Volcano's assignRes)."""
        self.bound_to: dict[str, str] = {}

    # --- predicate ------------------------------------------------------------------------
    def _policy_refusal(self, numa: TaskNuma, name: str) -> tuple[bool, str | None]:
        """(go on judging, refusal) — filterNodeByPolicy."""
        topo = self.topologies.get(name)
        if not _no_policy(numa):
            if topo is None:
                return False, nn.NO_NUMA_INFO
            if topo.policies.get(nn.CPU_MANAGER_POLICY) != nn.CPU_MANAGER_STATIC:
                return False, nn.NOT_STATIC
            node_policy = topo.policies.get(nn.TOPOLOGY_MANAGER_POLICY, "")
            if numa.policy != node_policy:
                return False, nn.POLICY_DIFFERS.format(task=numa.policy, node=node_policy)
            if name not in self.free:
                return False, nn.NO_TOPO_INFO
            if not self.free[name].get(nn.CPU):
                return False, nn.NO_ALLOCATABLE_CPUS
            return True, None
        if topo is None or topo.policies.get(nn.CPU_MANAGER_POLICY) != nn.CPU_MANAGER_STATIC:
            return False, None
        if topo.policies.get(nn.TOPOLOGY_MANAGER_POLICY, "") in ("", nn.POLICY_NONE):
            return False, None
        return True, None

    def judge(self, task: TaskInfo, name: str) -> str | None:
        """Why node `name` cannot take the task (None: it can; its cpus are then recorded)."""
        numa = task.numa
        if numa is None:
            return None
        go_on, refusal = self._policy_refusal(numa, name)
        if not go_on:
            return refusal
        topo = self.topologies[name]
        free = dict(self.free[name])
        node_policy = topo.policies.get(nn.TOPOLOGY_MANAGER_POLICY, "")
        policy = policy_for(node_policy, topo.numa_nodes())
        given: ResSets = {}
        for container in numa.containers:
            hints = cpumanager.topology_hints(container.cpu_millis, topo, free)
            best, admit = policy([hints])
            if not admit:
                return nn.NO_NUMA_NODE_FITS.format(
                    container=container.name,
                    cpus=cpumanager.guaranteed_cpus(container.cpu_millis), policy=node_policy,
                )
            for res, cpus in cpumanager.allocate(container.cpu_millis, best, topo, free).items():
                given[res] = given.get(res, frozenset()) | cpus
                free[res] = free.get(res, frozenset()) - cpus
        self.assigned.setdefault(task.uid, {})[name] = given
        return None

    def predicate(self, task: TaskInfo) -> BoolArray | None:
        numa = task.numa
        if numa is None:
            return None
        mask = np.ones(self.size, dtype=bool)
        names = self.index if not _no_policy(numa) else self.topologies
        for name in names:
            index = self.index.get(name)
            if index is not None and self.judge(task, name) is not None:
                mask[index] = False
        return mask

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        return self.judge(task, node.name)

    # --- score ----------------------------------------------------------------------------
    def scorer(self, task: TaskInfo) -> Scorer | None:
        numa = task.numa
        if numa is None or _no_policy(numa) or task.uid not in self.assigned:
            return None
        assigned: Mapping[str, ResSets] = self.assigned[task.uid]

        def score(eff: FloatArray) -> FloatArray:
            counts = np.zeros(self.size, dtype=np.float64)
            for name, index in self.index.items():
                if eff[index] == -np.inf:
                    continue
                cpus = assigned.get(name, {}).get(nn.CPU, frozenset())
                topo = self.topologies.get(name)
                nodes = {topo.cpus[c].numa for c in cpus if c in topo.cpus} if topo else set()
                counts[index] = mask_count(sum(1 << n for n in nodes))
            candidates = eff != -np.inf
            top = counts[candidates].max() if candidates.any() else 0.0
            if top == 0:
                scores = np.full(self.size, float(nn.MAX_NODE_SCORE))
            else:  # Volcano's integer NormalizeScore, reversed
                scores = nn.MAX_NODE_SCORE - np.floor(nn.MAX_NODE_SCORE * counts / top)
            return np.where(candidates, scores * self.weight, 0.0)

        return score

    # --- allocate / deallocate ------------------------------------------------------------
    def allocate(self, task: TaskInfo) -> None:
        name = task.node_name
        if name is None:
            return
        given = self.assigned.get(task.uid, {}).get(name)
        if given is None or name not in self.free:
            return
        free = self.free[name]
        for res, cpus in given.items():
            if res in free:
                free[res] = free[res] - cpus
        self.bound_to[task.uid] = name

    def deallocate(self, task: TaskInfo) -> None:
        name = task.node_name
        if name is None:
            return
        given = self.assigned.get(task.uid, {}).get(name)
        if given is None or name not in self.free:
            return
        self.bound_to.pop(task.uid, None)
        free = self.free[name]
        for res, cpus in given.items():
            if res in free:
                free[res] = free[res] | cpus
