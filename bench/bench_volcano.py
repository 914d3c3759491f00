"""koordqueue beside the real vc-scheduler, on Volcano's own CRDs and configuration (issue 24).

    python bench/bench_peers.py --what volcano [--volcano-scenarios gang,preempt,...]

Each scenario (bench/volcano_scenarios.py) runs twice, each time on a fresh etcd +
kube-apiserver with every CRD of Volcano's module zip installed (config/crd/volcano/bases:
podgroups without a status subresource): once through vc-scheduler (tests/controlplane/peers.py,
volcano.sh/volcano at the pinned tag, `--scheduler-conf` the scenario's configuration, leader
election off, client qps = burst = 5000), once through `koordqueue schedule --scheduler-conf`
with the same file. Queues get `status.state` (Open, or Closed) as Volcano's queue controller
would write it; neither scheduler runs a controller.

- Differential scenarios: stage 0 exists before the scheduler starts; the run then waits until
  nothing has changed for `--settle-s`, creates the next stage, and so on. A fake kubelet
  marks bound pods Running and finishes deleted ones (force delete), so evictions free room.
  Compared: bound pods per queue and job, evictions per job, PodGroup phases and conditions.
- Gang shapes (Volcano's benchmark: 10 x 100 on 100 nodes; 20 x 250 on 500): PodGroups first,
  then the pods in one burst while the scheduler runs (bench/burst.py's watch): creation ->
  bind p50/p99, scheduler CPU per pod (/proc), and nodes used (target: within 15 % of
  Volcano's; p99 and CPU per pod at or below).
"""

from __future__ import annotations

import argparse
import json
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from bench.bench_scheduler import make_node
from bench.burst import component, run_burst
from bench.volcano_scenarios import (
    DIFFERENTIAL,
    GANG_SHAPES,
    NAMESPACE,
    SCENARIOS,
    Outcome,
    Queue,
    Scenario,
    differences,
    outcome,
)
from koordqueue.domain.quantity import parse_nanos
from koordqueue.kube.api import (
    HYPER_NODE,
    NODE,
    NUMATOPOLOGY,
    POD,
    POD_GROUP,
    PRIORITY_CLASS,
    RESOURCE_QUOTA,
    VOLCANO_QUEUE,
    KubeApi,
    load_api_client,
)
from koordqueue.kube.api import NAMESPACE as NAMESPACE_KIND

OBJECT_KINDS = {"ResourceQuota": RESOURCE_QUOTA, "HyperNode": HYPER_NODE,
                "Numatopology": NUMATOPOLOGY}
"""What a scenario's `objects` may hold."""
PEER_QPS = 5000
SPACING_S = 1.1
DEVICE_WARMUP_S = 3.0
"""How long a deviceshare scenario lets the scheduler run sessions before touching the nodes
(`touch_nodes`), and then before creating its first pods."""
"""Between a spaced scenario's PodGroups: creation timestamps have whole seconds."""
OURS, PEER = "koordqueue", "vc-scheduler"


def node_body_patch(cpu: int, memory_gi: int) -> dict[str, Any]:
    resources = {"cpu": str(cpu), "memory": f"{memory_gi}Gi", "pods": "110"}
    return {"status": {"capacity": resources, "allocatable": resources}}


def vc_argv(binary: str, kubeconfig: str, conf: Path, health: int, metrics: int) -> list[str]:
    return [
        binary, f"--kubeconfig={kubeconfig}", f"--scheduler-conf={conf}",
        "--leader-elect=false", "--scheduler-name=volcano", "--default-queue=default",
        f"--kube-api-qps={PEER_QPS}", f"--kube-api-burst={PEER_QPS}",
        "--enable-healthz", f"--healthz-address=127.0.0.1:{health}",
        f"--listen-address=127.0.0.1:{metrics}", "--cache-dumper=false", "-v=1",
    ]


# --------------------------------------------------------------------------- the cluster


def prepare(api: KubeApi, scenario: Scenario, clients: int) -> None:
    """Namespace, PriorityClasses, queues (with their state), nodes."""
    api.create(NAMESPACE_KIND, {"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": NAMESPACE}})
    for name, value in scenario.classes.items():
        api.create(PRIORITY_CLASS, {"apiVersion": "scheduling.k8s.io/v1",
                                    "kind": "PriorityClass", "metadata": {"name": name},
                                    "value": value})
    queues = list(scenario.queues)
    if not any(q.name == "default" for q in queues):  # both schedulers want it to exist
        queues.append(Queue("default"))
    for queue in queues:
        api.create(VOLCANO_QUEUE, queue.body())
        api.merge_patch(VOLCANO_QUEUE, queue.name, {"status": {"state": queue.state}},
                        subresource="status")
    patch = node_body_patch(scenario.node_cpu, scenario.node_memory_gi)

    def node(i: int) -> None:
        name = f"node{i:04d}"
        make_node(api, name)
        api.merge_patch(NODE, name, patch, subresource="status")
        if scenario.node_capacity.get(i):
            extra = dict(scenario.node_capacity[i])
            api.merge_patch(NODE, name, {"status": {"capacity": extra, "allocatable": extra}},
                            subresource="status")
        if scenario.node_labels.get(i):
            api.merge_patch(NODE, name, {"metadata": {"labels": dict(scenario.node_labels[i])}})
        if scenario.node_annotations.get(i):
            api.merge_patch(NODE, name, {"metadata": {
                "annotations": dict(scenario.node_annotations[i])}})

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(node, range(scenario.nodes)))
    for obj in scenario.objects:
        create_object(api, obj)


