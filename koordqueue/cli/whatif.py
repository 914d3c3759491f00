"""`koordqueue whatif`: what a proposed change would do, before making it (issue 29 part 2).

The cluster as it is (read live, as `koordqueue snapshot` reads it, or from a snapshot file)
is replayed twice by the simulator, as it is and with the edits; the difference is printed.
Nothing is ever written to the cluster; bad input (an edit naming a missing quota, a cycle,
an invalid quantity) is one line naming the edit, exit code 2, and no file written.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from koordqueue.cli.render import table
from koordqueue.cli.snapshot import SnapshotError, add_live_arguments, read_snapshot
from koordqueue.cli.whatif_nodes import NODE_FLAG_HELP, run_node_whatif
from koordqueue.kube.settings import SchedulerSettings
from koordqueue.simulation.history import MAX_STEPS
from koordqueue.simulation.node_whatif import NODE_EDIT_KINDS, parse_node_edit
from koordqueue.simulation.scenario import Scenario, load_scenario, parse_scenario
from koordqueue.simulation.scenario_fields import ScenarioError
from koordqueue.simulation.whatif import (
    ADMITTED,
    EDIT_KINDS,
    PREEMPTED,
    UNCHANGED,
    Edit,
    EditError,
    Outcome,
    WhatIf,
    parse_edit,
    what_if,
    with_runtime,
)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2

_FLAG_HELP = {
    "max": ("QUOTA=RES", "set the quota's max for the resources given (cpu=12,memory=64Gi)"),
    "min": ("QUOTA=RES", "set the quota's min for the resources given"),
    "parent": ("QUOTA=PARENT", "move the quota under PARENT (or koordinator-root-quota)"),
    "policy": ("QUOTA=POLICY", "the quota's queue policy (Priority, Block, Intelligent, Round)"),
    "priority-threshold": ("QUOTA=N", "the Intelligent queue's priority threshold"),
    "set-oversellrate": ("RATE", "a new --oversellrate for the controller (--oversellrate "
                                 "says the one it runs with)"),
    "add": ("NAMESPACE/UNIT=N", "N more units like that one (its quota, request, priority)"),
    "delete-quota": ("QUOTA", "the quota deleted (one with no child quotas)"),
}


class _EditAction(argparse.Action):
    """Every edit flag appends (kind, value) to one list: edits apply in command-line order."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.edits = [*(getattr(namespace, "edits", None) or []), (self.const, str(values))]


class _NodeEditAction(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        namespace.node_edits = [*(getattr(namespace, "node_edits", None) or []),
                                (self.const, str(values))]


def add_whatif_parser(sub: Any) -> None:
    parser = sub.add_parser(
        "whatif",
        help="replay the cluster with proposed edits and print what would change (read-only)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Replay the cluster as it is and with the edits (same simulator, same clock) and\n"
            "print the difference: units admitted, preempted, still waiting (with messages),\n"
            "the admission order and each quota's usage. Live (get/list only) or --snapshot.\n"
            "Exit codes: 0 done, 1 the cluster could not be read, 2 bad input."
        ),
        epilog=(
            "examples:\n"
            "  koordqueue whatif --max team-a=cpu=12\n"
            "  koordqueue whatif --snapshot snap.yaml --add team-a/train-qu=50 -o json\n"
            "  koordqueue whatif --edits edits.yaml --runtime 3 --plot whatif.png\n"
            "  koordqueue whatif --nodes --drain-node node-3 --add-nodes 2=cpu=32,memory=128Gi\n"
            "edits file: a YAML list of single-key maps, e.g.\n"
            "  - max: team-a=cpu=12\n"
            "  - policy: team-b=Block"
        ),
    )
    parser.set_defaults(edits=[], node_edits=[])
    for kind in EDIT_KINDS:
        metavar, help_ = _FLAG_HELP[kind]
        parser.add_argument(f"--{kind}", action=_EditAction, const=kind, metavar=metavar,
                            help=help_)
    nodes = parser.add_argument_group(
        "the scheduler core (--nodes: one dry scheduling session per world, live only)")
    nodes.add_argument("--nodes", action="store_true",
                       help="ask the scheduler: which pending pods would place, which would be "
                            "evicted, per queue")
    for kind in NODE_EDIT_KINDS:
        metavar, help_ = NODE_FLAG_HELP[kind]
        nodes.add_argument(f"--{kind}", action=_NodeEditAction, const=kind, metavar=metavar,
                           help=help_)
    nodes.add_argument("--scheduler-name", default=SchedulerSettings().scheduler_name,
                       help="the scheduler name koordqueue runs as")
    nodes.add_argument("--scheduler-conf", default=None, metavar="FILE",
                       help="scheduler configuration (default: the built-in one)")
    parser.add_argument("--edits", dest="edits_file", type=Path, default=None, metavar="FILE",
                        help="edits from a YAML file (applied before the flags')")
    parser.add_argument("--snapshot", type=Path, default=None, metavar="FILE",
                        help="a scenario written by `koordqueue snapshot` instead of the cluster")
    add_live_arguments(parser)
    parser.add_argument("--runtime", type=_runtime_arg, default=None, metavar="STEPS|history",
                        help="every unit runs STEPS steps once admitted (admitted ones from "
                             "step 0): shows when each waiting unit gets in; 'history': the "
                             "median run of the cluster's finished units, in admission rounds")
    parser.add_argument("--steps", type=int, default=None,
                        help="steps to replay (default: the snapshot's, or enough for "
                             "--runtime)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--all", action="store_true", help="list unchanged units too")
    parser.add_argument("--plot", type=Path, default=None, metavar="FILE.png",
                        help="a timeline of each quota's usage in both worlds (the 'plot' extra)")
    parser.add_argument("--plot-resource", default="cpu", metavar="RESOURCE")
    parser.set_defaults(func=run_whatif)


