"""`kubectl koordqueue`: the kubectl plugin (the `kubectl-koordqueue` executable on PATH).

Modelled on Kueue's kueuectl (`list`, `stop`/`resume`) and Volcano's vcctl (`queue list`,
`job list`):

    kubectl koordqueue list quotas                    the quota tree: min, max, used (self/children)
    kubectl koordqueue list units [-n NS|-A] [--quota Q] [--phase P]
                                                      pending units with their positions
    kubectl koordqueue explain NAME                   why a unit is pending (koordqueue explain)
    kubectl koordqueue stop queue NAME                hold a queue: nothing new is admitted
    kubectl koordqueue resume queue NAME
    kubectl koordqueue top                            a live view refreshing in the terminal

Tables by default, `-o json|yaml`; kubectl's --kubeconfig, --context, -n/--namespace. Pending
units come from the visibility API (docs/visibility.md) through the API server, so what is
shown is the controller's own last round. Exit codes: 0 done, 1 the cluster could not be read
or written, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote, urlencode

from koordqueue import __version__
from koordqueue.cli.explain import add_explain_parser
from koordqueue.cli.plugin_view import (
    dump,
    quota_table,
    quota_tree,
    top_frame,
    unit_table,
)
from koordqueue.domain import names

PROG: Final = "kubectl koordqueue"
EXIT_OK: Final = 0
EXIT_FAILURE: Final = 1
EXIT_BAD_INPUT: Final = 2
FIELD_MANAGER: Final = "kubectl-koordqueue"
VISIBILITY: Final = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"
CLEAR_SCREEN: Final = "\x1b[H\x1b[2J"
MSG_NO_VISIBILITY: Final = (
    "the visibility API did not answer ({error}): is the controller running with "
    "--visibility-port, and is apiservice {apiservice} Available?"
)
APISERVICE: Final = f"{names.VISIBILITY_VERSION}.{names.VISIBILITY_GROUP}"


class PluginError(Exception):
    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class Cluster:
    """The few API calls the plugin makes (read-only but for stop/resume)."""

    def __init__(self, kubeconfig: str | None, context: str | None) -> None:
        from kubernetes.config import ConfigException

        from koordqueue.kube.api import KubeApi, load_api_client

        try:
            self.client = load_api_client(kubeconfig, context)
        except (ConfigException, OSError) as exc:
            raise PluginError(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT) from exc
        self.api = KubeApi(self.client, timeout=15.0)
        self.kubeconfig, self.context = kubeconfig, context

    def call(self, method: str, path: str, body: object = None,
             query: Sequence[tuple[str, str]] = (), content_type: str = "application/json",
             ) -> dict[str, Any]:
        from koordqueue.kube.api import ApiError

        try:
            return self.api.request(method, path, body, query, content_type)
        except ApiError as exc:
            raise PluginError(str(exc)) from exc

    def visibility(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        from koordqueue.kube.api import ApiError

        query = {k: v for k, v in (params or {}).items() if v not in (None, "")}
        target = f"{VISIBILITY}/{path}" + (f"?{urlencode(query)}" if query else "")
        try:
            return self.api.request("GET", target, gzip=True)  # megabytes of JSON
        except ApiError as exc:
            raise PluginError(
                MSG_NO_VISIBILITY.format(error=exc.message or exc.reason, apiservice=APISERVICE)
            ) from exc

    def list_all(self, kind_name: str) -> list[dict[str, Any]]:
        from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, ApiError

        kind = ELASTIC_QUOTA if kind_name == "quotas" else QUEUE
        try:
            return self.api.list_objects(kind)
        except ApiError as exc:
            raise PluginError(f"cannot list {kind.plural}: {exc}") from exc

    def current_namespace(self) -> str:
        """The context's namespace, as kubectl uses it (default: "default")."""
        from kubernetes import config

        try:
            contexts, active = config.list_kube_config_contexts(  # type: ignore[no-untyped-call]
                config_file=self.kubeconfig
            )
        except Exception:  # in-cluster or no kubeconfig: kubectl's default
            return "default"
        chosen = next((c for c in contexts if c["name"] == self.context), active)
        return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


# --- commands ------------------------------------------------------------------------------


def _quotas(cluster: Cluster) -> list[Any]:
    quotas, queues = cluster.list_all("quotas"), cluster.list_all("queues")
    try:
        listed = cluster.visibility(names.VISIBILITY_QUOTAS)
        pending: dict[str, int] | None = {
            str(i["metadata"]["name"]): int(i.get("pending", 0)) for i in listed["items"]
        }
    except PluginError as exc:
        print(f"{PROG}: warning: no pending counts: {exc}", file=sys.stderr)
        pending = None
    return quota_tree(quotas, queues, pending)


def _units(cluster: Cluster, args: argparse.Namespace) -> list[dict[str, Any]]:
    namespace = "" if args.all_namespaces else (args.namespace or cluster.current_namespace())
    params = {"namespace": namespace, "phase": args.phase, "limit": args.limit}
    if args.quota:  # the quota's subtree, numbered within it
        path = f"{names.VISIBILITY_QUOTAS}/{quote(args.quota, safe='')}/"
        path += names.VISIBILITY_SUBRESOURCE
        body = cluster.visibility(path, params)
    else:
        body = cluster.visibility(names.VISIBILITY_PENDING, params)
    items: list[dict[str, Any]] = body["items"]
    return items


