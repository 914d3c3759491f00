"""`koordqueue explain`: why is my job pending, from a scenario replay or a live cluster.

The CLI only gathers objects (scenario replay or API lists) and renders; the reasoning is the
pure `koordqueue.simulation.explain.explain`, so both sources give the same answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from koordqueue.cli.render import table
from koordqueue.domain.names import DEFAULT_OVERSELL_RATE, QUEUE_NAMESPACE
from koordqueue.domain.quota_tree import parse_oversell_rate
from koordqueue.simulation.explain import (
    ClusterView,
    Explanation,
    add_job_notes,
    explain,
    explain_missing,
    fmt,
    view_from_scenario,
)
from koordqueue.simulation.scenario import load_scenario

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_BAD_INPUT = 2


def add_explain_parser(sub: Any) -> None:
    """Register the `explain` subcommand on the top-level subparsers."""
    parser = sub.add_parser(
        "explain",
        help="why is a QueueUnit (or its Job) pending: from a scenario or a live cluster",
        description=(
            "Explain the admission state of one QueueUnit: quota resolution, queue and policy, "
            "position in the queue, and the parent chain check. Exit codes: 0 explained, "
            "1 not found (or the cluster could not be read), 2 bad input."
        ),
    )
    parser.add_argument("unit", metavar="NAME", help="unit name, or NAMESPACE/NAME")
    parser.add_argument("-n", "--namespace", default=None,
                        help="namespace of the unit (default: 'default')")
    parser.add_argument("--scenario", type=Path, default=None,
                        help="replay this scenario instead of reading a cluster")
    parser.add_argument("--step", type=int, default=None,
                        help="with --scenario: explain the state after this step (default: last)")
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig file (default: in-cluster, then $KUBECONFIG, "
                             "~/.kube/config)")
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    parser.add_argument("--queue-namespace", default=QUEUE_NAMESPACE,
                        help=f"namespace that holds the Queues (default: {QUEUE_NAMESPACE})")
    parser.add_argument("--oversellrate", default=str(DEFAULT_OVERSELL_RATE),
                        help="the controller's --oversellrate (live only; default: 1)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.set_defaults(func=run_explain)


def _bad_input(message: str) -> int:
    print(f"koordqueue explain: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _unit_key(args: argparse.Namespace) -> str | None:
    raw: str = args.unit
    if "/" in raw:
        namespace, _, name = raw.partition("/")
        if args.namespace and args.namespace != namespace:
            return None
    else:
        namespace, name = args.namespace or "default", raw
    if not namespace or not name or "/" in name:
        return None
    return f"{namespace}/{name}"


def run_explain(args: argparse.Namespace) -> int:
    """Build a view from the chosen source, explain, print; exit code as documented above."""
    key = _unit_key(args)
    if key is None:
        return _bad_input(
            f"unit must be NAME or NAMESPACE/NAME (with a matching -n), got {args.unit!r}"
        )
    job: dict[str, Any] | None = None
    if args.scenario is not None:
        if args.kubeconfig or args.context:
            return _bad_input("--scenario and --kubeconfig/--context are exclusive")
        scenario = load_scenario(args.scenario)  # ScenarioError -> exit 2 in main()
        try:
            view = view_from_scenario(scenario, args.step)
        except ValueError as exc:
            return _bad_input(str(exc))
    else:
        if args.step is not None:
            return _bad_input("--step needs --scenario")
        try:
            parse_oversell_rate(args.oversellrate)
        except ValueError as exc:
            return _bad_input(str(exc))
        try:
            view, job = read_cluster(
                key, args.kubeconfig, args.context, args.queue_namespace, args.oversellrate
            )
        except LiveReadError as exc:
            print(f"koordqueue explain: error: {exc}", file=sys.stderr)
            return exc.exit_code
    found = explain(view, key)
    result = add_job_notes(found, job) if found else explain_missing(view, key, job)
    if result is None:
        where = view.source or "the cluster"
        print(f"koordqueue explain: QueueUnit {key} not found in {where}", file=sys.stderr)
        return EXIT_NOT_FOUND
    print(render_json(result, view) if args.output == "json" else render_table(result, view))
    return EXIT_OK


# --- the live source -------------------------------------------------------------------


class LiveReadError(Exception):
    """The cluster could not be read; `exit_code` is 2 for a bad kubeconfig, else 1."""

    def __init__(self, message: str, exit_code: int) -> None:
        self.exit_code = exit_code
        super().__init__(message)


def read_cluster(
    key: str,
    kubeconfig: str | None,
    context: str | None,
    queue_namespace: str,
    oversell_rate: str,
) -> tuple[ClusterView, dict[str, Any] | None]:
    """List quotas, queues and units (and get the Job) and fold them into a view.

    Read-only: explain never writes to the cluster. The kube client is imported here so the
    offline subcommands stay fast and work without cluster libraries configured.
    """
    from kubernetes.config import ConfigException

    from koordqueue.kube.api import (
        ELASTIC_QUOTA,
        JOB,
        QUEUE,
        QUEUE_UNIT,
        ApiError,
        KubeApi,
        load_api_client,
    )

    try:
        api_client = load_api_client(kubeconfig, context)
    except (ConfigException, OSError) as exc:
        raise LiveReadError(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT) from exc
    api = KubeApi(api_client, timeout=15.0)
    namespace, _, name = key.partition("/")
    try:
        quotas = api.list_objects(ELASTIC_QUOTA)
        queues = api.list_objects(QUEUE, queue_namespace)
        units = api.list_objects(QUEUE_UNIT)
        job = api.get(JOB, name, namespace)
    except ApiError as exc:
        raise LiveReadError(f"cannot read the cluster: {exc}", EXIT_NOT_FOUND) from exc
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    try:
        view = ClusterView.from_objects(
            quotas, queues, units, oversell_rate=oversell_rate, queue_namespace=queue_namespace,
            source=f"cluster {api_client.configuration.host}",
        )
    except ValueError as exc:  # a bad --oversellrate
        raise LiveReadError(str(exc), EXIT_BAD_INPUT) from exc
    return view, job


# --- rendering ----------------------------------------------------------------------------


def render_json(ex: Explanation, view: ClusterView) -> str:
    doc = ex.to_dict()
    doc["source"] = view.source
    return json.dumps(doc, indent=2, sort_keys=True)


def _queue_line(ex: Explanation, view: ClusterView) -> str:
    if ex.queue is None:
        return "-"
    where = f"{view.queue_namespace}/{ex.queue}"
    if not ex.queue_exists:
        return f"{where} (does not exist)"
    policy = f"policy {ex.policy}"
    if ex.queue_error:
        policy += ", not served (AddQueueFail)"
    return f"{where} ({policy})"


def _position_line(ex: Explanation) -> str:
    if ex.position is None:
        return "-"
    line = f"{ex.position} of {ex.queue_length} waiting"
    if ex.ahead:
        shown = ", ".join(ex.ahead[:5]) + (", ..." if len(ex.ahead) > 5 else "")
        line += f"; ahead: {shown}"
    return line


def render_table(ex: Explanation, view: ClusterView) -> str:
    """A kubectl-describe-like block, then the parent-chain check as a table."""
    quota = "-"
    if ex.quota is not None:
        quota = ex.quota if ex.quota_exists else f"{ex.quota} (does not exist)"
    fields: list[tuple[str, str]] = [
        ("Unit", ex.unit),
        ("Source", view.source or "-"),
        ("Phase", ex.phase or "-"),
        ("Reason", ex.reason.value),
        ("Why", ex.summary),
    ]
    if ex.message:
        fields.append(("Message", ex.message))
    fields += [
        ("Resolution", ex.resolution or "-"),
        ("Quota", quota),
        ("Queue", _queue_line(ex, view)),
        ("Position", _position_line(ex)),
        ("Request", str(ex.request)),
    ]
    if ex.status_message:
        fields.append(("Status", ex.status_message))
    fields += [("Note", note) for note in ex.notes]
    width = max(len(label) for label, _ in fields) + 2
    lines = [f"{label + ':':<{width}}{value}" for label, value in fields]
    if ex.chain:
        rows = []
        for depth, level in enumerate(ex.chain):
            blocking = level.quota == ex.blocking_quota
            if level.empty_max:
                rows.append([str(depth), level.quota, "-", "(empty max)", "-", "-", "-",
                             "BLOCKS" if blocking else ""])
            for c in level.checks:
                verdict = "yes" if c.fits else "NO"
                if blocking and not c.fits:
                    verdict = "NO <- blocks"
                rows.append([str(depth), level.quota, c.resource, fmt(c.resource, c.limit),
                             fmt(c.resource, c.used), fmt(c.resource, c.request),
                             fmt(c.resource, c.free), verdict])
        lines.append("")
        lines.append(table(rows, ["level", "quota", "resource", "max*rate", "used", "request",
                                  "free", "fits"]))
    return "\n".join(lines)
