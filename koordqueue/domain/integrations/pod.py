"""Plain Pods and pod groups, held by a scheduling gate (Kueue pkg/controller/jobs/pod).

A pod created with the scheduling gate `koord-queue/admission` is queued; removing the gate
admits it. Pods that carry the label `koord-queue/pod-group-name` form one workload per name
and namespace, whole when as many pods exist as the annotation
`koord-queue/pod-group-total-count` says (every member carries both); its unit is named
after the group and made only then. A single pod's unit is named after the pod.

Pod sets as Kueue builds them: a single pod is one pod set "main" of one pod; a group's pods
(those that can still run or have succeeded) are grouped by a hash of what admission looks at
in their spec (requests, ports, node selector, affinity, tolerations, runtime class,
priority, spread constraints, overhead, resource claims), one pod set per hash, sorted.
A started pod cannot be gated again: holding it again means deleting it (Kueue's Stop).
A single pod is finished when Succeeded or Failed; a group when all of its pods succeeded,
or, when a member is annotated `koord-queue/retriable-in-group: "false"`, once none is active.

A serving group (`koord-queue/pod-group-serving: "true"`, a StatefulSet's pods: Kueue's
serving and fast-admission group annotations) has its unit made with its first pod, as one
pod set "main" of the total count with that pod's template (Kueue's StatefulSet workload), is
owned by the pods' controller as well (its pods are replaced, it stays), and lets go a gated
pod that comes while it is admitted. A LeaderWorkerSet group's pods (`koord-queue/pod-group-
role`: leader, worker or main) serve too, but their unit waits for all of the group's pods,
as a plain group's does, and has Kueue's pod sets for it: leader 1 and worker size - 1, or
main size (leaderworkerset.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    DeleteWorkload,
    Integration,
    InvalidJobError,
    JobStatus,
    ListSelector,
    Mutation,
    Obj,
    PodSet,
    WorkloadKind,
    WorkloadPatch,
    annotations_of,
    meta,
    object_key,
    pod_requests,
)
from koordqueue.domain.names import (
    JOB_DEQUEUE_TIMESTAMP_ANNOTATION,
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_ROLE_ANNOTATION,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_RETRIABLE_IN_GROUP_ANNOTATION,
    QUOTA_NAME_LABEL,
)

DEFAULT_POD_SET: Final = "main"
"""Kueue's DefaultPodSetName: the pod set of a single pod."""
ROLE_HASH_LENGTH: Final = 8
ROLE_LEADER: Final = "leader"
ROLE_WORKER: Final = "worker"
ROLES: Final = (ROLE_LEADER, DEFAULT_POD_SET, ROLE_WORKER)
"""A LeaderWorkerSet group's pod sets, in the order its unit lists them (Kueue's names)."""
ROLE_FIELD: Final = f"metadata.annotations[{POD_GROUP_ROLE_ANNOTATION}]"
MSG_UNKNOWN_ROLE: Final = "{role!r}: not one of " + ", ".join(ROLES)
MSG_MIXED_ROLES: Final = (
    "'main' (no leader template) and 'leader'/'worker' in one group: its pods come from "
    "different versions of the LeaderWorkerSet"
)
MSG_NO_GROUP: Final = (
    f"a LeaderWorkerSet pod without the {POD_GROUP_NAME_LABEL} label (its "
    "leaderworkerset.sigs.k8s.io/name and group-index labels name its group)"
)
LABEL_VALUE_MAX: Final = 63
GROUP_HASH_LENGTH: Final = 8
TERMINATED: Final = frozenset({"Succeeded", "Failed"})
UNBOUND_FIELD_SELECTOR: Final = "spec.nodeName="
"""Pods no node was chosen for (kube-scheduler's own selector of unassigned pods)."""
RESYNC_SELECTOR: Final = ListSelector(labels=QUOTA_NAME_LABEL, fields=UNBOUND_FIELD_SELECTOR)


def _phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def is_gated(pod: Obj) -> bool:
    gates = (pod.get("spec") or {}).get("schedulingGates") or []
    return any(gate.get("name") == POD_ADMISSION_GATE for gate in gates)


def is_terminated(pod: Obj) -> bool:
    return _phase(pod) in TERMINATED


def runnable_or_succeeded(pod: Obj) -> bool:
    """Can still run, runs, or succeeded: not Failed, not deleted before it was placed."""
    deleting = meta(pod).get("deletionTimestamp") and not (pod.get("spec") or {}).get("nodeName")
    return not deleting and _phase(pod) != "Failed"


def _containers_shape(containers: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            "resources": {"requests": (c.get("resources") or {}).get("requests")},
            "ports": c.get("ports"),
        }
        for c in containers
    ]


