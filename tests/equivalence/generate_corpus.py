"""Record kube-scheduler's filter verdicts on random small snapshots (issue 14, part 4).

    .venv/bin/python -m tests.equivalence.generate_corpus [--seed 14] [--snapshots 6]
                                                          [--out tests/equivalence/corpus]

Run by hand (it starts etcd, kube-apiserver and kube-scheduler; see README.md here). For each
snapshot, on a fresh control plane (tests/controlplane/harness.py) with the cached
kube-scheduler (tests/controlplane/peers.py, never built here):

1. creates the namespaces, the Ready nodes (labels, taints, allocatable) and the existing pods
   (bound with spec.nodeName, so kube-scheduler only counts them);
2. for each probe pod and each node, creates the probe pinned to that node (an extra
   `matchFields metadata.name In [node]` ANDed into every required nodeSelectorTerm) and
   waits until it is bound (accepted) or reported Unschedulable (rejected, message kept);
   deletes it (grace 0) and waits until it is gone, so probes never see each other.

Pinning adds node affinity, which topology spread's default nodeAffinityPolicy (Honor) would
also apply to its domain counts: probes with spread constraints therefore carry no node
selector or required node affinity of their own, and their pinned copies set
`nodeAffinityPolicy: Ignore` (the same domains as Honor for a pod without node affinity).

Output: one JSON file per snapshot (`snapshot-NN.json`): the objects as plain Kubernetes
objects, each probe's verdict per node and kube-scheduler's message, and the versions.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from koordqueue.kube.api import NODE, POD, ApiError, Kind, KubeApi, load_api_client  # noqa: E402

NAMESPACE = Kind("", "v1", "namespaces", "Namespace", namespaced=False)
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
NAMESPACES = {"ns-a": {"team": "a", "env": "prod"}, "ns-b": {"team": "b"}, "ns-c": {}}
APPS = ("web", "db", "cache")
FORMAT = 1
WAIT_S = 30.0


# --------------------------------------------------------------------------- random objects


def _node(rng: random.Random, name: str) -> dict[str, Any]:
    labels = {HOSTNAME: name}
    if rng.random() < 0.85:
        labels[ZONE] = rng.choice(("zone-a", "zone-b", "zone-c"))
    if rng.random() < 0.6:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.7:
        labels["rank"] = str(rng.randint(1, 9))
    taints = []
    for _ in range(rng.choice((0, 0, 0, 1, 1, 2))):
        key = rng.choice(("dedicated", "gpu", "maint"))
        if any(t["key"] == key for t in taints):
            continue
        taint = {"key": key, "effect": rng.choice(("NoSchedule", "NoExecute", "PreferNoSchedule"))}
        value = rng.choice(("a", "b", ""))
        if value:
            taint["value"] = value
        taints.append(taint)
    alloc = {
        "cpu": rng.choice(("2", "4", "8")),
        "memory": rng.choice(("4Gi", "8Gi", "16Gi")),
        "pods": rng.choice(("2", "4", "110", "110")),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints} if taints else {},
        "status": {
            "capacity": alloc,
            "allocatable": alloc,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        },
    }


def _selector(rng: random.Random) -> dict[str, Any]:
    if rng.random() < 0.75:
        return {"matchLabels": {"app": rng.choice(APPS)}}
    return {
        "matchExpressions": [
            {"key": "app", "operator": rng.choice(("In", "NotIn")),
             "values": rng.sample(APPS, rng.randint(1, 2))}
        ]
    }  # fmt: skip


def _pod_term(rng: random.Random) -> dict[str, Any]:
    term: dict[str, Any] = {
        "labelSelector": _selector(rng),
        "topologyKey": rng.choice((ZONE, ZONE, HOSTNAME)),
    }
    roll = rng.random()
    if roll < 0.2:
        term["namespaces"] = rng.sample(sorted(NAMESPACES), rng.randint(1, 2))
    elif roll < 0.35:
        term["namespaceSelector"] = rng.choice(({}, {"matchLabels": {"team": "a"}}))
    return term


def _pod_affinity(rng: random.Random, p_required: float, p_preferred: float) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    for kind in ("podAffinity", "podAntiAffinity"):
        block: dict[str, Any] = {}
        if rng.random() < p_required:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [_pod_term(rng)]
        if rng.random() < p_preferred:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _pod_term(rng)}
            ]
        if block:
            affinity[kind] = block
    return affinity


def _labels(rng: random.Random) -> dict[str, str]:
    labels = {"app": rng.choice(APPS)}
    if rng.random() < 0.5:
        labels["tier"] = rng.choice(("fe", "be"))
    return labels


def _container(rng: random.Random, big: bool) -> dict[str, Any]:
    cpu = rng.choice(("100m", "500m", "1", "2", "3") if big else ("100m", "500m", "1"))
    memory = rng.choice(("128Mi", "1Gi", "2Gi", "6Gi") if big else ("128Mi", "512Mi", "1Gi"))
    return {
        "name": "main",
        "image": "busybox",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    }


def _existing(rng: random.Random, name: str, node: str) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeName": node, "containers": [_container(rng, False)]}
    affinity = _pod_affinity(rng, 0.2, 0.15)
    if affinity:
        spec["affinity"] = affinity
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": rng.choice(sorted(NAMESPACES)),
                     "labels": _labels(rng)},
        "spec": spec,
    }  # fmt: skip


def _requirement(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    key = rng.choice(("disk", "rank", ZONE, "gpu"))
    op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt") if key == "rank"
                    else ("In", "NotIn", "Exists", "DoesNotExist"))  # fmt: skip
    values = {
        "disk": ["ssd", "hdd"], ZONE: ["zone-a", "zone-b", "zone-c"], "gpu": ["true"],
        "rank": [str(i) for i in range(1, 10)],
    }[key]  # fmt: skip
    req: dict[str, Any] = {"key": key, "operator": op}
    if op in ("In", "NotIn"):
        req["values"] = rng.sample(values, rng.randint(1, min(2, len(values))))
    elif op in ("Gt", "Lt"):
        req["values"] = [str(rng.randint(2, 8))]
    return req


def _node_affinity(rng: random.Random, nodes: list[str]) -> dict[str, Any]:
    terms = []
    for _ in range(rng.choice((1, 1, 2))):
        term: dict[str, Any] = {}
        if rng.random() < 0.85:
            term["matchExpressions"] = [_requirement(rng, nodes) for _ in range(rng.randint(1, 2))]
        if rng.random() < 0.25 or not term:
            term["matchFields"] = [
                {"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                 "values": [rng.choice(nodes)]}
            ]  # fmt: skip
        terms.append(term)
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}


TOLERATIONS = (
    {"key": "dedicated", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
    {"key": "dedicated", "operator": "Exists"},
    {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "gpu", "operator": "Equal", "value": "b"},
    {"key": "maint", "operator": "Exists", "effect": "NoExecute"},
    {"key": "maint", "operator": "Equal", "value": "a", "effect": "NoSchedule"},
    {"operator": "Exists"},
)


def _probe(rng: random.Random, name: str, nodes: list[str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [_container(rng, True)]}
    affinity: dict[str, Any] = {}
    spread = rng.random() < 0.3
    if spread:
        constraints = []
        for key in rng.sample((ZONE, HOSTNAME), rng.randint(1, 2)):
            c: dict[str, Any] = {
                "maxSkew": rng.choice((1, 1, 2)),
                "topologyKey": key,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": _selector(rng),
            }
            if rng.random() < 0.3:
                c["minDomains"] = rng.choice((2, 3, 4))
            if rng.random() < 0.2:
                c["nodeTaintsPolicy"] = "Honor"
            constraints.append(c)
        spec["topologySpreadConstraints"] = constraints
    else:
        if rng.random() < 0.2:
            spec["nodeSelector"] = rng.choice(
                ({"disk": "ssd"}, {ZONE: "zone-a"}, {"disk": "hdd", ZONE: "zone-b"})
            )
        if rng.random() < 0.35:
            affinity["nodeAffinity"] = _node_affinity(rng, nodes)
    if rng.random() < 0.15:
        affinity.setdefault("nodeAffinity", {})[
            "preferredDuringSchedulingIgnoredDuringExecution"
        ] = [{"weight": 10, "preference": {"matchExpressions": [_requirement(rng, nodes)]}}]
    affinity.update(_pod_affinity(rng, 0.3, 0.15))
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.5:
        spec["tolerations"] = rng.sample(TOLERATIONS, rng.randint(1, 2))
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": rng.choice(("ns-a", "ns-a", "ns-b")),
                     "labels": _labels(rng)},
        "spec": spec,
    }  # fmt: skip


def make_snapshot(rng: random.Random, probes: int) -> dict[str, Any]:
    names = [f"n{i}" for i in range(rng.randint(3, 8))]
    nodes = [_node(rng, n) for n in names]
    existing = []
    for node in nodes:
        limit = int(node["status"]["allocatable"]["pods"])
        for _ in range(min(limit, rng.choice((0, 1, 2, 2, 3, 4)))):
            existing.append(_existing(rng, f"e{len(existing)}", node["metadata"]["name"]))
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n, "labels": labels}}
        for n, labels in NAMESPACES.items()
    ]
    return {
        "namespaces": namespaces,
        "nodes": nodes,
        "pods": existing,
        "probes": [{"pod": _probe(rng, f"p{i}", names)} for i in range(probes)],
    }


# --------------------------------------------------------------------------- pinning


def pinned(probe: dict[str, Any], node: str) -> dict[str, Any]:
    """The probe restricted to `node`: the field requirement ANDed into every term."""
    pod = copy.deepcopy(probe)
    pod["metadata"]["name"] = f"{probe['metadata']['name']}-{node}"
    field = {"key": "metadata.name", "operator": "In", "values": [node]}
    spec = pod["spec"]
    node_affinity = spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    for term in terms:
        term["matchFields"] = [*(term.get("matchFields") or []), field]
    required["nodeSelectorTerms"] = terms
    for constraint in spec.get("topologySpreadConstraints") or []:
        assert not spec.get("nodeSelector"), "spread probes carry no node affinity"
        constraint["nodeAffinityPolicy"] = "Ignore"
    return pod


# --------------------------------------------------------------------------- the real thing


def _unschedulable(pod: dict[str, Any]) -> str | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        scheduled = (cond.get("type"), cond.get("status"), cond.get("reason"))
        if scheduled == ("PodScheduled", "False", "Unschedulable"):
            return str(cond.get("message") or "")
    return None


def verdict(api: KubeApi, pod: dict[str, Any]) -> tuple[bool, str]:
    """Create, wait for bound or Unschedulable, delete (grace 0) and wait until gone."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    api.create(POD, pod, ns)
    deadline = time.monotonic() + WAIT_S
    result: tuple[bool, str] | None = None
    while result is None:
        got = api.get(POD, name, ns) or {}
        if (got.get("spec") or {}).get("nodeName"):
            result = (True, "")
        elif (message := _unschedulable(got)) is not None:
            result = (False, message)
        elif time.monotonic() > deadline:
            raise SystemExit(f"{ns}/{name}: neither bound nor unschedulable after {WAIT_S}s")
        else:
            time.sleep(0.03)
    api.request("DELETE", POD.path(ns, name), body={"gracePeriodSeconds": 0})
    while api.get(POD, name, ns) is not None:
        time.sleep(0.03)
    time.sleep(0.1)  # let kube-scheduler's informer see the deletion too
    return result


