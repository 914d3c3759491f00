"""LeaderWorkerSets, queued through their pods, one pod group per group (Kueue
pkg/controller/jobs/leaderworkerset; issue 26).

Kueue queues a LeaderWorkerSet (LWS) as `replicas` workloads, one per group (a leader and
size - 1 workers), each with the pod sets leader 1 and worker size - 1 (main size when there
is no leader template), made from the LWS's templates before any pod exists; its pods are
gated and join their group's workload; scaling down deletes the workloads of the groups gone.

Ours, on the one pod path (pod.py), as the StatefulSet's: the pod-parent webhook marks both
templates (the quota label, the serving mark, the total count = size, and the role: leader,
worker, or main); the LWS controller copies them onto its StatefulSets' pods, which the pod
webhook gates and labels with their group, `leaderworkerset-<name>-<group index>` (read from
the LWS controller's labels on the pod; a leader created before the LWS's own pod webhook
has set its group index gets it from its name, `<name>-<index>`). The group's unit is made
once all `size` pods exist (LWS's default startup policy, LeaderCreated, creates the workers
as soon as the leader exists), with Kueue's pod sets; a pod that replaces one while the group
is admitted is let go; when a group's last pod goes (scale-down, LWS deleted) its unit goes
and gives its quota back.

Kueue's webhook rules, transcribed: the quota label cannot change or go, and while the LWS
names a quota the fields admission looks at in either template's pod spec cannot change, nor
can the leader template come or go. Ours besides: an LWS that names a quota cannot have the
startup policy LeaderReady (its group would wait forever). Pure: objects are the API's JSON
as dicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from koordqueue.domain.integrations.base import (
    InvalidJobError,
    WorkloadKind,
    WorkloadPatch,
    meta,
    object_key,
    pod_count,
)
from koordqueue.domain.integrations.pod import (
    DEFAULT_POD_SET,
    ROLE_LEADER,
    ROLE_WORKER,
    label_value,
    shape_changes,
    spec_shape,
)
from koordqueue.domain.names import (
    LWS_GROUP_PREFIX,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_ROLE_ANNOTATION,
    POD_GROUP_SERVING_ANNOTATION,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
)

LWS_INTEGRATION: Final = "leaderworkerset.x-k8s.io/leaderworkerset"
"""The `--integrations` name (Kueue's FrameworkName)."""
LWS_KIND: Final = WorkloadKind(
    "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", "leaderworkersets"
)
LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
"""Set by the LWS controller on its StatefulSets and pods: the LWS's name."""
LWS_GROUP_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/group-index"
"""Set by the LWS controller on a group's pods (by its pod webhook on the leader)."""
LWS_WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
"""0 on the leader, 1.. on the workers."""
LEADER_TEMPLATE: Final = "leaderTemplate"
WORKER_TEMPLATE: Final = "workerTemplate"
TEMPLATES_FIELD: Final = "spec.leaderWorkerTemplate"
SIZE_FIELD: Final = f"{TEMPLATES_FIELD}.size"
QUOTA_LABEL_FIELD: Final = f"metadata.labels[{QUOTA_NAME_LABEL}]"
MSG_IMMUTABLE: Final = "{field}: field is immutable"
MSG_SIZE: Final = "must be at least 1"
STARTUP_FIELD: Final = "spec.startupPolicy"
LEADER_READY: Final = "LeaderReady"
MSG_LEADER_READY: Final = (
    f"{STARTUP_FIELD}: Unsupported value: {LEADER_READY!r}: a queued group's unit waits for "
    "all of its pods, and with LeaderReady the workers come only once the gated leader is "
    "Ready (use LeaderCreated, the default)"
)
INDEX: Final = re.compile(r"[0-9]+")


def _templates_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}


def group_size(obj: Mapping[str, Any]) -> int:
    """spec.leaderWorkerTemplate.size (1 when absent, as the CRD defaults it); at least 1."""
    key = object_key(obj)
    size = pod_count(_templates_of(obj).get("size"), 1, key, SIZE_FIELD, LWS_KIND.kind)
    if size < 1:
        raise InvalidJobError(key, SIZE_FIELD, f"{size}: {MSG_SIZE}", LWS_KIND.kind)
    return size


