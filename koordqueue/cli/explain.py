"""`koordqueue explain`: why is my job pending, from a scenario replay or a live cluster.

The CLI only gathers objects (scenario replay or API lists) and renders (explain_render.py);
the reasoning is the pure `koordqueue.simulation.explain.explain`, so both sources give the
same answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from koordqueue.cli.explain_render import render_json, render_pod_table, render_table
from koordqueue.domain.integrations import BATCH_JOB, INTEGRATIONS, POD, Integration
from koordqueue.domain.integrations import leaderworkerset as lws
from koordqueue.domain.names import (
    DEFAULT_OVERSELL_RATE,
    QUEUE_NAMESPACE,
)
from koordqueue.domain.quota_tree import parse_oversell_rate
from koordqueue.kube.settings import SchedulerSettings
from koordqueue.scheduler.gates.names import FEATURE_GATE
from koordqueue.simulation.explain import (
    ClusterView,
    Reason,
    add_job_notes,
    explain,
    explain_missing,
    view_from_scenario,
)
from koordqueue.simulation.scenario import load_scenario

if TYPE_CHECKING:  # the kube modules are imported only when a pod is explained
    from koordqueue.kube.scheduler.cache import SchedulerCache

EXIT_OK = 0
EXIT_NOT_FOUND = 1
EXIT_BAD_INPUT = 2


def add_explain_parser(sub: Any) -> None:
    """Register the `explain` subcommand on the top-level subparsers."""
    parser = sub.add_parser(
        "explain",
        help="why is a QueueUnit (or its Job) or a pod pending: from a scenario or a cluster",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Explain the admission state of one QueueUnit: quota resolution, queue and\n"
            "policy, position in the queue, and the parent chain check.\n"
            "\n"
            "KIND/NAME (or --kind KIND NAME) names the unit by its workload: the unit the\n"
            "controller makes for that object of a job integration, e.g. pytorchjob/train\n"
            "is the unit train-py-qu (KIND: job, pytorchjob, mpijob, jobset, their plurals\n"
            "or plural.group, the --integrations name; --kind pod for a pod's or a pod\n"
            "group's unit; lws/LEADER for a LeaderWorkerSet group's unit, LEADER being\n"
            "the group's leader pod, <lws>-<group index>). Scenario and cluster alike.\n"
            "\n"
            "With pod/NAME (or --pod NAME), explain why a pod is pending instead (live\n"
            "cluster only): its scheduler name, scheduling gates, PodGroup and queue,\n"
            "whether it is bound, and otherwise which predicates fail on which node and\n"
            "whether the gang's minAvailable holds it back. The cluster is read with the\n"
            "scheduler's own cache and a DRY scheduling session runs (default scheduler\n"
            "configuration unless --scheduler-conf): nothing is written to the cluster.\n"
            "\n"
            "Exit codes: 0 explained, 1 not found (or the cluster could not be read),\n"
            "2 bad input."
        ),
        epilog=(
            "examples:\n"
            "  koordqueue explain -n team-a my-job\n"
            "  koordqueue explain -n team-a pytorchjob/train\n"
            "  koordqueue explain -n team-a --kind pod my-pod-group\n"
            "  koordqueue explain -n team-a lws/infer-1\n"
            "  koordqueue explain -n team-a pod/my-job-0\n"
            "  koordqueue explain -n team-a --pod my-job-0 --scheduler-conf sched.yaml -o json"
        ),
    )
    parser.add_argument(
        "unit", metavar="NAME", nargs="?", default=None,
        help="unit name, or NAMESPACE/NAME; KIND/NAME names a workload's unit (pytorchjob/NAME); "
        "pod/NAME (also pods/NAME, po/NAME) explains a pod",
    )
    parser.add_argument(
        "--kind", default=None, metavar="KIND",
        help="NAME is a workload of this kind (pytorchjob, kubeflow.org/pytorchjob, jobset, "
        "pod, ...): explain the unit the controller makes for it",
    )
    parser.add_argument("-n", "--namespace", default=None,
                        help="namespace of the unit or pod (default: 'default')")
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
    pod = parser.add_argument_group("pods (why is my pod pending)")
    pod.add_argument("--pod", default=None, metavar="NAME",
                     help="explain this pod (in -n NAMESPACE) instead of a QueueUnit")
    pod.add_argument("--scheduler-conf", default=None, metavar="FILE",
                     help="scheduler configuration for the dry session "
                          "(default: the built-in default configuration)")
    pod.add_argument("--scheduler-name", default=SchedulerSettings().scheduler_name,
                     help="the scheduler name koordqueue runs as "
                          f"(default: {SchedulerSettings().scheduler_name})")
    pod.add_argument("--feature-gates", default="", metavar="GATES",
                     help="as given to the scheduler, e.g. "
                          f"{FEATURE_GATE}=true to evaluate queue admission through gates")
    pod.add_argument("--gate-reservation-timeout", type=float, default=0.0, metavar="SECONDS",
                     help="as given to the scheduler: says when a gated pod's reservation "
                          "is (or was) released")
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


POD_PREFIXES = ("pod/", "pods/", "po/")


def _pod_name(args: argparse.Namespace) -> str | None:
    """The pod to explain (from --pod or pod/NAME), or None for a unit."""
    if args.pod is not None:
        return str(args.pod)
    raw: str = args.unit or ""
    for prefix in POD_PREFIXES:
        if raw.startswith(prefix):
            return raw[len(prefix):]
    return None


def _kind_aliases() -> dict[str, Integration]:
    """Every spelling of an integration's kind a user may type, kubectl's and ours."""
    aliases: dict[str, Integration] = {}
    for integration in INTEGRATIONS.values():
        kind = integration.workload
        plural_group = f"{kind.plural}.{kind.group}" if kind.group else kind.plural
        for alias in (kind.kind.lower(), kind.plural, plural_group, integration.name):
            aliases.setdefault(alias, integration)  # MPIJob: the first listed version
    return aliases


KIND_ALIASES: dict[str, Integration] = _kind_aliases()
_LWS = lws.LWS_KIND
LWS_ALIASES: frozenset[str] = frozenset(
    {"lws", _LWS.kind.lower(), _LWS.plural, f"{_LWS.plural}.{_LWS.group}", lws.LWS_INTEGRATION}
)
"""A LeaderWorkerSet has a unit per group: lws/NAME names the group by its leader's name
(<lws>-<group index>), and explains that group's pod-group unit."""