def apply_snapshot(api: KubeApi, snap: dict[str, Any]) -> None:
    for ns in snap["namespaces"]:
        api.create(NAMESPACE, ns)
    for node in snap["nodes"]:
        name = node["metadata"]["name"]
        api.create(NODE, {k: v for k, v in node.items() if k != "status"})
        api.merge_patch(NODE, name, {"status": node["status"]}, subresource="status")
        # TaintNodesByCondition tainted the new node not-ready; put back exactly ours
        api.merge_patch(NODE, name, {"spec": {"taints": node["spec"].get("taints")}})
    for pod in snap["pods"]:
        api.create(POD, pod, pod["metadata"]["namespace"])


def scheduler_config(kubeconfig: str) -> dict[str, Any]:
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": 500, "burst": 500},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}],
    }


def record(snap: dict[str, Any], log_dir: Path) -> None:
    from bench.bench_peers import peer_process
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane

    binary = peers.ensure_peer(peers.KUBE_SCHEDULER).binary
    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        apply_snapshot(api, snap)
        config = log_dir / "kube-scheduler.yaml"
        config.write_text(json.dumps(scheduler_config(str(cp.kubeconfig))))
        argv = [str(binary), f"--config={config}", "--secure-port=0", "--v=1"]
        with peer_process(argv, str(log_dir / "kube-scheduler.log"), startup_s=3.0):
            for probe in snap["probes"]:
                verdicts: dict[str, bool] = {}
                messages: dict[str, str] = {}
                for node in snap["nodes"]:
                    name = node["metadata"]["name"]
                    ok, message = verdict(api, pinned(probe["pod"], name))
                    verdicts[name] = ok
                    if message:
                        messages[name] = message
                probe["kube_scheduler"] = {"accepts": verdicts, "messages": messages}
                accepted = sorted(n for n, ok in verdicts.items() if ok)
                print(f"  {probe['pod']['metadata']['name']}: {accepted}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--snapshots", type=int, default=7)
    ap.add_argument("--probes", type=int, default=16, help="probe pods per snapshot")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "corpus")
    args = ap.parse_args(argv)
    from tests.controlplane import versions

    args.out.mkdir(parents=True, exist_ok=True)
    for i in range(args.snapshots):
        rng = random.Random(f"{args.seed}-{i}")
        snap = make_snapshot(rng, args.probes)
        t0 = time.monotonic()
        print(f"snapshot {i}: {len(snap['nodes'])} nodes, {len(snap['pods'])} pods", flush=True)
        with tempfile.TemporaryDirectory(prefix="equivalence-") as tmp:
            try:
                record(snap, Path(tmp))
            except BaseException:
                log = Path(tmp) / "kube-scheduler.log"
                if log.exists():
                    print(log.read_text()[-3000:], file=sys.stderr)
                raise
        doc = {
            "format": FORMAT,
            "generator": "tests/equivalence/generate_corpus.py",
            "seed": f"{args.seed}-{i}",
            "kube_scheduler": versions.KUBERNETES_VERSION,
            **snap,
        }
        (args.out / f"snapshot-{i:02d}.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"snapshot {i}: {time.monotonic() - t0:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except ApiError as exc:
        raise SystemExit(f"API error: {exc}") from exc
