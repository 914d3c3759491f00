"""`koordqueue snapshot`: the live cluster's admission state as a scenario file.

Read-only: it gets and lists (ElasticQuotas, Queues, QueueUnits, the controller's Deployment;
with --nodes what the scheduler's cache lists) and writes nothing to the cluster;
deploy/whatif-viewer.yaml is all the RBAC it needs. The controller's --oversellrate and
--namespace come from its Deployment's arguments (parsed with `koordqueue run`'s own flags)
unless given here.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from koordqueue.domain.features import FeatureGateError, parse_feature_gates
from koordqueue.domain.names import QUEUE_NAMESPACE
from koordqueue.domain.quota_tree import parse_oversell_rate
from koordqueue.simulation.snapshot import Snapshot, snapshot_from_objects

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
CONTROLLER_DEPLOYMENT: Final = "koordqueue-controller"
"""deploy/deployment.yaml's name."""


class SnapshotError(Exception):
    """The cluster could not be read; `exit_code` is 2 for a bad kubeconfig, else 1."""

    def __init__(self, message: str, exit_code: int) -> None:
        self.exit_code = exit_code
        super().__init__(message)


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that say which cluster and which controller (snapshot and whatif)."""
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, then $KUBECONFIG, "
                             "~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    parser.add_argument("--controller-namespace", default=QUEUE_NAMESPACE,
                        help="namespace of the controller's Deployment "
                             f"(default: {QUEUE_NAMESPACE})")
    parser.add_argument("--controller-deployment", default=CONTROLLER_DEPLOYMENT,
                        help=f"the controller's Deployment (default: {CONTROLLER_DEPLOYMENT}); "
                             "its --oversellrate, --namespace and --feature-gates are read "
                             "from its arguments")
    parser.add_argument("--oversellrate", default=None,
                        help="the controller's --oversellrate (default: the Deployment's, else 1)")
    parser.add_argument("--queue-namespace", default=None,
                        help="the controller's --namespace, where the Queues are "
                             f"(default: the Deployment's, else {QUEUE_NAMESPACE})")
    parser.add_argument("--feature-gates", default=None,
                        help="the controller's --feature-gates (default: the Deployment's, "
                             "else none): QueueUnitActive decides whether spec.active counts")


def add_snapshot_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "snapshot",
        help="write the live cluster's quotas, queues and units as a scenario (read-only)",
        description="Read the cluster (get/list only: deploy/whatif-viewer.yaml) and write a "
                    "scenario that `koordqueue simulate` replays: the round the controller "
                    "runs next. Exit codes: 0 written, 1 the cluster could not be read, "
                    "2 bad input.",
    )
    add_live_arguments(parser)
    parser.add_argument("--nodes", action="store_true",
                        help="also carry the ready nodes and what runs on them (each admitted "
                             "unit's running pods, other pods as their node's occupied "
                             "request), read as `whatif --nodes` reads them: `simulate` then "
                             "places pods around what already runs")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                        help="write the scenario here (default: standard output); written "
                             "only when the whole cluster was read")
    parser.set_defaults(func=run_snapshot)


@dataclass(frozen=True, slots=True)
class ControllerFlags:
    oversell_rate: str
    queue_namespace: str
    source: str
    """Where they came from: the Deployment, the command line, or the defaults."""
    feature_gates: str = ""
    admission_period: float = 1.0
    """Its --admission-period: one replay step, in seconds (the Deployment's, else 1)."""


def deployment_flags(deployment: dict[str, Any] | None) -> dict[str, str]:
    """--oversellrate, --namespace and --feature-gates as the Deployment's controller
    container is given them (its arguments parsed by `koordqueue run`'s flag table; its
    literal KOORDQUEUE_* env)."""
    from koordqueue.cli.flags import COMMANDS, add_flags

    if deployment is None:
        return {}
    containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get(
        "containers"
    ) or []
    for container in containers:
        args = [str(a) for a in (container.get("args") or [])]
        if not args or args[0] != "run":
            continue
        env = {
            str(e.get("name")): str(e["value"])
            for e in container.get("env") or []
            if isinstance(e, dict) and "value" in e
        }
        parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
        add_flags(parser, COMMANDS["run"])
        try:
            parsed, _ = parser.parse_known_args(args[1:])
        except (argparse.ArgumentError, SystemExit):
            return {}
        found: dict[str, str] = {}
        for dest, flag in (("oversell_rate", "--oversellrate"), ("namespace", "--namespace"),
                           ("feature_gates", "--feature-gates"),
                           ("admission_period", "--admission-period")):
            if any(a == flag or a.startswith(f"{flag}=") for a in args):
                found[dest] = str(getattr(parsed, dest))
            elif f"KOORDQUEUE_{dest.upper()}" in env:  # (what the flag's env default reads)
                found[dest] = env[f"KOORDQUEUE_{dest.upper()}"]
        return found
    return {}


def read_snapshot(args: argparse.Namespace, nodes: bool = False) -> Snapshot:
    """List everything and fold it; raises SnapshotError. Only get and list are called.
    `nodes`: also the nodes and pods, by the scheduler cache's relist (`whatif --nodes`)."""
    from kubernetes.config import ConfigException

    from koordqueue.kube.api import (
        ELASTIC_QUOTA,
        QUEUE,
        QUEUE_UNIT,
        ApiError,
        Kind,
        KubeApi,
        KubeconfigError,
        load_api_client,
    )

    try:
        api_client = load_api_client(args.kubeconfig, args.context)
    except (ConfigException, OSError, KubeconfigError) as exc:
        raise SnapshotError(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT) from exc
    api = KubeApi(api_client, timeout=15.0)
    deployment_kind = Kind("apps", "v1", "deployments", "Deployment")
    try:
        deployment: dict[str, Any] | None = None
        if None in (args.oversellrate, args.queue_namespace, args.feature_gates):
            try:
                deployment = api.get(
                    deployment_kind, args.controller_deployment, args.controller_namespace
                )
            except ApiError as exc:  # e.g. forbidden: the defaults, and say so
                print(f"koordqueue snapshot: note: cannot read Deployment "
                      f"{args.controller_namespace}/{args.controller_deployment}: {exc}",
                      file=sys.stderr)
        flags = controller_flags(args, deployment)
        quotas = api.list_objects(ELASTIC_QUOTA)
        queues = api.list_objects(QUEUE, flags.queue_namespace)
        units = api.list_objects(QUEUE_UNIT)
        live = None
        if nodes:
            from koordqueue.cli.whatif_nodes import live_nodes, relist_cache
            from koordqueue.kube.settings import SchedulerSettings

            live = live_nodes(relist_cache(api_client, SchedulerSettings().scheduler_name))
    except ApiError as exc:
        raise SnapshotError(f"cannot read the cluster: {exc}", EXIT_FAILURE) from exc
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    host = api_client.configuration.host
    snapshot = snapshot_from_objects(
        quotas, queues, units, oversell_rate=flags.oversell_rate,
        queue_namespace=flags.queue_namespace, now=time.time(), source=f"cluster {host}",
        honour_active=parse_feature_gates(flags.feature_gates).active,
        step_seconds=flags.admission_period, nodes=live,
    )
    snapshot.notes.insert(0, f"controller flags from {flags.source}: --oversellrate="
                             f"{flags.oversell_rate} --namespace={flags.queue_namespace}"
                             f" --feature-gates={flags.feature_gates}")
    return snapshot


def controller_flags(
    args: argparse.Namespace, deployment: dict[str, Any] | None
) -> ControllerFlags:
    """The command line over the Deployment over the defaults; a bad rate is bad input."""
    found = deployment_flags(deployment)
    where = (f"Deployment {args.controller_namespace}/{args.controller_deployment}"
             if found else "the defaults")
    rate = args.oversellrate if args.oversellrate is not None else found.get("oversell_rate", "1")
    namespace = (args.queue_namespace if args.queue_namespace is not None
                 else found.get("namespace", QUEUE_NAMESPACE))
    gates = (args.feature_gates if args.feature_gates is not None
             else found.get("feature_gates", ""))
    if any(v is not None for v in (args.oversellrate, args.queue_namespace, args.feature_gates)):
        where = "the command line" + (f" and {where}" if found else "")
    try:
        parse_oversell_rate(rate)
    except ValueError as exc:
        raise SnapshotError(f"--oversellrate {rate!r}: {exc}", EXIT_BAD_INPUT) from exc
    try:
        parse_feature_gates(gates)
    except FeatureGateError as exc:
        raise SnapshotError(f"--feature-gates {gates!r}: {exc}", EXIT_BAD_INPUT) from exc
    try:
        period = float(found.get("admission_period", "1"))
    except ValueError:
        period = 1.0  # (`run` refuses such a Deployment: it never ran with it)
    return ControllerFlags(str(rate), str(namespace), where, str(gates),
                           period if period > 0 else 1.0)


def run_snapshot(args: argparse.Namespace) -> int:
    try:
        snapshot = read_snapshot(args, nodes=args.nodes)
    except SnapshotError as exc:
        print(f"koordqueue snapshot: error: {exc}", file=sys.stderr)
        return exc.exit_code
    text = snapshot.to_yaml()
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        print(f"koordqueue snapshot: error: cannot write {args.output}: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    nodes = f", {len(snapshot.doc['nodes'])} nodes" if "nodes" in snapshot.doc else ""
    print(f"koordqueue snapshot: {len(snapshot.doc['quotas'])} quotas, "
          f"{len(snapshot.doc['units'])} units{nodes} -> {args.output}", file=sys.stderr)
    return EXIT_OK
