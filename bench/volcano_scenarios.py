"""Scenarios run once through vc-scheduler and once through `koordqueue schedule` (issue 24),
and the comparison of what each left on the API server. Pure: no processes, no API.

A scenario is nodes, queues, PriorityClasses and gangs (a PodGroup and its pods), created in
stages: stage 0 before the scheduler starts (so creation order cannot decide what priority
should), each later stage once the previous one has settled and its bound pods have been
marked Running (no kubelet runs: reclaim and preempt pick their victims among Running pods).
PodGroups get `minResources` = minMember x the pod's request, as Volcano's job controller
sets them (neither scheduler runs a controller here).

The outcome compared: bound pods per queue and per job, pods evicted (deleted) per job, and
each PodGroup's phase and conditions (type, status, reason: the messages are each
scheduler's own wording). Neither scheduler clears a condition that stopped holding, so on
the gang shapes, whose pods arrive while the scheduler runs, whether a gang also keeps an old
`Unschedulable` depends only on whether a session saw it half created: there only the current
condition (the one that changed last) is compared.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

SCHEDULER_NAME = "volcano"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
TASK_SPEC = "volcano.sh/task-spec"
NAMESPACE = "vcbench"

GANG_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
  - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
      - name: conformance
  - plugins:
      - name: overcommit
      - name: drf
        enablePreemptable: false
      - name: predicates
      - name: proportion
      - name: nodeorder
      - name: binpack
"""
"""benchmark/testcases/gang/config/scheduler-config.yaml of the Volcano module, its
volcano-scheduler.conf as written there."""


def conf(actions: str, *, overcommit: bool = True) -> str:
    """Volcano's default tiers (installer's volcano-scheduler.conf) with these actions."""
    first = "      - name: overcommit\n" if overcommit else ""
    return (
        f'actions: "{actions}"\n'
        "tiers:\n  - plugins:\n      - name: priority\n      - name: gang\n"
        "      - name: conformance\n  - plugins:\n" + first
        + "      - name: drf\n      - name: predicates\n      - name: proportion\n"
        "      - name: nodeorder\n"
    )


@dataclass(frozen=True)
class Queue:
    name: str
    weight: int = 1
    capability: Mapping[str, str] | None = None
    reclaimable: bool = True
    state: str = "Open"
    node_groups: tuple[str, ...] = ()
    """nodegroup: the groups the queue's pods must run in (spec.affinity's required node
    group affinity)."""

    def body(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"weight": self.weight, "reclaimable": self.reclaimable}
        if self.capability:
            spec["capability"] = dict(self.capability)
        if self.node_groups:
            spec["affinity"] = {"nodeGroupAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": list(self.node_groups)}}
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                "metadata": {"name": self.name}, "spec": spec}


@dataclass(frozen=True)
class Gang:
    name: str
    queue: str
    replicas: int
    min_member: int
    cpu: int = 1
    """cpu per pod (whole cores) and memory per pod in GiB."""
    memory_gi: int = 1
    priority_class: str = ""
    stage: int = 0
    selector: Mapping[str, str] | None = None
    network_topology: Mapping[str, Any] | None = None
    """The PodGroup's spec.networkTopology (network-topology-aware)."""
    pod_annotations: Mapping[str, str] | None = None
    """Further annotations on each pod (numa-aware's policy)."""
    limits: Mapping[str, str] | None = None
    """Further limits of each pod's container (deviceshare's GPU memory)."""
    tasks: tuple[str, ...] = ()
    """Task names, pod i taking tasks[i % n] as its `volcano.sh/task-spec` annotation."""
    group_annotations: Mapping[str, str] | None = None
    """Annotations of the PodGroup (task-topology's affinity)."""
    pod_labels: Mapping[str, str] | None = None
    """Further labels on each pod (deviceshare's GPU exclusivity rules)."""

    def group(self, namespace: str = NAMESPACE) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "minMember": self.min_member, "queue": self.queue,
            "minResources": {"cpu": str(self.cpu * self.min_member),
                             "memory": f"{self.memory_gi * self.min_member}Gi"},
        }
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.network_topology:
            spec["networkTopology"] = dict(self.network_topology)
        metadata: dict[str, Any] = {"name": self.name, "namespace": namespace}
        if self.group_annotations:
            metadata["annotations"] = dict(self.group_annotations)
        return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                "metadata": metadata, "spec": spec}

    def pods(self, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        requests = {"cpu": str(self.cpu), "memory": f"{self.memory_gi}Gi"}
        limits = {**requests, **(self.limits or {})}
        spec: dict[str, Any] = {
            "schedulerName": SCHEDULER_NAME,
            "containers": [{"name": "main", "image": "busybox",
                            "resources": {"requests": requests, "limits": limits}}],
        }
        if self.priority_class:
            spec["priorityClassName"] = self.priority_class
        if self.selector:
            spec["nodeSelector"] = dict(self.selector)
        return [
            {"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{self.name}-{i:04d}", "namespace": namespace,
                          "labels": {"bench-job": self.name, **(self.pod_labels or {})},
                          "annotations": {GROUP_ANNOTATION: self.name,
                                          **(self.pod_annotations or {}),
                                          **({TASK_SPEC: self.tasks[i % len(self.tasks)]}
                                             if self.tasks else {})}},
             "spec": spec}
            for i in range(self.replicas)
        ]