def touch_nodes(api: KubeApi, scenario: Scenario) -> None:
    """Update every node once the scheduler has run a session, as a kubelet's status report
    would. Volcano v1.15 handles the initial node list before its first session builds
    deviceshare, whose switches say which devices the cache gives a node: without a later
    node update no node has GPUs (v1.14 raced the two, so some nodes did)."""
    time.sleep(DEVICE_WARMUP_S)
    for i in range(scenario.nodes):
        api.merge_patch(NODE, f"node{i:04d}", {"metadata": {"annotations": {
            "bench/touched": str(time.time())}}})
    time.sleep(DEVICE_WARMUP_S)


def create_object(api: KubeApi, obj: Mapping[str, Any]) -> None:
    """A scenario's further object, and its status when it has one (written as the
    controller that owns it would: no controller runs here)."""
    kind = OBJECT_KINDS[str(obj["kind"])]
    body = {k: v for k, v in obj.items() if k != "status"}
    namespace = NAMESPACE if kind.namespaced else None
    api.create(kind, body, namespace)
    if "status" in obj:
        api.merge_patch(kind, obj["metadata"]["name"], {"status": obj["status"]},
                        namespace, subresource="status")


def create_stage(api: KubeApi, scenario: Scenario, stage: int, clients: int) -> None:
    gangs = [g for g in scenario.gangs if g.stage == stage]
    for i, gang in enumerate(gangs):
        if scenario.spaced and i:
            time.sleep(SPACING_S)
        api.create(POD_GROUP, gang.group(), NAMESPACE)
    pods = [p for g in gangs for p in g.pods()]
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(lambda body: api.create(POD, body, NAMESPACE), pods))


class FakeKubelet:
    """Marks bound pods Running and finishes deleted ones, every half second; and, standing
    in for the quota controller, writes each scenario ResourceQuota's `status.used` cpu as
    the bound pods' requests (what it would charge them, were the quota not scoped away
    from the API server's admission)."""

    def __init__(self, api: KubeApi, quotas: tuple[str, ...] = ()) -> None:
        self.api = api
        self.quotas = quotas
        self.stop = threading.Event()
        self.changes = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            pods = self.api.list_objects(POD, NAMESPACE)
            for pod in pods:
                meta, spec = pod["metadata"], pod.get("spec") or {}
                if meta.get("deletionTimestamp"):
                    self.api.request("DELETE", POD.path(NAMESPACE, meta["name"]),
                                     query=[("gracePeriodSeconds", "0")])
                    self.changes += 1
                elif spec.get("nodeName") and (pod.get("status") or {}).get("phase") != "Running":
                    self.api.merge_patch(POD, meta["name"], {"status": {"phase": "Running"}},
                                         NAMESPACE, subresource="status")
                    self.changes += 1
            if self.quotas:
                self._charge(pods)

    def _charge(self, pods: list[dict[str, Any]]) -> None:
        """Charge the bound pods of this tick's listing, those being deleted excepted."""
        milli = 0
        for pod in pods:
            if (pod.get("spec") or {}).get("nodeName") and not pod["metadata"].get(
                    "deletionTimestamp"):
                for container in pod["spec"].get("containers") or ():
                    cpu = ((container.get("resources") or {}).get("requests") or {}).get("cpu")
                    milli += parse_nanos(cpu or "0") // 1_000_000
        for name in self.quotas:
            self.api.merge_patch(RESOURCE_QUOTA, name, {"status": {"used": {"cpu": f"{milli}m"}}},
                                 NAMESPACE, subresource="status")


def fingerprint(api: KubeApi) -> tuple[object, ...]:
    """What a settled scenario no longer changes: pods' nodes and phases, PodGroups' status."""
    pods = sorted(
        (p["metadata"]["name"], (p.get("spec") or {}).get("nodeName"),
         (p.get("status") or {}).get("phase"), bool(p["metadata"].get("deletionTimestamp")))
        for p in api.list_objects(POD, NAMESPACE)
    )
    groups = sorted((g["metadata"]["name"], json.dumps(g.get("status"), sort_keys=True))
                    for g in api.list_objects(POD_GROUP, NAMESPACE))
    return (tuple(pods), tuple(groups))