def roles(obj: Mapping[str, Any]) -> dict[str, str]:
    """Template field -> the pod set its pods are counted in (Kueue's podSets())."""
    if isinstance(_templates_of(obj).get(LEADER_TEMPLATE), Mapping):
        return {LEADER_TEMPLATE: ROLE_LEADER, WORKER_TEMPLATE: ROLE_WORKER}
    return {WORKER_TEMPLATE: DEFAULT_POD_SET}


def quota_of(obj: Mapping[str, Any]) -> str:
    value = (meta(obj).get("labels") or {}).get(QUOTA_NAME_LABEL)
    return value if isinstance(value, str) else ""


def template_patch(obj: Mapping[str, Any]) -> WorkloadPatch | None:
    """The merge patch marking both templates (Kueue's Default()), or None when the LWS
    names no quota or is marked already. Raises InvalidJobError for a bad size."""
    quota = quota_of(obj)
    if not quota:
        return None
    size = str(group_size(obj))
    body: dict[str, Any] = {}
    for field, role in roles(obj).items():
        template = _templates_of(obj).get(field) or {}
        have = template.get("metadata") or {}
        want_labels = {QUOTA_NAME_LABEL: quota}
        want_notes = {
            POD_GROUP_SERVING_ANNOTATION: "true",
            POD_GROUP_TOTAL_COUNT_ANNOTATION: size,
            POD_GROUP_ROLE_ANNOTATION: role,
        }
        labels = {k: v for k, v in want_labels.items() if (have.get("labels") or {}).get(k) != v}
        notes = {
            k: v for k, v in want_notes.items() if (have.get("annotations") or {}).get(k) != v
        }
        marks: dict[str, Any] = {}
        if labels:
            marks["labels"] = labels
        if notes:
            marks["annotations"] = notes
        if marks:
            body[field] = {"metadata": marks}
    if not body:
        return None
    return WorkloadPatch({"spec": {"leaderWorkerTemplate": body}})


def create_problems(obj: Mapping[str, Any]) -> list[str]:
    """Why a LeaderWorkerSet that names a quota is refused at all (ours: Kueue has no such
    rule, its group's workload is made from the templates before any pod exists)."""
    startup = (obj.get("spec") or {}).get("startupPolicy")
    return [MSG_LEADER_READY] if quota_of(obj) and startup == LEADER_READY else []


