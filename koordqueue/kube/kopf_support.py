"""kopf plumbing shared by the controller and the scheduler operators."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, TypeVar

import kopf
import structlog

from koordqueue.kube.api import KubeApi

log = structlog.get_logger(__name__)
T = TypeVar("T")

HANDLER_THREADS: Final = 8
"""asyncio's default executor in our operators (was 32 while controller handlers wrote inline)."""


class EventOnlyDiffBase(kopf.DiffBaseStorage):
    """No diff base: with only `on.event` handlers there are no field diffs to compute.

    kopf otherwise deep-copies every watched body to build an "essence" per event, which
    profiling showed to be the controller's largest CPU cost under a burst of Jobs.
    """

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


def configure(settings: kopf.OperatorSettings) -> None:
    """Standalone, level-triggered, quiet: the settings every koordqueue operator runs with."""
    settings.peering.standalone = True
    settings.posting.enabled = False  # we write our own, precise events
    settings.persistence.diffbase_storage = EventOnlyDiffBase()
    settings.watching.server_timeout = 300
    # kopf's sync handlers (probes, login) and the few blocking hops of the scheduler's loop
    # run here; the controller's event handlers only post onto its owner loop
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=HANDLER_THREADS, thread_name_prefix="kq-handler")
    )


async def stop_background(
    state: dict[str, asyncio.Task[None]], key: str, close: Callable[[], None]
) -> None:
    """Cancel a background loop started at start-up, then release its resources.

    A task that had already failed (a standby's listing refused) does not stop the clean-up:
    its error was reported when it happened, and `close` must still run."""
    task = state.pop(key, None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            try:
                await task
            except Exception as exc:
                log.info("a start-up task had failed before the stop", task=key, error=str(exc))
    await asyncio.to_thread(close)


async def in_daemon_thread(call: Callable[[], T], name: str) -> T:
    """`call()` in a daemon thread of its own, awaited. Unlike asyncio.to_thread, a call
    still blocked in a request when the operator stops does not hold the exit: asyncio.run
    joins its default executor's threads, and a request hung behind a half-open connection
    took its timeout times urllib3's retries (two minutes) to give up."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = call()
        except BaseException as exc:  # handed to the awaiting task
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is gone: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future


async def wait_set(event: threading.Event, poll: float = 0.5) -> None:
    """Wait for a thread's event without holding a worker thread past a cancellation: a
    thread blocked in `event.wait()` for good kept asyncio.run from returning at exit
    (it joins the default executor's threads), so the process outlived its SIGTERM."""
    while not await asyncio.to_thread(event.wait, poll):
        pass


Closer = Callable[[], Awaitable[None]]
_closers: weakref.WeakKeyDictionary[kopf.OperatorRegistry, list[Closer]] = (
    weakref.WeakKeyDictionary()
)


def on_shutdown(registry: kopf.OperatorRegistry, close: Closer) -> None:
    """Run `close` once when the operator stops: as kopf's clean-up handler, or, when kopf
    skips its clean-up, after kopf returns (`run_operator`).

    kopf runs no clean-up at all when it is stopped (SIGTERM) before every start-up handler
    has finished: while a start-up retries the API (the controller's resync without leader
    election, a standby scheduler's first listing) or while kopf waits to retry a failed
    one. Without this, such a stop left the Lease held until it expired and the queued
    writes and events unsent."""
    started = False

    async def once() -> None:
        nonlocal started
        if started:  # (kopf's clean-up and `finish` never overlap: one loop, in turn)
            return
        started = True
        await close()

    _closers.setdefault(registry, []).append(once)

    @kopf.on.cleanup(registry=registry, id=getattr(close, "__name__", None))
    async def cleanup(**_: Any) -> None:
        await once()


async def finish(registry: kopf.OperatorRegistry) -> None:
    """Run the clean-ups kopf did not (each runs once; a failure does not stop the next)."""
    for close in _closers.get(registry, []):
        try:
            await close()
        except Exception:
            log.exception("clean-up after the operator stopped failed")


async def run_operator(registry: kopf.OperatorRegistry, **kwargs: Any) -> None:
    """`kopf.operator(...)`, then every `on_shutdown` clean-up kopf skipped."""
    try:
        await kopf.operator(registry=registry, **kwargs)
    finally:
        await finish(registry)


def event_object(event: kopf.RawEvent) -> dict[str, Any]:
    """The watched object of a raw event, as a plain dict."""
    raw: dict[str, Any] = dict(event.get("object") or {})
    return raw


def event_type(event: kopf.RawEvent) -> str | None:
    """ADDED / MODIFIED / DELETED, or None for objects of the initial listing."""
    value = event.get("type")
    return str(value) if value else None


def connection_info(api: KubeApi) -> kopf.ConnectionInfo:
    """kopf's watches use the same credentials as our API client."""
    cfg = api.api_client.configuration
    keys: dict[str, str] = dict(cfg.api_key or {})
    raw = keys.get("authorization") or keys.get("BearerToken") or ""
    scheme: str | None = None
    token: str | None = None
    if raw:
        scheme, _sep, token = raw.partition(" ") if " " in raw else ("Bearer", "", raw)
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
        scheme=scheme,
        token=token or None,
    )


def log_in_with(registry: kopf.OperatorRegistry, api: KubeApi) -> None:
    """Register a login handler that reuses `api`'s credentials."""

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(api)


class OperatorThread:
    """A kopf operator in a background thread (embedding, e2e tests), started until `ready()`."""

    def __init__(
        self, registry: kopf.OperatorRegistry, ready: Callable[[], bool], name: str
    ) -> None:
        self._registry = registry
        self._ready = ready
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 60.0) -> None:
        def run() -> None:
            try:
                asyncio.run(
                    run_operator(
                        self._registry,
                        clusterwide=True,
                        standalone=True,
                        stop_flag=self._stop,
                    )
                )
            except BaseException as exc:  # surfaced by start()
                self._error = exc

        self._thread = threading.Thread(target=run, name=self._name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._ready():
            if self._error is not None:
                raise RuntimeError(
                    f"{self._name} failed to start: {self._error!r}"
                ) from self._error
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self._name} did not get ready within {timeout} s")
            time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError(f"{self._name} thread did not stop")