def _lws_group(raw: str) -> str:
    """[NAMESPACE/]LEADER -> [NAMESPACE/]the group's pod-group name."""
    namespace, slash, leader = raw.rpartition("/")
    return f"{namespace}{slash}{lws.leader_group(leader)}"


def _workload_kind(args: argparse.Namespace) -> tuple[Integration, str] | str | None:
    """(integration, NAME or NAMESPACE/NAME) when the target is a workload, None when it is a
    unit, or an error message. `--kind KIND NAME`, or KIND/NAME for a kind other than pods
    (pod/NAME explains the pod itself)."""
    raw: str = args.unit or ""
    if args.kind is not None:
        if str(args.kind).lower() in LWS_ALIASES:
            return POD, _lws_group(raw)
        integration = KIND_ALIASES.get(str(args.kind).lower())
        if integration is None:
            known = ", ".join([*(i.workload.kind.lower() for i in INTEGRATIONS.values()), "lws"])
            return f"--kind {args.kind!r} is no queued kind (known: {known})"
        return integration, raw
    if raw.startswith(POD_PREFIXES):
        return None  # pod/NAME: the pod itself
    prefix, slash, rest = raw.partition("/")
    is_lws = bool(slash) and prefix.lower() in LWS_ALIASES
    integration = POD if is_lws else KIND_ALIASES.get(prefix.lower()) if slash else None
    if integration is None:
        return None
    if not rest or "/" in rest:
        return f"{prefix}/NAME takes the workload's NAME (its namespace with -n), got {raw!r}"
    return integration, _lws_group(rest) if is_lws else rest