def update_problems(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """Why an update is refused (Kueue's ValidateUpdate, and `create_problems`), each naming
    its field; [] when not."""
    problems: list[str] = []
    if quota_of(old) != quota_of(new):
        problems.append(MSG_IMMUTABLE.format(field=QUOTA_LABEL_FIELD))
    if not quota_of(new):
        return problems
    problems += create_problems(new)
    for field in (LEADER_TEMPLATE, WORKER_TEMPLATE):
        path = f"{TEMPLATES_FIELD}.{field}"
        before, after = _templates_of(old).get(field), _templates_of(new).get(field)
        if (before is None) != (after is None):
            problems.append(MSG_IMMUTABLE.format(field=path))
            continue
        old_spec = (before or {}).get("spec") or {}
        new_spec = (after or {}).get("spec") or {}
        changed = shape_changes(spec_shape(new_spec), spec_shape(old_spec), f"{path}.spec")
        problems += [MSG_IMMUTABLE.format(field=p) for p in changed]
    return problems


def group_index(pod: Mapping[str, Any]) -> str | None:
    """The pod's group index: its label, or a leader's name ordinal (<name>-<index>)."""
    labels = meta(pod).get("labels") or {}
    index = labels.get(LWS_GROUP_INDEX_LABEL)
    if isinstance(index, str) and INDEX.fullmatch(index):
        return index
    lws, name = labels.get(LWS_NAME_LABEL), str(meta(pod).get("name") or "")
    if labels.get(LWS_WORKER_INDEX_LABEL) != "0" or not lws or not name.startswith(f"{lws}-"):
        return None
    ordinal = name[len(lws) + 1 :]
    return ordinal if INDEX.fullmatch(ordinal) else None


def leader_group(leader: str) -> str:
    """The pod group of the group whose leader pod is `leader` (<lws>-<group index>)."""
    return label_value(f"{LWS_GROUP_PREFIX}{leader}")


def pod_group(pod: Mapping[str, Any]) -> str | None:
    """The group label a new pod of a marked LWS must get (None: not such a pod, or it has
    its group already, or its group cannot be told: then it is left without, and its unit
    is refused with an event naming the missing label)."""
    m = meta(pod)
    labels = m.get("labels") or {}
    if POD_GROUP_ROLE_ANNOTATION not in (m.get("annotations") or {}):
        return None
    if labels.get(POD_GROUP_NAME_LABEL) or not labels.get(LWS_NAME_LABEL):
        return None
    index = group_index(pod)
    if index is None:
        return None
    return leader_group(f"{labels[LWS_NAME_LABEL]}-{index}")


def group_label_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch ops adding `pod_group(pod)` to a pod being gated; [] when none."""
    group = pod_group(pod)
    if group is None:
        return []
    if isinstance(meta(pod).get("labels"), Mapping):
        key = POD_GROUP_NAME_LABEL.replace("~", "~0").replace("/", "~1")
        return [{"op": "add", "path": f"/metadata/labels/{key}", "value": group}]
    return [{"op": "add", "path": "/metadata/labels", "value": {POD_GROUP_NAME_LABEL: group}}]


def with_group(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod as it is after `group_label_patch` (what the webhook's warnings look at)."""
    group = pod_group(pod)
    if group is None:
        return pod
    m = dict(meta(pod))
    m["labels"] = {**(m.get("labels") or {}), POD_GROUP_NAME_LABEL: group}
    return {**pod, "metadata": m}


def replicas(obj: Mapping[str, Any]) -> int:
    """spec.replicas: how many groups (1 when absent, as the CRD defaults it)."""
    value = (obj.get("spec") or {}).get("replicas")
    return pod_count(value, 1, object_key(obj), "spec.replicas", LWS_KIND.kind)


def group_pods(obj: Mapping[str, Any], group: int) -> list[dict[str, Any]]:
    """Group `group`'s pods as the LWS controller makes them from the templates as our
    webhook marks them, labelled with their group as the pod webhook does (what `simulate`
    queues for a LeaderWorkerSet manifest). Raises InvalidJobError for a bad size."""
    m = meta(obj)
    name, size = str(m.get("name") or ""), group_size(obj)
    patch = template_patch(obj)
    marks = patch.body["spec"]["leaderWorkerTemplate"] if patch is not None else {}
    out: list[dict[str, Any]] = []
    for worker in range(size):
        field = LEADER_TEMPLATE if worker == 0 and len(roles(obj)) == 2 else WORKER_TEMPLATE
        template = _templates_of(obj).get(field) or {}
        have, mark = template.get("metadata") or {}, (marks.get(field) or {}).get("metadata") or {}
        pod: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{name}-{group}" + (f"-{worker}" if worker else ""),
                "namespace": m.get("namespace") or "default",
                "labels": {
                    **(have.get("labels") or {}),
                    **(mark.get("labels") or {}),
                    LWS_NAME_LABEL: name,
                    LWS_GROUP_INDEX_LABEL: str(group),
                    LWS_WORKER_INDEX_LABEL: str(worker),
                },
                "annotations": {
                    **(have.get("annotations") or {}),
                    **(mark.get("annotations") or {}),
                },
            },
            "spec": dict(template.get("spec") or {}),
        }
        group_label = pod_group(pod)
        if group_label is not None:
            pod["metadata"]["labels"][POD_GROUP_NAME_LABEL] = group_label
        out.append(pod)
    return out