def settle(api: KubeApi, quiet_s: float, timeout_s: float) -> float:
    """Wait until the fingerprint has not moved for `quiet_s`; the seconds it took."""
    t0 = last_change = time.time()
    seen = fingerprint(api)
    while time.time() - last_change < quiet_s and time.time() - t0 < timeout_s:
        time.sleep(0.5)
        now = fingerprint(api)
        if now != seen:
            seen, last_change = now, time.time()
    return round(last_change - t0, 1)


# --------------------------------------------------------------------------- one run


IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")


@contextmanager
def in_cluster(cp: Any, kubectl: Any) -> Iterator[dict[str, str]]:
    """The environment and files of an in-cluster client (a ServiceAccount token, the API
    server's CA, KUBERNETES_SERVICE_HOST/PORT): Volcano's deviceshare builds its own client
    with rest.InClusterConfig and, without one, skips every GPU node ("deviceshare
    initClient failed"), so the peer would not run the plugin at all. The files are removed
    afterwards; refused (RuntimeError) when they exist already."""
    if IN_CLUSTER.exists():
        raise RuntimeError(f"{IN_CLUSTER} exists: not overwriting another client's identity")
    made = [p for p in (IN_CLUSTER.parent.parent, IN_CLUSTER.parent) if not p.exists()]
    kubectl("create", "serviceaccount", "vc-bench", "-n", "kube-system")
    kubectl("create", "clusterrolebinding", "vc-bench", "--clusterrole=cluster-admin",
            "--serviceaccount=kube-system:vc-bench")
    token = kubectl("create", "token", "vc-bench", "-n", "kube-system").stdout.strip()
    IN_CLUSTER.mkdir(parents=True)
    try:
        (IN_CLUSTER / "token").write_text(token)
        (IN_CLUSTER / "ca.crt").write_bytes(Path(cp._pki["ca.crt"]).read_bytes())
        (IN_CLUSTER / "namespace").write_text("kube-system")
        host, _, port = str(cp.server).removeprefix("https://").rpartition(":")
        yield {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
    finally:
        for name in ("token", "ca.crt", "namespace"):
            (IN_CLUSTER / name).unlink(missing_ok=True)
        IN_CLUSTER.rmdir()
        for parent in reversed(made):
            parent.rmdir()


@contextmanager
def scheduler(who: str, kubeconfig: str, conf: Path, log: str,
              args: argparse.Namespace, *, env: dict[str, str] | None = None,
              ) -> Iterator[int]:
    if who == OURS:
        run = ["schedule", f"--kubeconfig={kubeconfig}", f"--scheduler-conf={conf}",
               "--metrics-port=0", "--health-port=0", "--log-level=info",
               *shlex.split(args.koordqueue_schedule_flags)]
        with component(run, log) as pid:
            yield pid
        return
    from bench.bench_peers import _http_ok, peer_process
    from tests.controlplane import peers
    from tests.controlplane.harness import free_port

    binary = str(peers.ensure_peer(peers.VOLCANO).binary)
    health = free_port()
    argv = vc_argv(binary, kubeconfig, conf, health, free_port())
    with peer_process(argv, log, env=env,
                      ready=lambda: _http_ok(f"http://127.0.0.1:{health}/healthz"),
                      startup_s=2.0) as pid:
        yield pid


def run_scenario(who: str, scenario: Scenario, args: argparse.Namespace) -> dict[str, Any]:
    from tests.controlplane import peers
    from tests.controlplane.harness import ControlPlane
    from tests.e2e.conftest import Kubectl, install_crds

    crds = peers.ensure_peer(peers.VOLCANO).crds
    assert crds is not None
    log = f"{args.log_dir}/volcano-{scenario.name}-{who}.log"
    with ControlPlane() as cp:
        assert cp.kubeconfig is not None
        install_crds(Kubectl(cp.binaries.kubectl, cp.kubeconfig), crds)
        api = KubeApi(load_api_client(str(cp.kubeconfig)))
        prepare(api, scenario, args.clients)
        conf = Path(cp.dir or "/tmp") / "scheduler.conf"
        conf.write_text(scenario.conf)
        result: dict[str, Any] = {"scenario": scenario.name, "who": who}
        if scenario.gang_shape:
            for gang in scenario.gangs:
                api.create(POD_GROUP, gang.group(), NAMESPACE)
            bodies = [p for g in scenario.gangs for p in g.pods()]
            bound: Callable[[dict[str, Any]], bool] = lambda p: bool(  # noqa: E731
                (p.get("spec") or {}).get("nodeName"))
            with scheduler(who, str(cp.kubeconfig), conf, log, args) as pid:
                burst = run_burst(api, POD, NAMESPACE, bodies, reached=bound, pid=pid,
                                  clients=args.clients)
                settle(api, 2.0, 30.0)
            from bench.bench_peers import _headline

            headline = _headline(burst, len(bodies), "scheduler_to_bind")
            result.update({k: v for k, v in headline.items() if k != "stats"})
        else:
            devices = "deviceshare" in scenario.conf
            if not devices:
                create_stage(api, scenario, 0, args.clients)
            quotas = tuple(str(o["metadata"]["name"]) for o in scenario.objects
                           if o["kind"] == "ResourceQuota")
            with ExitStack() as stack:
                env = None
                if who == PEER and devices:
                    kubectl = Kubectl(cp.binaries.kubectl, cp.kubeconfig)
                    env = stack.enter_context(in_cluster(cp, kubectl))
                stack.enter_context(scheduler(who, str(cp.kubeconfig), conf, log, args, env=env))
                stack.enter_context(FakeKubelet(api, quotas))
                if devices:  # both schedulers alike: nodes updated, then the first pods
                    touch_nodes(api, scenario)
                    create_stage(api, scenario, 0, args.clients)
                took = [settle(api, args.settle_s, args.timeout_s)]
                for stage in range(1, scenario.stages):
                    create_stage(api, scenario, stage, args.clients)
                    took.append(settle(api, args.settle_s, args.timeout_s))
            result["settled_after_s"] = took
        labels = {str(n["metadata"]["name"]): n["metadata"].get("labels") or {}
                  for n in api.list_objects(NODE)}
        final = outcome(scenario, api.list_objects(POD, NAMESPACE),
                        api.list_objects(POD_GROUP, NAMESPACE), labels)
        result["outcome"] = final.as_dict()
    return result


def as_outcome(raw: dict[str, Any]) -> Outcome:
    conditions = {k: tuple(tuple(c) for c in v) for k, v in raw["conditions"].items()}
    current = {k: (v[0], v[1], v[2]) for k, v in raw.get("current", {}).items()}
    groups = {k: tuple(v) for k, v in raw.get("groups_by_job", {}).items()}
    gpus = {k: tuple(v) for k, v in raw.get("gpus_by_job", {}).items()}
    return Outcome(raw["bound_by_queue"], raw["bound_by_job"], raw["evicted_by_job"],
                   raw["phases"], conditions, raw["nodes_used"], current, groups, gpus)


def gang_table(rows: list[tuple[str, dict[str, Any], dict[str, Any]]]) -> str:
    from bench.bench_peers import ratio

    lines = ["| shape | pods | nodes used (ours / volcano) | p50 s | p99 s (ratio) "
             "| CPU ms per pod (ratio) | targets met |", "|---|---|---|---|---|---|---|"]
    for name, o, p in rows:
        on, pn = o["outcome"]["nodes_used"], p["outcome"]["nodes_used"]
        met = {
            "nodes_within_15pct": abs(on - pn) <= 0.15 * max(pn, 1),
            "p99_le": o["p99"] <= p["p99"], "cpu_le": o["cpu_ms"] <= p["cpu_ms"],
        }
        lines.append(
            f"| {name} | {o['of']} | {on} / {pn} | {o['p50']} / {p['p50']} "
            f"| {o['p99']} / {p['p99']} ({ratio(o['p99'], p['p99'])}) "
            f"| {o['cpu_ms']} / {p['cpu_ms']} ({ratio(o['cpu_ms'], p['cpu_ms'])}) "
            f"| {', '.join(k for k, v in met.items() if v) or 'none'} |"
        )
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    names = (DIFFERENTIAL + GANG_SHAPES if args.volcano_scenarios == "all"
             else [n.strip() for n in args.volcano_scenarios.split(",") if n.strip()])
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {sorted(SCENARIOS)}")
    gang_rows, diff_rows = [], []
    for name in names:
        scenario = SCENARIOS[name]
        runs = {}
        for who in (PEER, OURS):
            runs[who] = run_scenario(who, scenario, args)
            print(json.dumps(runs[who]), flush=True)
        found = differences(as_outcome(runs[OURS]["outcome"]), as_outcome(runs[PEER]["outcome"]),
                            compare_nodes=scenario.gang_shape, current_only=scenario.gang_shape)
        diff_rows.append((name, found))
        if scenario.gang_shape:
            gang_rows.append((name, runs[OURS], runs[PEER]))
    print()
    print("| scenario | matches vc-scheduler | differences |\n|---|---|---|")
    for name, found in diff_rows:
        print(f"| {name} | {'yes' if not found else 'no'} | {'; '.join(found) or '-'} |")
    if gang_rows:
        print()
        print(gang_table(gang_rows))
    return 0


