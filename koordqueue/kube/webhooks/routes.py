"""Which webhooks a process serves, by the path below the server's root (server.py)."""

from __future__ import annotations

from koordqueue.domain.integrations import integration_names, parse_integrations
from koordqueue.domain.integrations.pod_parents import parent_gating, parent_names
from koordqueue.domain.integrations.workload_gate import workload_gating
from koordqueue.kube.api import ObjectApi
from koordqueue.kube.gates import webhook as pod_webhook
from koordqueue.kube.settings import SchedulerSettings, controller_settings
from koordqueue.kube.webhooks import elasticquota, pod_parents, workloads
from koordqueue.kube.webhooks.server import Handler, route_of


def webhook_routes(
    settings: SchedulerSettings,
    api: ObjectApi | None = None,
    *,
    scheduler: bool = False,
    controller: bool = False,
) -> dict[str, Handler]:
    """The routes of a process that runs the scheduler and/or the controller (`api`: what the
    ElasticQuota review lists the other quotas with; the controller's).

    The pod webhook when a gate of this process needs it (the scheduler's queue-allocation
    gate, the pod integration's admission gate); the controller's ElasticQuota validation, its
    workload defaulting and its Deployment/StatefulSet/LeaderWorkerSet marking (when it
    manages workloads). A process that runs the controller reads run's settings
    (ControllerSettings).
    """
    routes: dict[str, Handler] = {}
    gating = pod_webhook.pod_gating(settings, allocation_gate=scheduler, controller=controller)
    if gating is not None:
        routes[route_of(pod_webhook.WEBHOOK_PATH)] = pod_webhook.handler(gating)
    if controller and api is not None:
        ctl = controller_settings(settings)
        routes[elasticquota.PATH] = elasticquota.handler(api)
        if ctl.manage_jobs:
            held = workload_gating(
                ctl.namespace, parse_integrations(ctl.integrations), ctl.suspend_at_creation
            )
            if held is not None:
                routes[workloads.PATH] = workloads.handler(held)
            parents = parent_gating(
                ctl.namespace,
                parent_names(integration_names(ctl.integrations)),
                parse_integrations(ctl.integrations),
            )
            if parents is not None:
                routes[pod_parents.PATH] = pod_parents.handler(parents)
    return routes
