"""The visibility API for the operator's lifetime: started with kopf's start-up, stopped with
its clean-up, on the controller's last published round. A cluster whose API server has no
front-proxy configuration (or a certificate that cannot be read) gets an error in the log and
no visibility API; admission does not depend on it."""

from __future__ import annotations

import asyncio
import ssl
import threading
import time
from typing import Any, Final

import kopf
import structlog

from koordqueue.kube import kopf_support
from koordqueue.kube.api import ApiError, KubeApi
from koordqueue.kube.settings import ControllerSettings
from koordqueue.kube.visibility.auth import AuthConfigError, Delegated, request_header_config
from koordqueue.kube.visibility.server import Routes, VisibilityServer
from koordqueue.kube.visibility.serving_label import ServingLabel
from koordqueue.kube.visibility.view import PendingView, Publication

log = structlog.get_logger(__name__)

RETRY_INTERVAL: Final = 2.0
"""Seconds between looks for the front-proxy settings (or the certificate) while missing."""
LOG_EVERY: Final = 60.0
"""Seconds between error lines while the API cannot be served."""


class VisibilityConfigError(ValueError):
    """--visibility-port without a certificate and key."""


def register_visibility(
    registry: kopf.OperatorRegistry,
    settings: ControllerSettings,
    publication: Publication,
    api: KubeApi,
) -> None:
    """Serve while the operator runs (nothing without --visibility-port). `api`: unfenced,
    as a standby reviews tokens and access too (it then answers 503: it has no round)."""
    if not settings.visibility_port:
        return
    if not (settings.visibility_cert and settings.visibility_key):
        raise VisibilityConfigError(
            "--visibility-port needs --visibility-cert and --visibility-key (the certificate "
            "the APIService's caBundle trusts)"
        )
    cert, key = settings.visibility_cert, settings.visibility_key
    servers: list[VisibilityServer] = []
    label = ServingLabel.from_env(api)

    stopping = threading.Event()

    def serve() -> None:
        """Until served or stopped: the API server may publish its front-proxy settings a
        moment after it is ready, so a missing one is looked for again."""
        logged = 0.0
        while not stopping.is_set():
            try:
                auth = Delegated(api, request_header_config(api))
                routes = Routes(PendingView(publication), auth)
                server = VisibilityServer(routes, settings.visibility_port, cert, key)
            except (AuthConfigError, ApiError, OSError, ssl.SSLError) as exc:
                # an optional read path: admission goes on without it, loudly
                if time.monotonic() - logged > LOG_EVERY:
                    log.error("visibility API not served yet", error=str(exc))
                    logged = time.monotonic()
                stopping.wait(RETRY_INTERVAL)
                continue
            servers.append(server.start())
            if label is not None:  # the Service reaches this pod once it has a round
                label.serve_once_published(publication)
            return

    thread = threading.Thread(target=serve, name="kq-visibility-start", daemon=True)

    @kopf.on.startup(registry=registry)
    async def start_visibility(**_: Any) -> None:
        thread.start()

    async def stop_visibility() -> None:
        stopping.set()
        if thread.is_alive():
            await asyncio.to_thread(thread.join, RETRY_INTERVAL + 5.0)
        if label is not None:
            await asyncio.to_thread(label.stop)
        for server in servers:
            await asyncio.to_thread(server.stop)

    kopf_support.on_shutdown(registry, stop_visibility)
