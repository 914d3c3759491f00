"""One process's operator, wired by one function for `run`, `schedule` and the test runners.

A process runs the controller, the scheduler, or both (`koordqueue run`); the wiring is the
same for each: one API client sized to the process's callers, one Leadership (its Lease
named for the controller when the controller runs, else for the scheduler) and the API
fenced by it, the controller's informers and owner loop (operator.py), the webhooks this
process serves (registered before the scheduler, so they answer before it reports ready),
the scheduler's handlers (scheduler/operator.py), and kopf's login with the same client.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import kopf

from koordqueue.kube import kopf_support
from koordqueue.kube.api import KubeApi, load_api_client
from koordqueue.kube.controller import Controller
from koordqueue.kube.leader import CONTROLLER_LEASE, SCHEDULER_LEASE, leadership_for
from koordqueue.kube.namespace import ensure_namespace
from koordqueue.kube.operator import build_registry
from koordqueue.kube.scheduler.operator import register_scheduler
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import SchedulerSettings, controller_settings
from koordqueue.kube.visibility.serve import register_visibility
from koordqueue.kube.webhooks.routes import webhook_routes
from koordqueue.kube.webhooks.server import register_webhooks


@dataclass(frozen=True, slots=True)
class Operator:
    """A kopf registry holding the process's handlers, and the components it runs."""

    registry: kopf.OperatorRegistry
    controller: Controller | None
    scheduler: Scheduler | None


def build_operator(
    settings: SchedulerSettings,
    *,
    controller: bool,
    scheduler: bool,
    on_lost: Callable[[], None] | None = None,
    gc_freeze: bool = False,
) -> Operator:
    """The operator of a process that runs the controller and/or the scheduler.

    The controller needs run's settings (ControllerSettings; TypeError otherwise). Raises
    NamespaceMissingError when the controller's `--namespace` is missing and may not be
    created. `on_lost`: called when leadership is lost (the CLI exits). `gc_freeze`: the
    process is the CLI's (`koordqueue run` / `schedule`), so the caches of what it runs are
    frozen out of the collector's full passes (kube/gcfreeze.py); embedders leave it off.
    """
    if not (controller or scheduler):
        raise ValueError("a process runs the controller, the scheduler or both")
    ctl_settings = controller_settings(settings) if controller else None
    api_client = load_api_client(settings.kubeconfig, settings.context, settings.api_connections)
    if ctl_settings is not None:
        # the Queues' (and the Lease's) namespace, before anything is written there; not
        # fenced: a standby makes it as well (NamespaceMissingError when it cannot)
        ensure_namespace(KubeApi(api_client), ctl_settings.namespace)
    lease = CONTROLLER_LEASE if controller else SCHEDULER_LEASE
    leadership = leadership_for(api_client, settings, lease, on_lost, runs_scheduler=scheduler)
    api = KubeApi(api_client, fence=leadership.may_write)
    registry = kopf.OperatorRegistry()
    ctl = None
    if ctl_settings is not None:
        ctl = Controller(api, ctl_settings, gc_freeze=gc_freeze)
        build_registry(ctl, api, leadership, registry)
        register_visibility(registry, ctl_settings, ctl.state.published, KubeApi(api_client))
    if settings.webhook_port:  # serving before the scheduler reports ready
        routes = webhook_routes(
            settings, api if controller else None, scheduler=scheduler, controller=controller
        )
        register_webhooks(registry, settings, routes)
    sched = None
    if scheduler:
        sched = Scheduler(api, settings, gc_freeze=gc_freeze)
        register_scheduler(registry, sched, leadership)
    kopf_support.log_in_with(registry, api)
    return Operator(registry, ctl, sched)
