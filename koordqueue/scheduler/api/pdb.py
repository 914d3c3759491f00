"""PodDisruptionBudgets as the scheduler sees them (policy/v1), as frozen data.

Why only these fields: preempt and reclaim need to know which pods a budget covers (namespace
and selector), how many more voluntary disruptions it allows now (status.disruptionsAllowed,
computed by the disruption controller), and which pods the API server already counted as
disrupted (status.disruptedPods), whose eviction must not be charged twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordqueue.scheduler.api.selectors import LabelSelector


@dataclass(frozen=True, slots=True)
class PodDisruptionBudget:
    """One PDB. `selector` None (a missing spec.selector) and an empty selector both cover
    no pod, as Volcano's pdb plugin and kube-scheduler's preemption read them."""

    namespace: str
    name: str
    selector: LabelSelector | None = None
    disruptions_allowed: int = 0
    disrupted_pods: frozenset[str] = frozenset()
    """Names of pods (in `namespace`) whose eviction the API server already counted."""

    def covers(self, namespace: str, labels: Mapping[str, str]) -> bool:
        """Does the budget select a pod with these namespace and labels."""
        if namespace != self.namespace or not labels:
            return False
        selector = self.selector
        if selector is None or selector.empty or selector.invalid() is not None:
            return False
        return selector.matches(labels)

    def charges(self, namespace: str, name: str, labels: Mapping[str, str]) -> bool:
        """Does evicting this pod use one of the budget's disruptions (covered and not
        already among the disrupted pods)."""
        return self.covers(namespace, labels) and name not in self.disrupted_pods
