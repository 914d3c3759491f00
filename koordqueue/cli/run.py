"""`koordqueue run` and `koordqueue schedule`: one start-up path, the command says what runs."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from dataclasses import dataclass
from typing import Final

import kopf
import structlog

from koordqueue.cli.allocator import cap_malloc_arenas
from koordqueue.cli.flags import settings_from_args
from koordqueue.cli.logs import configure_logging
from koordqueue.kube import kopf_support, metrics
from koordqueue.kube.api import KubeApi, load_api_client
from koordqueue.kube.leader import (
    CONTROLLER_LEASE,
    SCHEDULER_LEASE,
    LeaseConfig,
    lease_config,
    lease_namespace,
)
from koordqueue.kube.namespace import NamespaceMissingError
from koordqueue.kube.process import build_operator
from koordqueue.kube.scheduler_clash import busy_port, port_in_use, scheduler_clash
from koordqueue.kube.settings import ControllerSettings, ProcessSettings, SchedulerSettings
from koordqueue.kube.visibility.serve import VisibilityConfigError

LEASE_LOST_EXIT: Final = "exiting: the lease is lost (this process restarts as a standby)"


def exit_after_losing_the_lease() -> None:
    """client-go's components exit at once when they lose the lease (klog.FlushAndExit);
    so do we, status 0, without a graceful stop: it has nothing left to do (every write is
    fenced, the Lease is another's, the caches die with the process) and it waited on the
    requests still in flight: a relist, a write's answer, up to the client's 30 s timeout.
    Under an etcd restart the soak (bench/soak.py) saw such stops take 6 to 10 s, and one
    overran the 10 s deadline this function then set (exit status 1, counted a crash)."""
    structlog.get_logger("koordqueue").warning(LEASE_LOST_EXIT)
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@dataclass(frozen=True, slots=True)
class Command:
    """What distinguishes `run` from `schedule`: the rest of their start is one path."""

    name: str
    settings_type: type[SchedulerSettings]
    controller: bool


RUN: Final = Command("run", ControllerSettings, controller=True)
SCHEDULE: Final = Command("schedule", SchedulerSettings, controller=False)


def run_controller(args: argparse.Namespace) -> int:
    """`koordqueue run`: the controller, and the scheduler beside it."""
    return run_command(RUN, args)


def run_scheduler(args: argparse.Namespace) -> int:
    """`koordqueue schedule`: only the scheduler (and, with --webhook-port, its webhook)."""
    return run_command(SCHEDULE, args)


def run_command(command: Command, args: argparse.Namespace) -> int:
    """Settings parsed once into the command's type; checks before any connection; the
    process's operator (kube/process.py); metrics; kopf until stopped."""
    cap_malloc_arenas(os.environ)  # before the first thread (cli/allocator.py)
    settings = settings_from_args(args, command.settings_type)
    configure_logging(settings.log_format, settings.log_level)
    log = structlog.get_logger("koordqueue")
    if isinstance(settings, ControllerSettings) and settings.enable_parent_limit:
        log.info(
            "--enableParentLimit is accepted and has no effect; parent quotas are always checked"
        )
    lease_name = CONTROLLER_LEASE if command.controller else SCHEDULER_LEASE
    try:
        lease = lease_config(settings, lease_name)
    except ValueError as exc:  # inconsistent leader-election timings: before any connection
        print(f"koordqueue {command.name}: {exc}", file=sys.stderr)
        return 2
    refusal = second_scheduler(settings, lease)
    if refusal:
        print(f"koordqueue {command.name}: {refusal}", file=sys.stderr)
        return 1
    try:
        operator = build_operator(
            settings,
            controller=command.controller,
            scheduler=True,
            on_lost=exit_after_losing_the_lease,
            gc_freeze=True,  # the CLI owns the process (kube/gcfreeze.py)
        )
    except NamespaceMissingError as exc:
        print(f"koordqueue {command.name}: {exc}", file=sys.stderr)
        return 1
    except VisibilityConfigError as exc:  # --visibility-port without its certificate
        print(f"koordqueue {command.name}: {exc}", file=sys.stderr)
        return 2
    if not _serve_metrics(settings, command.name):
        return 1
    log.info("starting", command=command.name, settings=repr(settings))
    return _serve(operator.registry, settings)


def second_scheduler(settings: SchedulerSettings, lease: LeaseConfig | None) -> str | None:
    """Why this process must not start (a port of ours is taken, or a scheduler of our name
    holds another Lease), or None: kube/scheduler_clash.py."""
    problem = busy_port(settings)
    if problem:
        return problem
    api = KubeApi(load_api_client(settings.kubeconfig, settings.context), timeout=10.0)
    try:
        return scheduler_clash(
            api, settings, lease_namespace(settings), lease.name if lease else None
        )
    finally:
        api.api_client.close()  # type: ignore[no-untyped-call]


def _serve_metrics(settings: ProcessSettings, command: str) -> bool:
    try:
        metrics.serve(settings.metrics_port)
    except OSError as exc:  # taken since busy_port looked
        message = port_in_use(settings.metrics_port, "--metrics-port", exc)
        print(f"koordqueue {command}: {message}", file=sys.stderr)
        return False
    return True


def _serve(registry: kopf.OperatorRegistry, settings: ProcessSettings) -> int:
    """Run a kopf operator cluster-wide until stopped, with /healthz on the health port."""
    asyncio.run(
        kopf_support.run_operator(
            registry,
            clusterwide=True,
            standalone=True,
            # port 0 turns it off (kopf would otherwise bind its default, port 80)
            liveness_endpoint=(
                f"http://0.0.0.0:{settings.health_port}/healthz" if settings.health_port else None
            ),
        )
    )
    return 0