def unit_key_of(
    integration: Integration, namespace: str, name: str, obj: dict[str, Any] | None = None
) -> str:
    """NAMESPACE/NAME of the unit the controller makes for the workload `name`: the
    integration's own `unit_name`, on the object when it was read (a pod of a group names the
    group's unit), else on its name alone."""
    found = obj or {"metadata": {"name": name, "namespace": namespace}}
    return f"{namespace}/{integration.unit_name(found)}"


def run_explain(args: argparse.Namespace) -> int:
    """Build a view from the chosen source, explain, print; exit code as documented above."""
    if args.pod is not None and args.unit is not None:
        return _bad_input("give either NAME or --pod NAME, not both")
    if args.pod is not None and args.kind is not None:
        return _bad_input("--kind names a workload's unit; --pod explains a pod: not both")
    workload = _workload_kind(args)
    if isinstance(workload, str):
        return _bad_input(workload)
    pod_name = None if workload is not None else _pod_name(args)
    if pod_name is not None:
        return run_explain_pod(args, pod_name)
    if args.unit is None:
        return _bad_input("a unit NAME, pod/NAME or --pod NAME is required")
    if workload is not None:
        args.unit = workload[1]
    key = _unit_key(args)
    if key is None:
        what = "the workload" if workload is not None else "unit"
        return _bad_input(
            f"{what} must be NAME or NAMESPACE/NAME (with a matching -n), got {args.unit!r}"
        )
    integration = workload[0] if workload is not None else None
    of = f" (of {integration.workload.kind} {key})" if integration is not None else ""
    job: dict[str, Any] | None = None
    if args.scenario is not None:
        if args.kubeconfig or args.context:
            return _bad_input("--scenario and --kubeconfig/--context are exclusive")
        scenario = load_scenario(args.scenario)  # ScenarioError -> exit 2 in main()
        if integration is not None:  # a pod group is named by its group in a scenario
            namespace, _, name = key.partition("/")
            key = unit_key_of(integration, namespace, name)
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
            view, job, key = read_cluster(
                key, args.kubeconfig, args.context, args.queue_namespace, args.oversellrate,
                integration=integration,
            )
        except LiveReadError as exc:
            print(f"koordqueue explain: error: {exc}", file=sys.stderr)
            return exc.exit_code
    found = explain(view, key)
    result = add_job_notes(found, job) if found else explain_missing(view, key, job)
    if result is None:
        where = view.source or "the cluster"
        print(f"koordqueue explain: QueueUnit {key}{of} not found in {where}", file=sys.stderr)
        return EXIT_NOT_FOUND
    if args.scenario is None and result.reason is Reason.QUEUE_NOT_FOUND and result.quota_exists:
        note = queue_namespace_note(args.kubeconfig, args.context, args.queue_namespace)
        if note:
            result.notes.append(note)
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
    *,
    integration: Integration | None = None,
) -> tuple[ClusterView, dict[str, Any] | None, str]:
    """List quotas, queues and units (and get the Job) and fold them into a view; returns
    the view, the Job, and the unit's key.

    `integration`: `key` is that of a workload of this kind whose unit is asked for. A kind
    whose objects form groups (pods) is read first, as a group member names the group's
    unit; every other kind's unit name follows from the workload's name alone. Read-only:
    explain never writes to the cluster. The kube client is imported here so the offline
    subcommands stay fast and work without cluster libraries configured.
    """
    from kubernetes.config import ConfigException

    from koordqueue.kube.api import (
        ELASTIC_QUOTA,
        JOB,
        QUEUE,
        QUEUE_UNIT,
        ApiError,
        Kind,
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
        if integration is not None:
            obj = None
            if integration.group_label() is not None:
                w = integration.workload
                obj = api.get(Kind(w.group, w.version, w.plural, w.kind), name, namespace)
            key = unit_key_of(integration, namespace, name, obj)
            name = name if integration is BATCH_JOB else ""  # the Job's notes: Jobs only
        quotas = api.list_objects(ELASTIC_QUOTA)
        queues = api.list_objects(QUEUE, queue_namespace)
        units = api.list_objects(QUEUE_UNIT)
        job = api.get(JOB, name, namespace) if name else None
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
    return view, job, key


def queue_namespace_note(
    kubeconfig: str | None, context: str | None, queue_namespace: str
) -> str | None:
    """A note naming the Queues' namespace when it does not exist (issue 33 part 3): the
    reason a quota's Queue is missing. None when it exists or cannot be read."""
    from koordqueue.kube.api import NAMESPACE, ApiError, KubeApi, load_api_client
    from koordqueue.kube.namespace import MSG_NAMESPACE_ABSENT

    api_client = load_api_client(kubeconfig, context)
    try:
        found = KubeApi(api_client, timeout=15.0).get(NAMESPACE, queue_namespace)
    except ApiError:
        return None
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    return None if found is not None else MSG_NAMESPACE_ABSENT.format(namespace=queue_namespace)


# --- pods: why is my pod pending -------------------------------------------------------------


def run_explain_pod(args: argparse.Namespace, name: str) -> int:
    """Read the cluster, run a dry session, print the pod's explanation."""
    from koordqueue.kube.scheduler.features import FeatureGateError, parse_feature_gates
    from koordqueue.scheduler.framework import ConfigError, default_config, load_config

    namespace: str = args.namespace or "default"
    if not name or "/" in name:
        return _bad_input(f"pod must be pod/NAME or --pod NAME (with -n NAMESPACE), got {name!r}")
    if args.scenario is not None or args.step is not None:
        return _bad_input("explaining a pod needs a live cluster; --scenario/--step are for units")
    if not args.scheduler_name:
        return _bad_input("--scheduler-name must not be empty")
    try:
        gates_enabled = parse_feature_gates(args.feature_gates)[FEATURE_GATE]
    except FeatureGateError as exc:
        return _bad_input(str(exc))
    try:
        config = load_config(args.scheduler_conf) if args.scheduler_conf else default_config()
    except ConfigError as exc:
        return _bad_input(str(exc))
    try:
        found = read_pod(namespace, name, args.kubeconfig, args.context, args.scheduler_name)
    except LiveReadError as exc:
        print(f"koordqueue explain: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if found is None:
        print(f"koordqueue explain: pod {namespace}/{name} not found", file=sys.stderr)
        return EXIT_NOT_FOUND
    pod, cache, source, expired_at = found
    from koordqueue.kube.scheduler.explain_pod import explain_pod

    result = explain_pod(pod, cache, config, gates_enabled=gates_enabled,
                         reservation_timeout=args.gate_reservation_timeout,
                         expired_at=expired_at)
    conf = args.scheduler_conf or "default"
    if args.output == "json":
        doc = result.to_dict()
        doc["source"] = source
        doc["scheduler_conf"] = conf
        print(json.dumps(doc, indent=2, sort_keys=True))
    else:
        print(render_pod_table(result, source, conf))
    return EXIT_OK


def read_pod(
    namespace: str, name: str, kubeconfig: str | None, context: str | None, scheduler_name: str
) -> tuple[dict[str, Any], SchedulerCache, str, str | None] | None:
    """(pod, filled SchedulerCache, source, when its gate reservation was released by the
    timeout or None) or None when the pod does not exist. Read-only."""
    from kubernetes.config import ConfigException

    from koordqueue.kube.api import ApiError, KubeApi, load_api_client
    from koordqueue.kube.scheduler.explain_pod import read_cluster, reservation_expired_at

    try:
        api_client = load_api_client(kubeconfig, context)
    except (ConfigException, OSError) as exc:
        raise LiveReadError(f"cannot load kubeconfig: {exc}", EXIT_BAD_INPUT) from exc
    try:
        api = KubeApi(api_client, timeout=15.0)
        pod, cache = read_cluster(api, namespace, name, scheduler_name)
        expired_at: str | None = None
        if pod is not None:
            try:
                expired_at = reservation_expired_at(api, pod)
            except ApiError:  # events not readable: the timeout is explained without them
                expired_at = None
    except ApiError as exc:
        raise LiveReadError(f"cannot read the cluster: {exc}", EXIT_NOT_FOUND) from exc
    finally:
        api_client.close()  # type: ignore[no-untyped-call]
    if pod is None:
        return None
    return pod, cache, f"cluster {api_client.configuration.host}", expired_at