def spec_shape(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    """What admission looks at in a pod's spec (Kueue's SpecShape): requests, ports, node
    selector, affinity, tolerations, runtime class, priority, spread, overhead, claims."""
    shape: dict[str, Any] = {
        "initContainers": _containers_shape(pod_spec.get("initContainers") or []),
        "containers": _containers_shape(pod_spec.get("containers") or []),
        "nodeSelector": pod_spec.get("nodeSelector"),
        "affinity": pod_spec.get("affinity"),
        "tolerations": pod_spec.get("tolerations"),
        "runtimeClassName": pod_spec.get("runtimeClassName"),
        "priority": pod_spec.get("priority"),
        "topologySpreadConstraints": pod_spec.get("topologySpreadConstraints"),
        "overhead": pod_spec.get("overhead"),
        "resourceClaims": pod_spec.get("resourceClaims"),
    }
    if pod_spec.get("resources") is not None:
        shape["resources"] = (pod_spec.get("resources") or {}).get("requests")
    return shape


SHAPE_BRANCHES: Final = frozenset({"containers", "initContainers", "resources"})
"""Where Kueue's spec shape nests (its map[string]any levels); anything else is one value."""


def shape_changes(new: Any, old: Any, path: str, branch: bool = True) -> list[str]:
    """Paths where two spec shapes differ, as Kueue's ValidateImmutablePodGroupPodSpec
    names them (containers element by element when as many, resources by key)."""
    if branch and isinstance(new, Mapping) and isinstance(old, Mapping):
        out: list[str] = []
        for key in sorted(set(new) | set(old)):
            nested = key in SHAPE_BRANCHES
            out += shape_changes(new.get(key), old.get(key), f"{path}.{key}", nested)
        return out
    if branch and isinstance(new, list) and isinstance(old, list) and len(new) == len(old):
        out = []
        for i, (n, o) in enumerate(zip(new, old, strict=True)):
            out += shape_changes(n, o, f"{path}[{i}]")
        return out
    return [] if new == old else [path]


def role_hash(pod_spec: Mapping[str, Any]) -> str:
    """`spec_shape` hashed: pods with equal hashes share a role.

    The same fields as Kueue's GenerateRoleHash; the digest is of sorted JSON, so the names
    differ from Kueue's (which hashes Go's encoding), while the grouping is the same.
    """
    text = json.dumps({"spec": spec_shape(pod_spec)}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:ROLE_HASH_LENGTH]


def group_total_count(pod: Obj) -> int:
    """The group's size from its annotation; raises InvalidJobError when absent or not ≥ 1."""
    field = f"metadata.annotations[{POD_GROUP_TOTAL_COUNT_ANNOTATION}]"
    raw = annotations_of(pod).get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
    if raw is None:
        raise InvalidJobError(object_key(pod), field, "missing on a pod of a group", "Pod")
    try:
        count = int(str(raw))
    except ValueError as exc:
        raise InvalidJobError(object_key(pod), field, f"{raw!r}: not a number", "Pod") from exc
    if count < 1:
        raise InvalidJobError(object_key(pod), field, f"{raw!r}: must be at least 1", "Pod")
    return count


def label_value(whole: str) -> str:
    """`whole` as a label value: cut, with a hash of the whole, to 63 characters."""
    if len(whole) <= LABEL_VALUE_MAX:
        return whole
    digest = hashlib.sha256(whole.encode()).hexdigest()[:GROUP_HASH_LENGTH]
    return f"{whole[: LABEL_VALUE_MAX - GROUP_HASH_LENGTH - 1].rstrip('-.')}-{digest}"


def role_of(pod: Obj) -> str | None:
    """The pod set a LeaderWorkerSet's pod is counted in (None: not such a pod)."""
    value = annotations_of(pod).get(POD_GROUP_ROLE_ANNOTATION)
    return None if value is None else str(value)


def role_count(role: str, total: int) -> int:
    """Kueue's LeaderWorkerSet pod sets: one leader, size - 1 workers, or size when there
    is no leader template ("main")."""
    return 1 if role == ROLE_LEADER else total - 1 if role == ROLE_WORKER else total


def role_pod_sets(members: Sequence[Obj], total: int) -> tuple[PodSet, ...]:
    """A LeaderWorkerSet group's pod sets: one per role its pods carry, counted as Kueue
    counts them (not as many pods as are here: a replaced pod does not shrink the unit),
    each with the template of a pod of that role that can still run."""
    by_role: dict[str, list[Obj]] = {}
    for pod in _by_name(members):
        role = role_of(pod) or ""
        if role not in ROLES:
            raise InvalidJobError(
                object_key(pod), ROLE_FIELD, MSG_UNKNOWN_ROLE.format(role=role), "Pod"
            )
        by_role.setdefault(role, []).append(pod)
    if DEFAULT_POD_SET in by_role and len(by_role) > 1:
        first = by_role[DEFAULT_POD_SET][0]
        raise InvalidJobError(object_key(first), ROLE_FIELD, MSG_MIXED_ROLES, "Pod")
    out: list[PodSet] = []
    for role in (r for r in ROLES if r in by_role):
        pods = by_role[role]
        pod = ([p for p in pods if runnable_or_succeeded(p)] or pods)[0]
        spec = pod.get("spec") or {}
        request = pod_requests(spec, object_key(pod), "spec", "Pod")
        out.append(PodSet(role, role_count(role, total), {"spec": dict(spec)}, request))
    return tuple(out)


def is_serving(pod: Obj) -> bool:
    return annotations_of(pod).get(POD_GROUP_SERVING_ANNOTATION) == "true"


def controller_ref(obj: Obj) -> Mapping[str, Any] | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, Mapping) and ref.get("controller"):
            return ref
    return None


