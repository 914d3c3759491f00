"""Mutating admission webhook for Pods: opted-in pods get the queue-allocation gate (SPEC 3.5).

Served by kopf's `WebhookServer` (TLS, certificate reloading) with our own review function,
because the JSON patch must be exactly `add /spec/schedulingGates/-` (append to existing
gates) or `add /spec/schedulingGates` (create the list); kopf's diff-based patches would
rewrite by index. The review never rejects: a queueing webhook must not block pod creation,
which is also why the MutatingWebhookConfiguration uses failurePolicy Ignore and a short
timeout (deploy/webhook.yaml).
"""

from __future__ import annotations

import asyncio
import base64
import json
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import kopf
import structlog

from koordqueue.kube.gates.certs import self_signed
from koordqueue.kube.scheduler.features import parse_feature_gates
from koordqueue.kube.settings import ControllerSettings
from koordqueue.scheduler.gates import names
from koordqueue.scheduler.gates.reservation import opted_in

log = structlog.get_logger(__name__)
WEBHOOK_PATH: Final = "/mutate-pods"
CONFIG_NAME: Final = "koordqueue-queue-allocation-gate"


def gate_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch ops adding our gate to an opted-in pod; [] when nothing is to be done.

    Idempotent: a pod that already carries the gate (an apiserver retry, a re-invocation
    after another webhook) gets no op, so the gate is never duplicated.
    """
    if not opted_in((pod.get("metadata") or {}).get("annotations")):
        return []
    spec = pod.get("spec") or {}
    gates = spec.get("schedulingGates")
    if isinstance(gates, list):
        if any(isinstance(g, Mapping) and g.get("name") == names.GATE_NAME for g in gates):
            return []
        return [{"op": "add", "path": "/spec/schedulingGates/-",
                 "value": {"name": names.GATE_NAME}}]
    return [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": names.GATE_NAME}]}]


def review(request: Mapping[str, Any], *, enabled: bool = True) -> dict[str, Any]:
    """An AdmissionReview response for an AdmissionReview request (always allowed).

    With the feature gate off (`enabled` False) nothing is ever patched.
    """
    payload = request.get("request") or {}
    response: dict[str, Any] = {"uid": payload.get("uid", ""), "allowed": True}
    kind = (payload.get("kind") or {}).get("kind")
    creating = payload.get("operation") == "CREATE" and not payload.get("subResource")
    if enabled and kind == "Pod" and creating:
        ops = gate_patch(payload.get("object") or {})
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode("ascii")
    return {
        "apiVersion": request.get("apiVersion", "admission.k8s.io/v1"),
        "kind": request.get("kind", "AdmissionReview"),
        "response": response,
    }


def _handler(enabled: bool) -> Callable[..., Awaitable[Any]]:
    async def handle(request: Any, **_: Any) -> Any:
        try:
            return review(request, enabled=enabled)
        except Exception:  # never fail the pod's creation because of us
            log.exception("webhook review failed; allowing unchanged")
            uid = ((request or {}).get("request") or {}).get("uid", "")
            return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": uid, "allowed": True}}

    return handle


async def serve(
    server: kopf.WebhookServer,
    on_ready: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
    *,
    enabled: bool = True,
) -> None:
    """Serve reviews until cancelled; `on_ready` gets the client config (url, caBundle)."""
    async for client_config in server(_handler(enabled)):
        log.info("pod webhook serving", url=client_config.get("url"))
        if on_ready is not None:
            result = on_ready(dict(client_config))
            if result is not None:
                await result


SERVICE_HOSTS: Final = (
    "koordqueue-webhook.koord-queue.svc",
    "koordqueue-webhook.koord-queue.svc.cluster.local",
    "localhost",
    "127.0.0.1",
)
"""Names a generated certificate is valid for (the Service in deploy/webhook.yaml, loopback)."""


def webhook_server(settings: ControllerSettings, addr: str = "0.0.0.0") -> kopf.WebhookServer:
    """kopf's TLS server on `webhook_port` with the given certificate, or a self-signed one
    generated with the openssl CLI (its PEM must then be put into the caBundle)."""
    certfile, keyfile = settings.webhook_cert, settings.webhook_key
    if not certfile:
        cert = self_signed(Path(tempfile.mkdtemp(prefix="kq-webhook-")), SERVICE_HOSTS)
        certfile, keyfile = str(cert.certfile), str(cert.keyfile)
        log.warning("webhook uses a generated self-signed certificate", certfile=certfile)
    return kopf.WebhookServer(
        addr=addr, port=settings.webhook_port, path=WEBHOOK_PATH,
        certfile=certfile, pkeyfile=keyfile,
    )


def register_webhook(registry: kopf.OperatorRegistry, settings: ControllerSettings) -> None:
    """Serve the webhook for the operator's lifetime (startup to cleanup)."""
    tasks: list[asyncio.Task[None]] = []
    enabled = parse_feature_gates(settings.feature_gates)[names.FEATURE_GATE]
    ready = asyncio.Event()

    def on_ready(_config: dict[str, Any]) -> None:
        ready.set()

    @kopf.on.startup(registry=registry)
    async def start_webhook(**_: Any) -> None:
        server = webhook_server(settings)
        tasks.append(asyncio.create_task(serve(server, on_ready, enabled=enabled)))
        await asyncio.wait_for(ready.wait(), timeout=30)

    @kopf.on.cleanup(registry=registry)
    async def stop_webhook(**_: Any) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
