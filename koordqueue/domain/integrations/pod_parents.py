"""Deployments and StatefulSets, queued through their pods (Kueue pkg/controller/jobs/
{deployment,statefulset}; issue 26).

Kueue queues neither object itself: its webhooks mark the pod template so that the pods are
queued by the pod integration, which naming either enables (Kueue's
ImplicitlyEnabledFrameworkNames). Ours do the same on our one pod path (pod.py):

- Deployment: its quota label goes onto its pod template; each pod is then a plain pod of
  the pod integration, gated when created, with a unit of its own. A scale-down deletes pods
  and with them their units (quota back); a scale-up makes gated pods, which queue.
- StatefulSet: its pods form one serving pod group, `statefulset-<name>`, of `replicas`
  pods: the template gets the quota label, the group label, the total count and the serving
  mark. Its unit is made with its first pod (an OrderedReady StatefulSet makes the next pod
  only once the previous one is Ready: Kueue's fast admission), holds replicas x the
  template's request (one pod set "main"), is owned by the StatefulSet as well, and lets go
  every gated pod that comes while it is admitted. Scaled to 0, its last pod's deletion
  deletes the unit (quota back); scaled up from 0, its pods queue again.

Kueue's validation, transcribed (its webhook refuses; so does ours, though it never blocks
anything when down: failurePolicy Ignore): while replicas are ready the quota label cannot
change or go; a StatefulSet that names a quota scales only to and from 0 (its unit holds the
admitted count), not up from 0 while pods of the scale-down remain, and the fields admission
looks at in its pod spec do not change. An object whose controller is a workload of another
enabled integration (an AppWrapper's StatefulSet) is left to that workload, and a
LeaderWorkerSet's StatefulSets (labelled with its name) to the LeaderWorkerSet's path
(leaderworkerset.py).
Pure: objects are the API's JSON as dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from koordqueue.domain.integrations import leaderworkerset as lws
from koordqueue.domain.integrations.base import (
    Integration,
    InvalidJobError,
    WorkloadKind,
    WorkloadPatch,
    meta,
    object_key,
    pod_count,
)
from koordqueue.domain.integrations.pod import (
    Pod,
    controller_ref,
    label_value,
    shape_changes,
    spec_shape,
)
from koordqueue.domain.integrations.pod_gate import SYSTEM_NAMESPACE
from koordqueue.domain.names import (
    LWS_GROUP_PREFIX,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
    STATEFULSET_GROUP_PREFIX,
)

QUOTA_LABEL_FIELD: Final = f"metadata.labels[{QUOTA_NAME_LABEL}]"
MSG_IMMUTABLE: Final = "{field}: field is immutable{why}"
WHY_READY: Final = " while replicas are ready"
WHY_RESIZE: Final = " (a StatefulSet queued as a pod group scales only to and from 0)"
MSG_SCALE_DOWN_IN_PROGRESS: Final = "spec.replicas: Forbidden: scaling down is still in progress"
MSG_REFUSED: Final = '{kind} "{name}" is invalid: {problems}'


@dataclass(frozen=True, slots=True)
class PodParent:
    """A kind whose pods are queued for it: its `--integrations` name and how it groups them."""

    name: str
    workload: WorkloadKind
    group_prefix: str | None
    """Its pods form one serving group named prefix + its name; None: each pod alone."""


DEPLOYMENT: Final = PodParent(
    "deployment", WorkloadKind("apps", "v1", "Deployment", "deployments"), None
)
STATEFULSET: Final = PodParent(
    "statefulset",
    WorkloadKind("apps", "v1", "StatefulSet", "statefulsets"),
    STATEFULSET_GROUP_PREFIX,
)
LEADERWORKERSET: Final = PodParent(lws.LWS_INTEGRATION, lws.LWS_KIND, LWS_GROUP_PREFIX)
"""Each of its groups is one pod group (leaderworkerset.py)."""
POD_PARENTS: Final[Mapping[str, PodParent]] = {
    p.name: p for p in (DEPLOYMENT, STATEFULSET, LEADERWORKERSET)
}
"""Every pod parent by its `--integrations` name (Kueue's: deployment, statefulset,
leaderworkerset.x-k8s.io/leaderworkerset)."""


@dataclass(frozen=True, slots=True)
class ParentGating:
    """What the pod-parent webhook decides with: set once at start-up."""

    excluded_namespaces: frozenset[str]
    parents: Mapping[tuple[str, str], PodParent]
    """(apiVersion, kind) -> the enabled parent."""
    owner_kinds: frozenset[tuple[str, str]]
    """(apiVersion, kind) of the enabled integrations' workloads (Pod excluded): an object
    whose controller is one of them is that workload's business."""


def parent_gating(
    own_namespace: str, parents: Iterable[PodParent], integrations: Iterable[Integration]
) -> ParentGating | None:
    chosen = {(p.workload.api_version, p.workload.kind): p for p in parents}
    if not chosen:
        return None
    owners = frozenset(
        (i.workload.api_version, i.workload.kind)
        for i in integrations
        if not isinstance(i, Pod)
    )
    return ParentGating(frozenset({SYSTEM_NAMESPACE, own_namespace}), chosen, owners)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return meta(obj).get("labels") or {}


def quota_of(obj: Mapping[str, Any]) -> str:
    value = _labels(obj).get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else ""


def replicas(obj: Mapping[str, Any]) -> int:
    """spec.replicas (1 when absent, as the API server defaults it)."""
    value = (obj.get("spec") or {}).get("replicas")
    return pod_count(value, 1, object_key(obj), "spec.replicas", str(obj.get("kind") or ""))