def cmd_list(args: argparse.Namespace, cluster: Cluster) -> int:
    if args.what == "quotas":
        roots = _quotas(cluster)
        if args.output == "table":
            print(quota_table(roots))
        else:
            print(dump({"items": [r.to_dict() for r in roots]}, args.output))
        return EXIT_OK
    items = _units(cluster, args)
    if args.output == "table":
        print(unit_table(items) if items else "No pending units found.")
    else:
        print(dump({"items": items}, args.output))
    return EXIT_OK


def _hold(cluster: Cluster, args: argparse.Namespace, held: bool) -> int:
    from koordqueue.kube.api import QUEUE

    value = names.STOP_POLICY_HOLD if held else None
    patch = {"metadata": {"annotations": {names.STOP_POLICY_ANNOTATION: value}}}
    cluster.call(
        "PATCH", QUEUE.path(args.queue_namespace, args.name), patch,
        [("fieldManager", FIELD_MANAGER)], "application/merge-patch+json",
    )
    if held:
        print(f"queue {args.name} stopped ({names.STOP_POLICY_ANNOTATION}="
              f"{names.STOP_POLICY_HOLD}): nothing new is admitted, admitted units keep running")
    else:
        print(f"queue {args.name} resumed")
    return EXIT_OK


def cmd_stop(args: argparse.Namespace, cluster: Cluster) -> int:
    return _hold(cluster, args, held=True)


def cmd_resume(args: argparse.Namespace, cluster: Cluster) -> int:
    return _hold(cluster, args, held=False)


def cmd_top(args: argparse.Namespace, cluster: Cluster) -> int:
    shown = 0
    while True:
        roots = _quotas(cluster)
        items = _units(cluster, args)
        header = (f"koordqueue top  {time.strftime('%H:%M:%S')}  every {args.interval:g}s  "
                  f"({len(items)} pending; Ctrl-C quits)")
        frame = top_frame(roots, items, header, args.rows)
        sys.stdout.write((CLEAR_SCREEN if sys.stdout.isatty() else "") + frame + "\n")
        sys.stdout.flush()
        shown += 1
        if args.iterations and shown >= args.iterations:
            return EXIT_OK
        time.sleep(args.interval)


# --- the parser ----------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument("--kubeconfig", default=None, help="kubeconfig file")
    parser.add_argument("--context", default=None, help="kubeconfig context to use")
    if output:
        parser.add_argument("-o", "--output", choices=("table", "json", "yaml"),
                            default="table")


def _unit_filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--namespace", default=None,
                        help="units of this namespace (default: the context's)")
    parser.add_argument("-A", "--all-namespaces", action="store_true",
                        help="units of every namespace")
    parser.add_argument("--quota", default=None,
                        help="units counted against this quota (its subtree), numbered within it")
    parser.add_argument("--phase", default=None, help="only units in this phase (e.g. Enqueued)")
    parser.add_argument("--limit", type=int, default=names.VISIBILITY_DEFAULT_LIMIT,
                        help="at most this many units")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    listing = sub.add_parser("list", help="list quotas (the tree) or pending units")
    what = listing.add_subparsers(dest="what", required=True)
    quotas = what.add_parser("quotas", aliases=["quota", "q"],
                             help="the quota tree with min, max, used (self and children)")
    _common(quotas)
    quotas.add_argument("-n", "--namespace", default=None, help=argparse.SUPPRESS)
    quotas.set_defaults(func=cmd_list, what="quotas")
    units = what.add_parser("units", aliases=["unit", "u"],
                            help="pending units in the order the next round tries them")
    _common(units)
    _unit_filters(units)
    units.set_defaults(func=cmd_list, what="units")

    for verb, func, text in (("stop", cmd_stop, "hold a queue: nothing new is admitted, "
                              "admitted units keep running"),
                             ("resume", cmd_resume, "release a held queue")):
        command = sub.add_parser(verb, help=text)
        target = command.add_subparsers(dest="target", required=True)
        queue = target.add_parser("queue", help=text)
        queue.add_argument("name", metavar="NAME", help="the queue (= its quota's name)")
        queue.add_argument("--queue-namespace", default=names.QUEUE_NAMESPACE,
                           help=f"namespace of the Queues (default: {names.QUEUE_NAMESPACE})")
        queue.add_argument("-n", "--namespace", default=None, help=argparse.SUPPRESS)
        _common(queue, output=False)
        queue.set_defaults(func=func)

    top = sub.add_parser("top", help="a live view of the quota tree and the pending units")
    _common(top, output=False)
    _unit_filters(top)
    top.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    top.add_argument("--rows", type=int, default=20, help="pending units shown")
    top.add_argument("--iterations", type=int, default=0,
                     help="stop after this many refreshes (0: until Ctrl-C)")
    top.set_defaults(func=cmd_top)

    add_explain_parser(sub)  # koordqueue explain, unchanged
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "explain":
        code: int = args.func(args)
        return code
    try:
        cluster = Cluster(args.kubeconfig, args.context)
        return int(args.func(args, cluster))
    except PluginError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return EXIT_OK
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
