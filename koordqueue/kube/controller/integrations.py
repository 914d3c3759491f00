"""Which workload kinds the controller serves: every one through the same reconciler.

`--integrations` names the kinds (Kueue's names: `batch/job`, `kubeflow.org/pytorchjob`,
`pod`, ...); each one the cluster serves gets one `WorkloadReconciler` (workloads.py),
registered under its workload kind, and one informer (operator.py). batch/v1 Job is one of
them, with no path of its own: what a kind adds is its `Integration` module
(koordqueue/domain/integrations/) and its entry in `INTEGRATIONS`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, Protocol

import structlog

from koordqueue.domain.integrations import Integration, integration_names, parse_integrations
from koordqueue.domain.integrations.pod_parents import parent_names
from koordqueue.kube.api import ApiError, Kind, ObjectApi
from koordqueue.kube.controller.state import ControllerState
from koordqueue.kube.controller.workload_writes import PriorityClasses
from koordqueue.kube.controller.workloads import Reactions, WorkloadReconciler, kind_of

log = structlog.get_logger(__name__)

CRD: Final = Kind(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False
)
BUILT_IN_GROUPS: Final = frozenset({"", "batch"})
"""API groups served by every cluster: their kinds need no CRD."""

__all__ = [
    "BUILT_IN_GROUPS",
    "CRD",
    "built_in",
    "crd_installed",
    "enabled_integrations",
    "kind_of",
    "missing_parent_crds",
    "register_integrations",
    "serve",
]


class Host(Protocol):
    """What serves workload kinds (the Controller): the state its reconcilers share and the
    reactions of the other components they call."""

    @property
    def state(self) -> ControllerState: ...

    @property
    def reactions(self) -> Reactions: ...


def crd_name(kind: Kind) -> str:
    return f"{kind.plural}.{kind.group}"


def crd_installed(api: ObjectApi, kind: Kind) -> bool:
    """Whether the cluster serves `kind` at its version: built in, or its CRD serves it.

    A CRD that cannot be read (no permission, API unreachable) counts as not installed; the
    caller logs that once and serves the other kinds.
    """
    if kind.group in BUILT_IN_GROUPS:
        return True
    try:
        crd = api.get(CRD, crd_name(kind))
    except ApiError as exc:
        log.warning("cannot read CRD", crd=crd_name(kind), error=str(exc))
        return False
    if crd is None:
        return False
    versions = (crd.get("spec") or {}).get("versions") or []
    return any(v.get("name") == kind.version and v.get("served", True) for v in versions)


def enabled_integrations(api: ObjectApi, names: str | Iterable[str]) -> tuple[Integration, ...]:
    """The `--integrations` entries whose kinds this cluster serves; one log line per skip.

    Raises ValueError for a name no integration has (a flag typo is an error, a missing CRD
    is not).
    """
    enabled: list[Integration] = []
    for integration in parse_integrations(names):
        kind = kind_of(integration)
        twin = next((i for i in enabled if i.workload.kind == kind.kind), None)
        if twin is not None:  # one reconciler per kind: MPIJob v2beta1 or v1alpha1
            log.info(
                "integration skipped: its kind is served by another version",
                integration=integration.name,
                served_by=twin.name,
            )
        elif crd_installed(api, kind):
            enabled.append(integration)
        else:
            log.info(
                "integration skipped: its CRD is not installed",
                integration=integration.name,
                crd=crd_name(kind),
                version=kind.version,
            )
    return tuple(enabled)


def serve(host: Host, integrations: Iterable[Integration]) -> None:
    """Serve exactly `integrations`: one reconciler each (an already served kind keeps its
    reconciler and its state), the others unregistered."""
    state, consumers = host.state, host.state.consumers
    wanted = {integration.workload.kind: integration for integration in integrations}
    priorities = next(
        (c.priorities for c in consumers.values() if isinstance(c, WorkloadReconciler)),
        None,
    ) or PriorityClasses(state.api)
    for kind in [kind for kind in consumers if kind not in wanted]:
        del consumers[kind]
    for kind, integration in wanted.items():
        current = consumers.get(kind)
        if isinstance(current, WorkloadReconciler) and current.integration is integration:
            continue
        consumers[kind] = WorkloadReconciler(state, integration, host.reactions, priorities)


def missing_parent_crds(api: ObjectApi, names: str | Iterable[str]) -> list[str]:
    """The named pod parents (a LeaderWorkerSet) whose CRD the cluster lacks; one log line
    each. Nothing is skipped: their webhook and the pod path serve them once it is there."""
    missing: list[str] = []
    for parent in parent_names(integration_names(names)):
        w = parent.workload
        kind = Kind(w.group, w.version, w.plural, w.kind)
        if not crd_installed(api, kind):
            log.info(
                "pod parent's CRD is not installed: its objects are queued once it is",
                integration=parent.name,
                crd=crd_name(kind),
                version=kind.version,
            )
            missing.append(parent.name)
    return missing


def built_in(names: str | Iterable[str]) -> tuple[Integration, ...]:
    """The named integrations whose kinds every cluster serves (no CRD to look for)."""
    return tuple(i for i in parse_integrations(names) if kind_of(i).group in BUILT_IN_GROUPS)


def register_integrations(host: Host) -> tuple[Integration, ...]:
    """Serve the `--integrations` kinds this cluster has (a missing CRD: one log line), so
    the operator starts one informer for each. Returns the integrations served."""
    enabled = enabled_integrations(host.state.api, host.state.settings.integrations)
    missing_parent_crds(host.state.api, host.state.settings.integrations)
    serve(host, enabled)
    log.info("integrations served", integrations=sorted(i.name for i in enabled))
    return enabled