@dataclass(frozen=True)
class Scenario:
    name: str
    conf: str
    nodes: int
    node_cpu: int
    node_memory_gi: int
    queues: tuple[Queue, ...]
    gangs: tuple[Gang, ...]
    classes: Mapping[str, int] = field(default_factory=dict)
    spaced: bool = False
    """Create a stage's PodGroups a second apart, in order: both schedulers order jobs of
    equal priority by creation time (whole seconds), then by uid, random per run."""
    gang_shape: bool = False
    """Volcano's gang benchmark shape: pods are created in a burst while the scheduler runs
    (latency, CPU per pod and nodes used are measured), not in stages."""
    node_labels: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    """Node index -> labels (node groups, zones)."""
    group_label: str = ""
    """A node label whose values, per job, the outcome compares (where its pods went)."""
    node_capacity: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    """Node index -> further capacity (and allocatable), e.g. Volcano's GPU resources."""
    node_annotations: Mapping[int, Mapping[str, str]] = field(default_factory=dict)
    """Node index -> annotations, e.g. the vGPU device plugin's register."""
    objects: tuple[Mapping[str, Any], ...] = ()
    """Further objects created with the cluster (in the scenario's namespace when
    namespaced), e.g. a ResourceQuota with the status the quota controller would write."""
    volcano_from: str = ""
    """The Volcano release whose actions the conf names, when newer than the pinned peer
    (v1.14.1): run only by name, against such a peer (bench/README.md, "v1.15 peer")."""

    @property
    def stages(self) -> int:
        return 1 + max((g.stage for g in self.gangs), default=0)

    @property
    def pods(self) -> int:
        return sum(g.replicas for g in self.gangs)


def gang_shape(name: str, jobs: int, replicas: int, nodes: int) -> Scenario:
    """Volcano's gang benchmark (benchmark/README: 32 cpu / 256Gi nodes, 1 cpu / 1Gi pods,
    minAvailable = replicas), in the `default` queue."""
    gangs = tuple(Gang(f"gang-{j:03d}", "default", replicas, replicas) for j in range(jobs))
    return Scenario(name, GANG_CONF, nodes, 32, 256, (Queue("default"),), gangs,
                    gang_shape=True)


GROUP_LABEL = "volcano.sh/nodegroup-name"


def with_plugin(actions: str, plugin: str, arguments: str = "") -> str:
    """Volcano's default tiers with these actions and one more plugin in the second tier."""
    return conf(actions) + f"      - name: {plugin}\n" + arguments


RESOURCE_QUOTA = {
    "apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "bench-rq"},
    "spec": {"hard": {"cpu": "5"}, "scopes": ["Terminating"]},
    "status": {"hard": {"cpu": "5"}, "used": {"cpu": "0"}},
}
"""5 cpu for the namespace's PodGroups. Scoped to Terminating pods (ours have no deadline)
so the API server's own quota admission charges none of the scenario's pods: what is
compared is the schedulers' enqueue check, which reads status.hard and status.used."""

SWITCH_LABEL = "bench-switch"


