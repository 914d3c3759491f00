"""kopf plumbing shared by the controller and the scheduler operators."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import kopf


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
    # handlers hop to threads for their (blocking) API calls; size the pool for bursts
    asyncio.get_running_loop().set_default_executor(
        ThreadPoolExecutor(max_workers=32, thread_name_prefix="kq-handler")
    )


async def stop_background(
    state: dict[str, asyncio.Task[None]], key: str, close: Callable[[], None]
) -> None:
    """Cancel a background loop started at start-up, then release its resources."""
    task = state.pop(key, None)
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await asyncio.to_thread(close)
