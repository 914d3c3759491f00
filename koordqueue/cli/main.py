"""The `koordqueue` command: run, simulate, explain, dashboard, snapshot, whatif, version.

Exit codes: 0 success, 1 runtime failure, 2 bad input (usage errors, bad scenario files).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from importlib.resources import files
from pathlib import Path

from koordqueue import __version__
from koordqueue.cli.dashboard import add_dashboard_parser
from koordqueue.cli.explain import add_explain_parser
from koordqueue.cli.render import simulation_json, simulation_table
from koordqueue.simulation.scenario import Scenario, load_scenario, parse_scenario
from koordqueue.simulation.scenario_fields import ScenarioError
from koordqueue.simulation.simulator import simulate

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


def default_scenario() -> Scenario:
    """The embedded scenario used when none is given (needs no cluster, no files)."""
    text = (files("koordqueue.simulation") / "examples" / "default.yaml").read_text("utf-8")
    return parse_scenario(text, "<embedded default: hierarchy.yaml>")


def _cmd_simulate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario) if args.scenario else default_scenario()
    progress = None
    if args.progress and sys.stderr.isatty():
        def progress(step: int, total: int) -> None:
            sys.stderr.write(f"\rstep {step}/{total}")
            if step == total:
                sys.stderr.write("\n")
    result = simulate(scenario, progress)
    if args.plot is not None:
        from koordqueue.cli.plot import PlotUnavailableError, write_timeline_plot

        try:
            write_timeline_plot(result, args.plot, args.plot_resource)
        except PlotUnavailableError as exc:
            print(f"koordqueue: error: {exc}", file=sys.stderr)
            return EXIT_FAILURE
        except OSError as exc:
            print(f"koordqueue: error: cannot write {args.plot}: {exc}", file=sys.stderr)
            return EXIT_FAILURE
    print(simulation_json(result) if args.output == "json" else simulation_table(result))
    return EXIT_OK


def _cmd_version(args: argparse.Namespace) -> int:
    print(f"koordqueue {__version__}")
    return EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from koordqueue.cli.run import run_controller  # kube imports only when needed

    return _kubeconfig_named(args, run_controller)


def _cmd_schedule(args: argparse.Namespace) -> int:
    from koordqueue.cli.run import run_scheduler  # kube imports only when needed

    return _kubeconfig_named(args, run_scheduler)


def _kubeconfig_named(
    args: argparse.Namespace, command: Callable[[argparse.Namespace], int]
) -> int:
    """A kubeconfig that cannot be loaded is one line naming the file, not a traceback."""
    from koordqueue.kube.api import KubeconfigError

    try:
        return command(args)
    except KubeconfigError as exc:
        print(f"koordqueue {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="koordqueue",
        description="Quota-to-queue admission and batch scheduling for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"koordqueue {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    sim = sub.add_parser("simulate", help="replay a scenario in-process (no cluster needed)")
    sim.add_argument("scenario", nargs="?", type=Path,
                     help="scenario YAML (default: the embedded hierarchy example)")
    sim.add_argument("-o", "--output", choices=("table", "json"), default="table")
    sim.add_argument("--progress", action="store_true", help="show progress on a terminal")
    sim.add_argument("--plot", type=Path, default=None, metavar="FILE.png",
                     help="also write a timeline plot of quota usage vs min/max "
                          "(needs the 'plot' extra: pip install 'koordqueue[plot]')")
    sim.add_argument("--plot-resource", default="cpu", metavar="RESOURCE",
                     help="resource shown by --plot (default: cpu)")
    sim.set_defaults(func=_cmd_simulate)

    add_explain_parser(sub)
    add_dashboard_parser(sub)

    from koordqueue.cli.snapshot import add_snapshot_parser
    from koordqueue.cli.whatif import add_whatif_parser

    add_snapshot_parser(sub)
    add_whatif_parser(sub)

    ver = sub.add_parser("version", help="print the version")
    ver.set_defaults(func=_cmd_version)

    from koordqueue.cli.flags import COMMANDS, add_flags

    run = sub.add_parser(
        "run", help="run the controller (and the scheduler beside it) against the kubeconfig"
    )
    add_flags(run, COMMANDS["run"])
    run.set_defaults(func=_cmd_run)

    schedule = sub.add_parser(
        "schedule", help="run only the scheduler (and its pod webhook) against the kubeconfig"
    )
    add_flags(schedule, COMMANDS["schedule"])  # only the flags the scheduler reads
    schedule.set_defaults(func=_cmd_schedule)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except ScenarioError as exc:
        print(f"koordqueue: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    return code


if __name__ == "__main__":
    sys.exit(main())