def _bad_input(message: str) -> int:
    print(f"koordqueue whatif: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT


def edits_from_file(path: Path) -> list[Edit]:
    """The edits a YAML file lists; EditError names the file and item."""
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise EditError(str(path), exc.strerror or str(exc)) from exc
    except yaml.YAMLError as exc:
        raise EditError(str(path), f"not YAML: {exc}") from exc
    if isinstance(doc, dict) and set(doc) == {"edits"}:
        doc = doc["edits"]
    if not isinstance(doc, list):
        raise EditError(str(path), "must be a list of edits (or a map with `edits:`)")
    edits = []
    for i, item in enumerate(doc):
        where = f"{path}: edits[{i}]"
        if not isinstance(item, dict) or len(item) != 1:
            raise EditError(where, f"must be one `kind: value` map, got {item!r}")
        ((kind, value),) = item.items()
        edits.append(parse_edit(str(kind), str(value), f"{where} ({kind}: {value})"))
    return edits


HISTORY = "history"


def _runtime_arg(raw: str) -> int | str:
    if raw == HISTORY:
        return HISTORY
    try:
        return int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number of steps or 'history', got {raw!r}") from None


def _source(args: argparse.Namespace) -> tuple[Scenario, str]:
    if args.snapshot is not None:
        if args.kubeconfig or args.context:
            raise EditError("--snapshot", "--snapshot and --kubeconfig/--context are exclusive")
        return load_scenario(args.snapshot), f"snapshot {args.snapshot}"
    snapshot = read_snapshot(args)
    for note in snapshot.notes:
        print(f"koordqueue whatif: note: {note}", file=sys.stderr)
    return parse_scenario(snapshot.to_yaml(), "<live snapshot>"), snapshot.doc["description"]


def _run_nodes(args: argparse.Namespace) -> int:
    if args.edits or args.edits_file or args.snapshot or args.runtime or args.plot:
        return _bad_input("--nodes takes the scheduler's edits (--drain-node, --add-nodes, "
                          "--queue-weight, --queue-capability) and reads the cluster: not "
                          "admission edits, --snapshot, --runtime or --plot")
    try:
        edits = [parse_node_edit(kind, raw) for kind, raw in args.node_edits]
        return run_node_whatif(args, edits)
    except EditError as exc:
        return _bad_input(str(exc))


def run_whatif(args: argparse.Namespace) -> int:
    if args.nodes:
        return _run_nodes(args)
    if args.node_edits:
        return _bad_input(f"--{args.node_edits[0][0]} is a scheduler edit: add --nodes")
    try:
        edits = edits_from_file(args.edits_file) if args.edits_file is not None else []
        edits += [parse_edit(kind, raw) for kind, raw in args.edits]
        if isinstance(args.runtime, int) and args.runtime < 1:
            return _bad_input(f"--runtime must be >= 1, got {args.runtime}")
        if args.steps is not None and args.steps < 1:
            return _bad_input(f"--steps must be >= 1, got {args.steps}")
        scenario, source = _source(args)
        runtime = None
        if isinstance(args.runtime, int):
            scenario = with_runtime(scenario, args.runtime, args.steps)
            runtime = f"{args.runtime} step(s) (--runtime)"
        elif args.runtime == HISTORY:  # the cluster's finished workloads say how long
            history = scenario.history
            if history is None:
                return _bad_input("--runtime history: the snapshot has no finished unit that "
                                  "says when it was admitted and when it finished")
            scenario = with_runtime(scenario, history.runtime_steps, args.steps)
            runtime = f"{history.runtime_steps} step(s) from history: {history.describe()}"
            if args.steps is None and scenario.steps > MAX_STEPS:
                runtime += f"; the replay is cut at {MAX_STEPS} steps"
                scenario = replace(scenario, steps=MAX_STEPS)
        elif args.steps is not None:
            scenario = replace(scenario, steps=args.steps)
        result = what_if(scenario, edits)
    except EditError as exc:
        return _bad_input(str(exc))
    except ScenarioError as exc:
        return _bad_input(str(exc))
    except SnapshotError as exc:
        print(f"koordqueue whatif: error: {exc}", file=sys.stderr)
        return exc.exit_code
    if args.plot is not None:
        from koordqueue.cli.plot import PlotUnavailableError, write_whatif_plot

        try:
            write_whatif_plot(result, args.plot, args.plot_resource)
        except PlotUnavailableError as exc:
            print(f"koordqueue whatif: error: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except OSError as exc:
            print(f"koordqueue whatif: error: cannot write {args.plot}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    text = whatif_json(result, source, runtime) if args.output == "json" else whatif_table(
        result, source, show_all=args.all, runtime=runtime
    )
    print(text)
    return EXIT_OK


# --- rendering -------------------------------------------------------------------------------


def _said(o: Outcome | None) -> str:
    if o is None:
        return "(not there)"
    when = ""
    if o.preempted_at is not None:
        when = f" (preempted at step {o.preempted_at})"
    elif o.admitted_at is not None:
        when = f" (admitted at step {o.admitted_at})"
    return f"{o.phase}{when}: {o.message}" if o.message else f"{o.phase}{when}"


def summary(result: WhatIf) -> str:
    """One line: how many units each kind of change touches."""
    counts = {ADMITTED: 0, PREEMPTED: 0}  # always said, "preempts none" included
    for u in [*result.changed(), *result.waiting()]:
        counts[u.change] = counts.get(u.change, 0) + 1
    return ", ".join(f"{n} {change}" for change, n in counts.items())


def whatif_table(
    result: WhatIf, source: str, *, show_all: bool = False, runtime: str | None = None
) -> str:
    steps = result.before.scenario.steps
    out = [f"what-if on {source}: {len(result.edits)} edit(s), {steps} step(s) in both worlds"]
    if runtime is not None:
        out.append(f"run time of every unit: {runtime}")
    out += [f"  {e.text}" for e in result.edits]
    out += ["", f"summary: {summary(result)}", ""]
    shown = result.units if show_all else [*result.changed(), *result.waiting()]
    if shown:
        out.append(table([[u.key, u.change, _said(u.before), _said(u.after)] for u in shown],
                          ["unit", "change", "before", "after"]))
    unchanged = sum(1 for u in result.units if u.change == UNCHANGED)
    if unchanged and not show_all:
        out.append(f"({unchanged} unit(s) unchanged; --all lists them)")
    out += ["", "admission order (units the replay admits, in order):",
            f"  before: {', '.join(result.order_before) or '(none)'}",
            f"  after:  {', '.join(result.order_after) or '(none)'}", ""]
    out.append("quota usage after the next round:")
    out.append(table(
        [[q.name, q.max_before, q.max_after, q.used_before, q.used_after] for q in result.usage],
        ["quota", "max before", "max after", "used before", "used after"],
    ))
    return "\n".join(out)


def _outcome_doc(o: Outcome | None) -> dict[str, Any] | None:
    if o is None:
        return None
    return {"phase": o.phase, "message": o.message, "heldAtStart": o.held,
            "admittedAt": o.admitted_at, "preemptedAt": o.preempted_at}


def _usage_steps(steps: Sequence[Any]) -> list[dict[str, Any]]:
    return [{u.name: u.used.to_quantities() for u in record.usage} for record in steps]


def whatif_json(result: WhatIf, source: str, runtime: str | None = None) -> str:
    doc = {
        "source": source,
        "edits": [e.text for e in result.edits],
        "steps": result.before.scenario.steps,
        "runtime": runtime,
        "summary": summary(result),
        "units": [
            {"unit": u.key, "change": u.change, "before": _outcome_doc(u.before),
             "after": _outcome_doc(u.after)}
            for u in result.units
        ],
        "admissionOrder": {"before": result.order_before, "after": result.order_after},
        "usage": [
            {"quota": q.name, "max": {"before": q.max_before, "after": q.max_after},
             "used": {"before": q.used_before, "after": q.used_after}}
            for q in result.usage
        ],
        "usageByStep": {"before": _usage_steps(result.before.steps),
                        "after": _usage_steps(result.after.steps)},
    }
    return json.dumps(doc, indent=2, sort_keys=True)
