"""`koordqueue run`: the controller against the current kubeconfig."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable

import kopf
import structlog
from structlog.typing import Processor

from koordqueue.cli.flags import settings_from_args
from koordqueue.kube import kopf_support, metrics
from koordqueue.kube.api import KubeApi, load_api_client
from koordqueue.kube.controller import Controller
from koordqueue.kube.leader import (
    CONTROLLER_LEASE,
    SCHEDULER_LEASE,
    LeaseConfig,
    leadership_for,
    lease_config,
    lease_namespace,
)
from koordqueue.kube.namespace import NamespaceMissingError, ensure_namespace
from koordqueue.kube.operator import build_registry
from koordqueue.kube.scheduler.operator import register_scheduler
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.scheduler_clash import busy_port, port_in_use, scheduler_clash
from koordqueue.kube.settings import ControllerSettings


def configure_logging(fmt: str, level: str) -> None:
    """structlog for our logs, and the stdlib (kopf, urllib3) routed through the same renderer."""
    renderer: Processor = (
        structlog.processors.JSONRenderer() if fmt == "json" else structlog.dev.ConsoleRenderer()
    )
    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[*shared, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                renderer,
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # kopf logs every handler success at info (several lines per Job): keep it for debug only
    logging.getLogger("kopf").setLevel("DEBUG" if level == "debug" else "WARNING")
    logging.getLogger("kubernetes").setLevel("WARNING")
    logging.getLogger("urllib3").setLevel("WARNING")


def exit_after_losing_the_lease() -> None:
    """client-go's components exit when they lose the lease; so do we (writes are fenced)."""
    threading.Timer(10.0, os._exit, (1,)).start()  # if the graceful stop hangs
    os.kill(os.getpid(), signal.SIGTERM)


def build_operator(
    settings: ControllerSettings,
    *,
    with_scheduler: bool = False,
    on_lost: Callable[[], None] | None = None,
) -> tuple[Controller, kopf.OperatorRegistry]:
    """The quota controller's registry; with the scheduler when asked.

    Raises NamespaceMissingError when `--namespace` is missing and may not be created.
    With `--webhook-port` the webhooks are served (kube/webhooks/routes.py): ElasticQuota
    validation, workload defaulting, and the pod webhook when a gate of this process needs
    it (the scheduler's queue-allocation gate, the pod integration's admission gate).
    """
    api_client = load_api_client(settings.kubeconfig, settings.context, settings.api_connections)
    # the Queues' (and the Lease's) namespace, before anything is written there; not fenced:
    # a standby makes it as well (NamespaceMissingError when it cannot)
    ensure_namespace(KubeApi(api_client), settings.namespace)
    leadership = leadership_for(
        api_client, settings, CONTROLLER_LEASE, on_lost, runs_scheduler=with_scheduler
    )
    api = KubeApi(api_client, fence=leadership.may_write)
    controller = Controller(api, settings)
    registry = build_registry(controller, api, leadership)
    if settings.webhook_port:  # serving before the scheduler reports ready
        from koordqueue.kube.webhooks.routes import webhook_routes
        from koordqueue.kube.webhooks.server import register_webhooks

        routes = webhook_routes(settings, api, scheduler=with_scheduler, controller=True)
        register_webhooks(registry, settings, routes)
    if with_scheduler:
        register_scheduler(registry, Scheduler(api, settings), leadership)
    kopf_support.log_in_with(registry, api)
    return controller, registry


def run_controller(args: argparse.Namespace) -> int:
    settings = settings_from_args(args)
    configure_logging(settings.log_format, settings.log_level)
    log = structlog.get_logger("koordqueue")
    if settings.enable_parent_limit:
        log.info(
            "--enableParentLimit is accepted and has no effect; parent quotas are always checked"
        )
    try:
        lease = lease_config(settings, CONTROLLER_LEASE)
    except ValueError as exc:  # inconsistent leader-election timings: before any connection
        print(f"koordqueue run: {exc}", file=sys.stderr)
        return 2
    refusal = second_scheduler(settings, lease)
    if refusal:
        print(f"koordqueue run: {refusal}", file=sys.stderr)
        return 1
    try:
        _controller, registry = build_operator(
            settings, with_scheduler=True, on_lost=exit_after_losing_the_lease
        )
    except NamespaceMissingError as exc:
        print(f"koordqueue run: {exc}", file=sys.stderr)
        return 1
    if not _serve_metrics(settings, "run"):
        return 1
    log.info("starting", settings=repr(settings))
    return _serve(registry, settings)


def run_scheduler(args: argparse.Namespace) -> int:
    """`koordqueue schedule`: only the scheduler (and, with --webhook-port, its webhook)."""
    from koordqueue.kube.scheduler.runner import build_scheduler_operator

    settings = settings_from_args(args)
    configure_logging(settings.log_format, settings.log_level)
    try:
        lease = lease_config(settings, SCHEDULER_LEASE)
    except ValueError as exc:
        print(f"koordqueue schedule: {exc}", file=sys.stderr)
        return 2
    refusal = second_scheduler(settings, lease)
    if refusal:
        print(f"koordqueue schedule: {refusal}", file=sys.stderr)
        return 1
    _scheduler, registry = build_scheduler_operator(settings, exit_after_losing_the_lease)
    if not _serve_metrics(settings, "schedule"):
        return 1
    structlog.get_logger("koordqueue").info("starting scheduler", settings=repr(settings))
    return _serve(registry, settings)


def second_scheduler(settings: ControllerSettings, lease: LeaseConfig | None) -> str | None:
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


def _serve_metrics(settings: ControllerSettings, command: str) -> bool:
    try:
        metrics.serve(settings.metrics_port)
    except OSError as exc:  # taken since busy_port looked
        message = port_in_use(settings.metrics_port, "--metrics-port", exc)
        print(f"koordqueue {command}: {message}", file=sys.stderr)
        return False
    return True


def _serve(registry: kopf.OperatorRegistry, settings: ControllerSettings) -> int:
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