def group_name(parent: PodParent, obj: Mapping[str, Any]) -> str | None:
    """prefix + name; cut, with a hash of the whole, to a label value's 63 characters."""
    if parent.group_prefix is None:
        return None
    return label_value(f"{parent.group_prefix}{meta(obj).get('name', '')}")


def _template_meta(obj: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    template = (obj.get("spec") or {}).get("template") or {}
    return (template.get("metadata") or {}).get(key) or {}


def _governed(
    parent_gating: ParentGating, obj: Mapping[str, Any], namespace: str | None
) -> PodParent | None:
    """The parent serving `obj`, unless it is out of scope (namespace, another's child)."""
    parent = parent_gating.parents.get((str(obj.get("apiVersion")), str(obj.get("kind"))))
    if parent is None:
        return None
    if (namespace or meta(obj).get("namespace") or "") in parent_gating.excluded_namespaces:
        return None
    owner = controller_ref(obj) or {}
    if (owner.get("apiVersion"), owner.get("kind")) in parent_gating.owner_kinds:
        return None
    if parent is STATEFULSET and lws.LWS_NAME_LABEL in (meta(obj).get("labels") or {}):
        return None  # a LeaderWorkerSet's (its leader's or a group's): its pods are the LWS's
    return parent


def template_patch(parent: PodParent, obj: Mapping[str, Any]) -> WorkloadPatch | None:
    """The merge patch marking the pod template (Kueue's Default()), or None when the
    object names no quota or its template is marked already.

    A StatefulSet scaled to 0 keeps the count it had: a template change would roll its pods.
    """
    quota = quota_of(obj)
    if not quota:
        return None
    labels: dict[str, str] = {QUOTA_NAME_LABEL: quota}
    notes: dict[str, str] = {}
    group = group_name(parent, obj)
    if group is not None:
        labels[POD_GROUP_NAME_LABEL] = group
        notes[POD_GROUP_SERVING_ANNOTATION] = "true"
        count = replicas(obj)
        if count > 0:
            notes[POD_GROUP_TOTAL_COUNT_ANNOTATION] = str(count)
    have_labels, have_notes = _template_meta(obj, "labels"), _template_meta(obj, "annotations")
    labels = {k: v for k, v in labels.items() if have_labels.get(k) != v}
    notes = {k: v for k, v in notes.items() if have_notes.get(k) != v}
    if not labels and not notes:
        return None
    template_meta: dict[str, Any] = {}
    if labels:
        template_meta["labels"] = labels
    if notes:
        template_meta["annotations"] = notes
    return WorkloadPatch({"spec": {"template": {"metadata": template_meta}}})


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def _status_count(obj: Mapping[str, Any], name: str) -> int:
    value = (obj.get("status") or {}).get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def update_problems(parent: PodParent, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why an update is refused (Kueue's ValidateUpdate), each naming its field; [] when not."""
    problems: list[str] = []
    old_quota, new_quota = quota_of(old), quota_of(new)
    if (_status_count(old, "readyReplicas") > 0 or not new_quota) and old_quota != new_quota:
        why = WHY_READY if _status_count(old, "readyReplicas") > 0 else ""
        problems.append(MSG_IMMUTABLE.format(field=QUOTA_LABEL_FIELD, why=why))
    if parent.group_prefix is None or not new_quota:
        return problems
    for path in shape_changes(
        spec_shape(_pod_spec(new)), spec_shape(_pod_spec(old)), "spec.template.spec"
    ):
        problems.append(MSG_IMMUTABLE.format(field=path, why=""))
    try:
        before, after = replicas(old), replicas(new)
    except InvalidJobError as exc:
        return [*problems, str(exc)]
    if before != 0 and after not in (0, before):
        problems.append(MSG_IMMUTABLE.format(field="spec.replicas", why=WHY_RESIZE))
    if before == 0 and after > 0 and _status_count(new, "replicas") > 0:
        problems.append(MSG_SCALE_DOWN_IN_PROGRESS)
    return problems


@dataclass(frozen=True, slots=True)
class ParentReview:
    """What the webhook answers: a template patch, or a refusal."""

    patch: WorkloadPatch | None = None
    denied: str | None = None


def review_parent(
    gating: ParentGating,
    operation: str,
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    namespace: str | None = None,
) -> ParentReview:
    """The answer to a CREATE or UPDATE of a Deployment, StatefulSet or LeaderWorkerSet."""
    parent = _governed(gating, obj, namespace)
    if parent is None or operation not in ("CREATE", "UPDATE"):
        return ParentReview()
    problems: list[str] = []
    if operation == "UPDATE" and old is not None:
        problems = (
            lws.update_problems(old, obj)
            if parent is LEADERWORKERSET
            else update_problems(parent, old, obj)
        )
    elif parent is LEADERWORKERSET:
        problems = lws.create_problems(obj)
    if problems:
        message = MSG_REFUSED.format(
            kind=parent.workload.kind, name=meta(obj).get("name", ""), problems="; ".join(problems)
        )
        return ParentReview(denied=message)
    try:
        if parent is LEADERWORKERSET:
            return ParentReview(patch=lws.template_patch(obj))
        return ParentReview(patch=template_patch(parent, obj))
    except InvalidJobError as exc:
        return ParentReview(denied=str(exc))


def parent_names(names: Sequence[str]) -> tuple[PodParent, ...]:
    """The pod parents among `--integrations` names (unknown names are not this one's to say)."""
    return tuple(POD_PARENTS[n] for n in dict.fromkeys(names) if n in POD_PARENTS)