def _by_name(members: Sequence[Obj]) -> list[Obj]:
    return sorted(members, key=lambda pod: str(meta(pod).get("name", "")))


class Pod(Integration):
    name = "pod"
    workload = WorkloadKind("", "v1", "Pod", "pods")
    unit_suffix = "pod-qu"

    def group_name(self, obj: Obj) -> str | None:
        value = (meta(obj).get("labels") or {}).get(POD_GROUP_NAME_LABEL)
        return str(value) if value else None

    def group_label(self) -> str | None:
        return POD_GROUP_NAME_LABEL

    def expected_members(self, members: Sequence[Obj]) -> int:
        first = members[0]
        if self.group_name(first) is None:
            return 1
        total = group_total_count(first)
        return 1 if is_serving(first) and role_of(first) is None else total

    def pod_sets(self, members: Sequence[Obj]) -> tuple[PodSet, ...]:
        first = _by_name(members)[0]
        if self.group_name(first) is None:
            if role_of(first) is not None:
                field = f"metadata.labels[{POD_GROUP_NAME_LABEL}]"
                raise InvalidJobError(object_key(first), field, MSG_NO_GROUP, "Pod")
            spec = first.get("spec") or {}
            request = pod_requests(spec, object_key(first), "spec", "Pod")
            return (PodSet(DEFAULT_POD_SET, 1, {"spec": dict(spec)}, request),)
        if role_of(first) is not None:
            return role_pod_sets(members, group_total_count(first))
        if is_serving(first):
            live = [pod for pod in _by_name(members) if runnable_or_succeeded(pod)] or [first]
            spec = live[0].get("spec") or {}
            request = pod_requests(spec, object_key(live[0]), "spec", "Pod")
            total = group_total_count(first)
            return (PodSet(DEFAULT_POD_SET, total, {"spec": dict(spec)}, request),)
        roles: dict[str, PodSet] = {}
        for pod in _by_name(members):
            if not runnable_or_succeeded(pod):
                continue
            spec = pod.get("spec") or {}
            role = role_hash(spec)
            known = roles.get(role)
            if known is not None:
                roles[role] = PodSet(role, known.count + 1, known.template, known.request)
            else:
                request = pod_requests(spec, object_key(pod), "spec", "Pod")
                roles[role] = PodSet(role, 1, {"spec": dict(spec)}, request)
        return tuple(roles[name] for name in sorted(roles))

    def _first_spec(self, obj: Obj) -> Mapping[str, Any]:
        return obj.get("spec") or {}

    def priority_class_name(self, obj: Obj) -> str:
        return str(self._first_spec(obj).get("priorityClassName") or "")

    def template_priority(self, obj: Obj) -> int | None:
        value = self._first_spec(obj).get("priority")
        return None if value is None else int(value)

    def is_suspended(self, obj: Obj) -> bool:
        return is_gated(obj)

    def is_managed(self, obj: Obj) -> bool:
        """Created with the gate (the gate is the queue's mark on a pod)."""
        return is_gated(obj)

    def may_be_queued(self, obj: Obj) -> bool:
        """Gated, or released by the queue (it stamped the dequeue time when it removed the
        gate): any other pod is not the queue's."""
        return is_gated(obj) or JOB_DEQUEUE_TIMESTAMP_ANNOTATION in annotations_of(obj)

    def resync_selector(self) -> ListSelector:
        """Pods that name a quota and are not bound yet: not every pod of the cluster.

        Neither the gate nor the dequeue mark can be selected on, so the list asks for what
        a queued pod must have: the quota label (a unit without it is never admitted: no
        quota, no namespace fallback) and no node (a gated pod cannot be bound). A pod the
        queue released and that is bound is looked at through its unit; a finished unit's
        pods are not looked at again (its ownerReferences let the garbage collector delete
        it with them).
        """
        return RESYNC_SELECTOR

    def enqueue(
        self, obj: Obj, now: str, now_rfc3339: str | None = None
    ) -> tuple[WorkloadPatch, ...]:
        return ()  # the gate marks it

    def resume(self, obj: Obj, now: str, now_rfc3339: str | None = None) -> tuple[Mutation, ...]:
        """Remove our gate (only ours) and stamp the dequeue time, guarded by the
        resourceVersion it was read at."""
        if not is_gated(obj):
            return ()
        gates = [
            dict(gate)
            for gate in (obj.get("spec") or {}).get("schedulingGates") or []
            if gate.get("name") != POD_ADMISSION_GATE
        ]
        patch: dict[str, Any] = {
            "spec": {"schedulingGates": gates or None},
            "metadata": {"annotations": {JOB_DEQUEUE_TIMESTAMP_ANNOTATION: now}},
        }
        version = meta(obj).get("resourceVersion")
        if version:
            patch["metadata"]["resourceVersion"] = version
        return (WorkloadPatch(patch),)

    def suspend(self, obj: Obj) -> tuple[Mutation, ...]:
        """A pod that was let go cannot be gated again: delete it, unless it is done."""
        if is_gated(obj) or is_terminated(obj):
            return ()
        return (DeleteWorkload(),)

    def pod_running(self, members: Sequence[Obj]) -> bool | None:
        return any(_phase(pod) == "Running" for pod in members)

    def pod_selector(self, obj: Obj) -> str | None:
        group = self.group_name(obj)
        return f"{POD_GROUP_NAME_LABEL}={group}" if group else None

    def status(self, members: Sequence[Obj], pod_running: bool = False) -> JobStatus:
        first = members[0]
        if self.group_name(first) is None:
            phase = _phase(first)
            if phase == "Succeeded":
                return JobStatus.SUCCEEDED
            if phase == "Failed":
                return JobStatus.FAILED
            if phase == "Running":
                return JobStatus.RUNNING
            return JobStatus.QUEUING if is_gated(first) else JobStatus.PENDING
        try:
            total = group_total_count(first)
        except InvalidJobError:
            total = len(members)
        succeeded = sum(1 for pod in members if _phase(pod) == "Succeeded")
        active = any(not is_terminated(pod) for pod in members)
        unretriable = any(
            annotations_of(pod).get(POD_RETRIABLE_IN_GROUP_ANNOTATION) == "false" for pod in members
        )
        if succeeded >= total:
            return JobStatus.SUCCEEDED
        if not active and unretriable:
            return JobStatus.FAILED
        if any(_phase(pod) == "Running" for pod in members):
            return JobStatus.RUNNING
        if any(is_gated(pod) for pod in members):
            return JobStatus.QUEUING
        return JobStatus.PENDING

    def admits_late_members(self, members: Sequence[Obj]) -> bool:
        return bool(members) and self.group_name(members[0]) is not None and all(
            is_serving(pod) for pod in members
        )

    def copied_metadata(self, members: Sequence[Obj]) -> tuple[dict[str, Any], dict[str, Any]]:
        return super().copied_metadata(_by_name(members))

    def owner_references(self, members: Sequence[Obj]) -> list[dict[str, Any]]:
        refs = super().owner_references(_by_name(members))
        parent = self._serving_parent(members)
        if parent is not None:
            keys = ("apiVersion", "kind", "name", "uid")
            refs.append({k: parent[k] for k in keys if k in parent})
        return refs

    def owner_uids(self, members: Sequence[Obj]) -> set[str]:
        uids = super().owner_uids(members)
        parent = self._serving_parent(members)
        if parent is not None and parent.get("uid"):
            uids.add(str(parent["uid"]))
        return uids

    def _serving_parent(self, members: Sequence[Obj]) -> Mapping[str, Any] | None:
        """The controller of a serving group's pods (their StatefulSet): the unit's owner
        too, so that it outlives the pods it was made with (rolled, restarted, replaced)."""
        first = _by_name(members)[0] if members else None
        if first is None or not is_serving(first) or self.group_name(first) is None:
            return None
        return controller_ref(first)  # (a LeaderWorkerSet group's: its leader's StatefulSet)
