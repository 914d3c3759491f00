"""One TLS server on `--webhook-port` for every admission webhook of the process.

kopf's `WebhookServer` serves TLS (reloading the certificate when its files change); the
path below its root picks the webhook: `mutate-pods/...` (the pod gates), `validate-elasticquotas`,
`mutate-workloads` and `mutate-pod-parents`. One port, one certificate, one Service for all of them
(deploy/webhook.yaml). A review that raises is answered "allowed" and logged: a queueing
webhook must never be the reason an object cannot be written.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import kopf
import structlog

from koordqueue.kube.gates.certs import self_signed
from koordqueue.kube.settings import ProcessSettings
from koordqueue.kube.webhooks.review import response

log = structlog.get_logger(__name__)

Handler = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]
"""An AdmissionReview request in, its answer out."""

SERVICE_HOSTS: Final = (
    "koordqueue-webhook.koord-queue.svc",
    "koordqueue-webhook.koord-queue.svc.cluster.local",
    "localhost",
    "127.0.0.1",
)
"""Names a generated certificate is valid for (the Service in deploy/webhook.yaml, loopback)."""
START_TIMEOUT: Final = 30.0


def route_of(webhook: str | None) -> str:
    """The route a request's path (below the server's root) names: its first segment."""
    return (webhook or "").strip("/").split("/", 1)[0]


def dispatcher(routes: Mapping[str, Handler]) -> Callable[..., Awaitable[Any]]:
    """kopf's webhook function: the review of the route the request's path names."""

    async def serve_one(request: Any, *, webhook: str | None = None, **_: Any) -> Any:
        review = request if isinstance(request, Mapping) else {}
        handle = routes.get(route_of(webhook))
        if handle is None:
            log.error("no webhook is served at this path; allowing", path=webhook)
            return response(review)
        try:
            return await handle(review)
        except Exception:
            log.exception("webhook review failed; allowing unchanged", path=webhook)
            return response(review)

    return serve_one


def webhook_server(settings: ProcessSettings, addr: str = "0.0.0.0") -> kopf.WebhookServer:
    """kopf's TLS server on `webhook_port` with the given certificate, or a self-signed one
    generated with the openssl CLI (its PEM must then be put into the caBundle)."""
    certfile, keyfile = settings.webhook_cert, settings.webhook_key
    if not certfile:
        cert = self_signed(Path(tempfile.mkdtemp(prefix="kq-webhook-")), SERVICE_HOSTS)
        certfile, keyfile = str(cert.certfile), str(cert.keyfile)
        log.warning("webhook uses a generated self-signed certificate", certfile=certfile)
    return kopf.WebhookServer(
        addr=addr, port=settings.webhook_port, certfile=certfile, pkeyfile=keyfile
    )


async def serve(
    server: kopf.WebhookServer,
    routes: Mapping[str, Handler],
    on_ready: Callable[[dict[str, Any]], Awaitable[None] | None] | None = None,
) -> None:
    """Serve reviews until cancelled; `on_ready` gets the client config (url, caBundle)."""
    async for client_config in server(dispatcher(routes)):
        log.info("webhooks serving", url=client_config.get("url"), paths=sorted(routes))
        if on_ready is not None:
            result = on_ready(dict(client_config))
            if result is not None:
                await result


def register_webhooks(
    registry: kopf.OperatorRegistry, settings: ProcessSettings, routes: Mapping[str, Handler]
) -> None:
    """Serve `routes` for the operator's lifetime (start-up to clean-up); nothing when there
    is no route or no `--webhook-port`."""
    if not routes or not settings.webhook_port:
        return
    tasks: list[asyncio.Task[None]] = []
    ready = asyncio.Event()

    def on_ready(_config: dict[str, Any]) -> None:
        ready.set()

    @kopf.on.startup(registry=registry)
    async def start_webhooks(**_: Any) -> None:
        tasks.append(asyncio.create_task(serve(webhook_server(settings), routes, on_ready)))
        await asyncio.wait_for(ready.wait(), timeout=START_TIMEOUT)

    @kopf.on.cleanup(registry=registry)
    async def stop_webhooks(**_: Any) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