def hypernode(name: str, tier: int, members: tuple[str, ...], kind: str) -> dict[str, Any]:
    """A HyperNode whose members are nodes or HyperNodes named exactly."""
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
            "metadata": {"name": name},
            "spec": {"tier": tier, "members": [
                {"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members]}}


SWITCHES = (
    hypernode("s0", 1, ("node0000", "node0001"), "Node"),
    hypernode("s1", 1, ("node0002", "node0003", "node0004"), "Node"),
    hypernode("spine", 2, ("s0", "s1"), "HyperNode"),
)
"""Two leaf switches (2 and 3 nodes) under one spine."""

SLA_CONF = """\
actions: "enqueue, allocate"
tiers:
  - plugins:
      - name: priority
      - name: gang
      - name: conformance
      - name: sla
  - plugins:
      - name: overcommit
      - name: drf
      - name: predicates
      - name: proportion
      - name: nodeorder
"""
"""sla in the first tier, as Volcano's sla guide puts it: its enqueue permit is then asked
before overcommit's refusal."""
NODE_LABEL = "bench-node"
VGPU_NODE = {"volcano.sh/vgpu-number": "10", "volcano.sh/vgpu-memory": "16000",
             "volcano.sh/vgpu-cores": "100"}
"""A node's allocatable vGPU resources as the vgpu device plugin offers one card of 16000."""
VGPU_POD = {"volcano.sh/vgpu-number": "1", "volcano.sh/vgpu-memory": "2000"}
CPU_DETAIL = {str(c): {"numa": c // 4, "socket": c // 4, "core": c // 2} for c in range(8)}


def numatopology(node: str, free: str) -> dict[str, Any]:
    """What Volcano's resource exporter writes for a node whose kubelet runs the static cpu
    manager under single-numa-node: 2 NUMA nodes of 4 cpus, `free` of them allocatable."""
    return {"apiVersion": "nodeinfo.volcano.sh/v1alpha1", "kind": "Numatopology",
            "metadata": {"name": node},
            "spec": {"policies": {"CPUManagerPolicy": "static",
                                  "TopologyManagerPolicy": "single-numa-node"},
                     "numares": {"cpu": {"allocatable": free, "capacity": 8}},
                     "cpuDetail": CPU_DETAIL}}


NOWHERE = {"bench-pool": "nowhere"}
"""A node selector no node matches: the gang can be enqueued but never placed."""

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        gang_shape("gang", 10, 100, 100),
        gang_shape("gang-large", 20, 250, 500),
        # weights 1 : 3 share 8 cpu as 2 : 6 when both ask for all of it
        Scenario("proportion", conf("enqueue, allocate"), 2, 4, 16,
                 (Queue("qa", 1), Queue("qb", 3)),
                 (Gang("qa-job", "qa", 8, 1), Gang("qb-job", "qb", 8, 1))),
        # a queue capped at 3 cpu places 3 of a 6-pod job; the other queue is unaffected
        Scenario("capability", conf("enqueue, allocate"), 2, 4, 16,
                 (Queue("capped", capability={"cpu": "3", "memory": "64Gi"}), Queue("free")),
                 (Gang("c-job", "capped", 6, 1), Gang("f-job", "free", 2, 2))),
        # all-or-nothing: room for 3 of a gang of 4; a gang with fewer pods than minMember;
        # a gang that fits
        Scenario("gang-min-member", conf("enqueue, allocate, backfill"), 1, 4, 16,
                 (Queue("default"),),
                 (Gang("big", "default", 4, 4, cpu=2), Gang("short", "default", 2, 3),
                  Gang("fits", "default", 2, 2))),
        # room for one of two gangs: the higher class wins, though created first is the other
        Scenario("priority", conf("enqueue, allocate, backfill"), 1, 4, 16,
                 (Queue("default"),),
                 (Gang("low", "default", 2, 2, cpu=2, priority_class="bench-low"),
                  Gang("high", "default", 2, 2, cpu=2, priority_class="bench-high")),
                 classes={"bench-low": 10, "bench-high": 1000}),
        # 8 cpu x 1.2 = 9.6 cpu of minResources enqueue: two gangs of 4 cpu, not a third
        # (created a second apart: equal creation times fall back to uid order, a coin toss)
        Scenario("overcommit", conf("enqueue, allocate"), 2, 4, 16, (Queue("default"),),
                 tuple(Gang(f"oc-{i}", "default", 2, 2, cpu=2, selector=NOWHERE)
                       for i in range(3)), spaced=True),
        # a Closed queue places nothing; an Open one beside it does
        Scenario("closed-queue", conf("enqueue, allocate"), 1, 4, 16,
                 (Queue("shut", state="Closed"), Queue("open")),
                 (Gang("in-shut", "shut", 2, 2), Gang("in-open", "open", 2, 2))),
        # qa fills the cluster, then qb (same weight) arrives: reclaim gives qb its share
        Scenario("reclaim", conf("enqueue, allocate, reclaim"), 2, 4, 16,
                 (Queue("qa"), Queue("qb")),
                 (Gang("qa-job", "qa", 8, 1), Gang("qb-job", "qb", 4, 1, stage=1))),
        # nodegroup: qa must run in g2 (nodes 2, 3), qb in g1 (nodes 0, 1); without the plugin
        # the spread of nodeorder puts each gang on both groups
        Scenario("nodegroup", with_plugin("enqueue, allocate", "nodegroup"), 4, 4, 16,
                 (Queue("qa", node_groups=("g2",)), Queue("qb", node_groups=("g1",))),
                 (Gang("qa-job", "qa", 4, 4), Gang("qb-job", "qb", 4, 4)),
                 node_labels={i: {GROUP_LABEL: "g1" if i < 2 else "g2"} for i in range(4)},
                 group_label=GROUP_LABEL),
        # resourcequota: two 2-cpu gangs run under a 5-cpu quota; a third, arriving once
        # their 4 cpu are charged, is not enqueued (the nodes have 4 cpu free for it)
        Scenario("resourcequota", with_plugin("enqueue, allocate", "resourcequota"), 2, 4, 16,
                 (Queue("default"),),
                 (Gang("rq-0", "default", 2, 2), Gang("rq-1", "default", 2, 2),
                  Gang("rq-2", "default", 2, 2, stage=1)),
                 objects=(RESOURCE_QUOTA,)),
        # network-topology-aware: a 6-pod gang of 2-cpu pods on 4-cpu nodes, hard within one
        # tier-1 switch, fits only s1's three nodes (leastrequested alone would spread six
        # pods over all five nodes, both switches)
        Scenario("network-topology", with_plugin("enqueue, allocate", "network-topology-aware"),
                 5, 4, 16, (Queue("default"),),
                 (Gang("ring", "default", 6, 6, cpu=2,
                       network_topology={"mode": "hard", "highestTierAllowed": 1}),),
                 node_labels={i: {SWITCH_LABEL: "s0" if i < 2 else "s1"} for i in range(5)},
                 group_label=SWITCH_LABEL, objects=SWITCHES),
        # deviceshare: node0 has 4 GPUs of 8000 MiB, node1 2 of 16000 (32000 each in all); a
        # pod asking 12000 fits one GPU of node1 only
        Scenario("deviceshare", with_plugin("enqueue, allocate", "deviceshare",
                                            "        arguments:\n"
                                            "          deviceshare.GPUSharingEnable: true\n"),
                 2, 8, 16, (Queue("default"),),
                 (Gang("gpu", "default", 1, 1, limits={"volcano.sh/gpu-memory": "12000"}),),
                 node_labels={i: {NODE_LABEL: f"node{i}"} for i in range(2)},
                 node_capacity={0: {"volcano.sh/gpu-memory": "32000",
                                    "volcano.sh/gpu-number": "4"},
                                1: {"volcano.sh/gpu-memory": "32000",
                                    "volcano.sh/gpu-number": "2"}},
                 group_label=NODE_LABEL),
        # deviceshare's vGPUs under its GPU exclusivity rules (Volcano v1.15: run by name
        # against a v1.15 peer): node0 (8 cpu) and node1 (2 cpu) have one vGPU card each.
        # nodeorder alone puts both train pods on node0 (more cpu free); the rule (pods
        # labelled app=train never share a card) sends the second to node1. Then a third train
        # pod finds both cards held by its rule (stays Pending), a pod of no rule shares node0's
        Scenario("vgpu-exclusive", with_plugin("enqueue, allocate", "deviceshare",
                                               "        arguments:\n"
                                               "          deviceshare.VGPUEnable: true\n"
                                               "          deviceshare.GPUExclusiveRules:\n"
                                               "            - app: train\n"),
                 2, 8, 16, (Queue("default"),),
                 (Gang("train", "default", 2, 2, limits=VGPU_POD, pod_labels={"app": "train"}),
                  Gang("late", "default", 1, 1, limits=VGPU_POD, pod_labels={"app": "train"},
                       stage=1),
                  Gang("free", "default", 1, 1, limits=VGPU_POD, stage=1)),
                 node_labels={i: {NODE_LABEL: f"node{i}"} for i in range(2)},
                 node_capacity={0: VGPU_NODE, 1: {"cpu": "2", **VGPU_NODE}},
                 node_annotations={i: {"volcano.sh/node-vgpu-register":
                                       f"GPU-node{i}-a,10,16000,NVIDIA-A100,true,hami-core:"}
                                   for i in range(2)},
                 group_label=NODE_LABEL, volcano_from="v1.15.1"),
        # numa-aware: node0 has 3 free cpus on each NUMA node, node1 4; a 4-cpu Guaranteed
        # pod under single-numa-node fits node1 only (node0 has 6 free in all)
        Scenario("numa-aware", with_plugin("enqueue, allocate", "numa-aware"),
                 2, 8, 16, (Queue("default"),),
                 (Gang("numa", "default", 1, 1, cpu=4, pod_annotations={
                     "volcano.sh/numa-topology-policy": "single-numa-node"}),),
                 node_labels={i: {NODE_LABEL: f"node{i}"} for i in range(2)},
                 group_label=NODE_LABEL,
                 objects=(numatopology("node0000", "1-3,5-7"), numatopology("node0001", "0-7"))),
        # task-topology: ps and worker pods (2 cpu each) of one job are affine; only node1
        # (8 cpu) takes all four, node0 has 6 (leastrequested alone spreads them over both)
        Scenario("task-topology", with_plugin("enqueue, allocate", "task-topology"),
                 2, 8, 16, (Queue("default"),),
                 (Gang("tf", "default", 4, 4, cpu=2, tasks=("ps", "worker"),
                       group_annotations={"volcano.sh/task-topology-affinity": "ps,worker"}),),
                 node_labels={i: {NODE_LABEL: f"node{i}"} for i in range(2)},
                 node_capacity={0: {"cpu": "6"}}, group_label=NODE_LABEL),
        # tdm: node1 is a revocable node of zone rz1, open all day; the pod allowed on revocable
        # nodes goes there (tdm scores it 100), the ordinary one to node0 (without the plugin
        # the first, created first, takes node0 by name and the second node1)
        Scenario("tdm", with_plugin("enqueue, allocate", "tdm",
                                    "        arguments:\n"
                                    "          tdm.revocable-zone.rz1: \"0:00-0:00\"\n"),
                 2, 4, 16, (Queue("default"),),
                 (Gang("lent", "default", 1, 1, cpu=2,
                       pod_annotations={"volcano.sh/revocable-zone": "*"}),
                  Gang("plain", "default", 1, 1, cpu=2)),
                 node_labels={0: {NODE_LABEL: "node0"},
                              1: {NODE_LABEL: "node1", "volcano.sh/revocable-zone": "rz1"}},
                 group_label=NODE_LABEL, spaced=True),
        # sla: a 4-cpu job fills the one node; a later 2-cpu job is over overcommit's 4.8 cpu
        # and stays Pending, unless it has waited its volcano.sh/sla-waiting-time (1s): then
        # sla enqueues it (Inqueue, nothing placed)
        Scenario("sla", SLA_CONF, 1, 4, 16, (Queue("default"),),
                 (Gang("big", "default", 1, 1, cpu=4),
                  Gang("due", "default", 1, 1, cpu=2, stage=1,
                       group_annotations={"volcano.sh/sla-waiting-time": "1s"}),
                  Gang("waits", "default", 1, 1, cpu=2, stage=1))),
        # a low-priority job fills the queue, then a high-priority gang arrives: preempt
        Scenario("preempt", conf("enqueue, allocate, preempt", overcommit=False), 2, 4, 16,
                 (Queue("default"),),
                 (Gang("low-job", "default", 8, 1, priority_class="bench-low"),
                  Gang("high-job", "default", 4, 4, priority_class="bench-high", stage=1)),
                 classes={"bench-low": 10, "bench-high": 1000}),
    )
}
# reclaim's and preempt's shapes through Volcano v1.15's gangreclaim and gangpreempt (whole
# gangs as victims, in domains picked from the network topology's gradients; one domain
# without one): the same clusters, another action
SCENARIOS["gangreclaim"] = replace(
    SCENARIOS["reclaim"], name="gangreclaim", conf=conf("enqueue, allocate, gangreclaim"),
    volcano_from="v1.15.1")
SCENARIOS["gangpreempt"] = replace(
    SCENARIOS["preempt"], name="gangpreempt",
    conf=conf("enqueue, allocate, gangpreempt", overcommit=False), volcano_from="v1.15.1")
DIFFERENTIAL = [name for name, s in SCENARIOS.items() if not s.gang_shape and not s.volcano_from]
NEWER_VOLCANO = [name for name, s in SCENARIOS.items() if s.volcano_from]
"""Scenarios the pinned peer cannot run (their actions came later): by name only."""
GANG_SHAPES = [name for name, s in SCENARIOS.items() if s.gang_shape]


# --------------------------------------------------------------------------- outcomes


@dataclass(frozen=True)
class Outcome:
    """What one scheduler left on the API server at the end of a scenario."""

    bound_by_queue: Mapping[str, int]
    bound_by_job: Mapping[str, int]
    evicted_by_job: Mapping[str, int]
    phases: Mapping[str, str]
    conditions: Mapping[str, tuple[tuple[str, str, str], ...]]
    """PodGroup -> its conditions' (type, status, reason), sorted."""
    nodes_used: int = 0
    current: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    """PodGroup -> its current condition: the latest lastTransitionTime, `Scheduled` on a
    tie (it only ever follows an `Unschedulable`)."""
    groups_by_job: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Job -> the sorted values of the scenario's `group_label` on the nodes it runs on."""
    gpus_by_job: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """Job -> its bound pods' GPUs, "node/GPU" sorted: each `volcano.sh/vgpu-ids-new` uuid,
    each `volcano.sh/gpu-index` id (jobs with none left out)."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "bound_by_queue": dict(self.bound_by_queue), "bound_by_job": dict(self.bound_by_job),
            "evicted_by_job": dict(self.evicted_by_job), "phases": dict(self.phases),
            "conditions": {k: [list(c) for c in v] for k, v in self.conditions.items()},
            "nodes_used": self.nodes_used,
            "current": {k: list(v) for k, v in self.current.items()},
            "groups_by_job": {k: list(v) for k, v in self.groups_by_job.items()},
            "gpus_by_job": {k: list(v) for k, v in self.gpus_by_job.items()},
        }


def outcome(
    scenario: Scenario, pods: Iterable[Mapping[str, Any]], groups: Iterable[Mapping[str, Any]],
    node_labels: Mapping[str, Mapping[str, str]] | None = None,
) -> Outcome:
    """The outcome from the pods and PodGroups listed at the end (a pod created and no longer
    listed was evicted: nothing else deletes pods here); `node_labels` (node name -> labels)
    gives each job's node groups when the scenario names a `group_label`."""
    queue_of = {g.name: g.queue for g in scenario.gangs}
    created: Counter[str] = Counter({g.name: g.replicas for g in scenario.gangs})
    listed: Counter[str] = Counter()
    by_job: Counter[str] = Counter()
    by_queue: Counter[str] = Counter()
    nodes: set[str] = set()
    where: dict[str, set[str]] = {}
    gpus: dict[str, list[str]] = {}
    for pod in pods:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        job = str(annotations.get(GROUP_ANNOTATION))
        listed[job] += 1
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            held = _gpus(annotations)
            if held:
                gpus.setdefault(job, []).extend(f"{node}/{g}" for g in held)
            by_job[job] += 1
            by_queue[queue_of.get(job, "?")] += 1
            nodes.add(str(node))
            if scenario.group_label:
                labels = (node_labels or {}).get(str(node)) or {}
                where.setdefault(job, set()).add(labels.get(scenario.group_label, "<none>"))
    phases: dict[str, str] = {}
    conditions: dict[str, tuple[tuple[str, str, str], ...]] = {}
    current: dict[str, tuple[str, str, str]] = {}
    for group in groups:
        name = str((group.get("metadata") or {}).get("name"))
        status = group.get("status") or {}
        phases[name] = str(status.get("phase") or "")
        raw = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
        conditions[name] = tuple(sorted(
            (str(c.get("type")), str(c.get("status")), str(c.get("reason") or "")) for c in raw
        ))
        if raw:
            last = max(raw, key=lambda c: (str(c.get("lastTransitionTime") or ""),
                                           c.get("type") == "Scheduled"))
            current[name] = (str(last.get("type")), str(last.get("status")),
                             str(last.get("reason") or ""))
    evicted = {job: n - listed[job] for job, n in created.items() if n > listed[job]}
    return Outcome(dict(by_queue), dict(by_job), evicted, phases, conditions, len(nodes),
                   current, {job: tuple(sorted(v)) for job, v in sorted(where.items())},
                   {job: tuple(sorted(v)) for job, v in sorted(gpus.items())})


def _gpus(annotations: Mapping[str, Any]) -> list[str]:
    """The GPUs a pod's deviceshare annotations name: vGPU uuids, else gpushare ids."""
    ids = str(annotations.get("volcano.sh/vgpu-ids-new") or "")
    uuids = [e.split(",")[0] for c in ids.split(";") for e in c.split(":") if "," in e]
    if uuids:
        return uuids
    index = str(annotations.get("volcano.sh/gpu-index") or "")
    return [i for i in index.split(",") if i]


def differences(ours: Outcome, peer: Outcome, *, nodes_tolerance: float = 0.15,
                compare_nodes: bool = False, current_only: bool = False) -> list[str]:
    """Where our outcome differs from Volcano's, one line each (empty: they match).

    Counts absent on one side are 0 there. Nodes used (gang shapes only) may differ by
    `nodes_tolerance` of Volcano's count. `current_only`: compare each PodGroup's current
    condition, not all it keeps (gang shapes)."""
    out: list[str] = []

    def counts(what: str, a: Mapping[str, int], b: Mapping[str, int]) -> None:
        for key in sorted(set(a) | set(b)):
            if a.get(key, 0) != b.get(key, 0):
                out.append(f"{what} {key}: ours {a.get(key, 0)}, volcano {b.get(key, 0)}")

    counts("bound in queue", ours.bound_by_queue, peer.bound_by_queue)
    counts("bound in job", ours.bound_by_job, peer.bound_by_job)
    counts("evicted from job", ours.evicted_by_job, peer.evicted_by_job)
    for job in sorted(set(ours.groups_by_job) | set(peer.groups_by_job)):
        a_groups, b_groups = ours.groups_by_job.get(job, ()), peer.groups_by_job.get(job, ())
        if a_groups != b_groups:
            out.append(f"node groups of {job}: ours {list(a_groups)}, volcano {list(b_groups)}")
    for job in sorted(set(ours.gpus_by_job) | set(peer.gpus_by_job)):
        a_gpus, b_gpus = ours.gpus_by_job.get(job, ()), peer.gpus_by_job.get(job, ())
        if a_gpus != b_gpus:
            out.append(f"GPUs of {job}: ours {list(a_gpus)}, volcano {list(b_gpus)}")
    for name in sorted(set(ours.phases) | set(peer.phases)):
        a, b = ours.phases.get(name, "<none>"), peer.phases.get(name, "<none>")
        if a != b:
            out.append(f"phase of {name}: ours {a or '<unset>'}, volcano {b or '<unset>'}")
        if current_only:
            now_a, now_b = ours.current.get(name), peer.current.get(name)
            if now_a != now_b:
                out.append(f"current condition of {name}: ours {now_a}, volcano {now_b}")
            continue
        ca, cb = ours.conditions.get(name, ()), peer.conditions.get(name, ())
        if ca != cb:
            out.append(f"conditions of {name}: ours {list(ca)}, volcano {list(cb)}")
    if compare_nodes and abs(ours.nodes_used - peer.nodes_used) > nodes_tolerance * max(
        peer.nodes_used, 1
    ):
        out.append(f"nodes used: ours {ours.nodes_used}, volcano {peer.nodes_used} "
                   f"(more than {nodes_tolerance:.0%} apart)")
    return out
