"""`koordqueue whatif --nodes`: the scheduler core's what-if (issue 29 part 3).

The cluster is read as the scheduler reads it (its cache's relist: nodes, Queues, PodGroups,
pods; get and list only; `snapshot --nodes` reads it the same way), and two dry sessions
run: as it is and with the node and queue edits. Printed per queue: the pods whose fate
differs (placed where, evicted by reclaim or preempt, still pending).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from koordqueue.cli.render import table
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.resources import Resources
from koordqueue.scheduler.framework import ClusterSnapshot
from koordqueue.simulation.node_whatif import NODE_EDIT_KINDS, NodeWhatIf, node_what_if
from koordqueue.simulation.snapshot_nodes import LiveNodes
from koordqueue.simulation.whatif import Edit

if TYPE_CHECKING:
    from koordqueue.kube.scheduler.cache import SchedulerCache

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

NODE_FLAG_HELP = {
    "drain-node": ("NODE", "with --nodes: the node drained (its pods pending again)"),
    "add-nodes": ("N=RES[;LABELS]", "with --nodes: N nodes of that allocatable and labels "
                                    "(2=cpu=8,memory=32Gi;zone=a)"),
    "queue-weight": ("QUEUE=W", "with --nodes: a Volcano queue's weight"),
    "queue-capability": ("QUEUE=RES", "with --nodes: a Volcano queue's capability"),
}
assert set(NODE_FLAG_HELP) == set(NODE_EDIT_KINDS)


class LiveReadError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        self.exit_code = exit_code
        super().__init__(message)


def relist_cache(api_client: Any, scheduler_name: str) -> SchedulerCache:
    """The scheduler's cache filled by its own relist (nodes, Queues, PodGroups, pods...):
    what `whatif --nodes` and `snapshot --nodes` read. Only GET/LIST; raises ApiError."""
    from koordqueue.kube.api import KubeApi
    from koordqueue.kube.scheduler.cache import SchedulerCache
    from koordqueue.kube.scheduler.scheduler import Scheduler
    from koordqueue.kube.settings import SchedulerSettings

    cache = SchedulerCache(scheduler_name)
    api = KubeApi(api_client, timeout=15.0)
    scheduler = Scheduler(api, SchedulerSettings(scheduler_name=scheduler_name), cache=cache)
    try:
        scheduler.relist()
    finally:
        scheduler.close()
    return cache


def live_nodes(cache: SchedulerCache) -> LiveNodes:
    """The ready nodes as the scheduler converts them, the pods it keeps, and notes for the
    nodes it leaves out (not Ready) or reads as empty (an allocatable it cannot parse)."""
    from koordqueue.kube.scheduler.convert import node_ready

    nodes = list(cache.build().snapshot.nodes)
    ready = {n.name for n in nodes}
    notes = []
    for raw in sorted(cache.nodes(), key=lambda n: str((n.get("metadata") or {}).get("name"))):
        name = str((raw.get("metadata") or {}).get("name"))
        if name not in ready or not node_ready(raw):
            notes.append(f"node {name} is not Ready: left out (the scheduler places nothing "
                         "there)")
            continue
        status = raw.get("status") or {}
        try:
            Resources.parse(status.get("allocatable") or status.get("capacity") or {},
                            f"node {name} allocatable")
        except InvalidQuantityError as exc:
            notes.append(f"{exc}: carried as empty (as the scheduler reads it)")
    return LiveNodes(nodes, cache.pods(), notes)


def read_scheduler_snapshot(args: argparse.Namespace) -> tuple[ClusterSnapshot, str]:
    """The scheduler's own view (its cache filled by its relist); only GET/LIST are sent."""
    from kubernetes.config import ConfigException

    from koordqueue.kube.api import ApiError, KubeconfigError, load_api_client

    try:
        api_client = load_api_client(args.kubeconfig, args.context)
    except (ConfigException, OSError, KubeconfigError) as exc:
        raise LiveReadError(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT) from exc
    try:
        cache = relist_cache(api_client, args.scheduler_name)
    except ApiError as exc:
        raise LiveReadError(f"cannot read the cluster: {exc}", EXIT_FAILURE) from exc
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    return cache.build().snapshot, f"cluster {api_client.configuration.host}"


def run_node_whatif(args: argparse.Namespace, edits: list[Edit]) -> int:
    from koordqueue.scheduler.framework import ConfigError, default_config, load_config

    try:
        config = load_config(args.scheduler_conf) if args.scheduler_conf else default_config()
    except ConfigError as exc:
        print(f"koordqueue whatif: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        snapshot, source = read_scheduler_snapshot(args)
    except LiveReadError as exc:
        print(f"koordqueue whatif: error: {exc}", file=sys.stderr)
        return exc.exit_code
    result = node_what_if(snapshot, edits, config)  # EditError: the caller's
    print(node_json(result, source) if args.output == "json" else node_table(result, source))
    return EXIT_OK


def node_table(result: NodeWhatIf, source: str) -> str:
    out = [f"scheduler what-if on {source}: {len(result.edits)} edit(s), one dry session each"]
    out += [f"  {e.text}" for e in result.edits]
    out.append("")
    if not result.pods:
        out.append("no pod's fate changes")
        return "\n".join(out)
    rows = [[c.queue, c.pod, c.before, c.after] for c in result.pods]
    out.append(table(rows, ["queue", "pod", "before", "after"]))
    return "\n".join(out)


def node_json(result: NodeWhatIf, source: str) -> str:
    doc: dict[str, Any] = {
        "source": source,
        "edits": [e.text for e in result.edits],
        "queues": {
            queue: [{"pod": c.pod, "before": c.before, "after": c.after} for c in changes]
            for queue, changes in result.by_queue().items()
        },
    }
    return json.dumps(doc, indent=2, sort_keys=True)
