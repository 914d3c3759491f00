"""The benchmarks' own watch: wall time of each object's events, with no polling load."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from koordqueue.kube.api import Kind, KubeApi


def watch_objects(
    api: KubeApi,
    kind: Kind,
    namespace: str,
    on_event: Callable[[str, dict[str, Any], float], None],
    *,
    done: Callable[[], bool],
    deadline: float,
) -> None:
    """Call `on_event(type, object, wall time)` for each event until `done()` or `deadline`.

    The stream is resumed from the last resourceVersion when the server ends it, so a
    reconnect never re-lists (which would stamp objects changed during the gap with the
    reconnect time); only a 410 Gone forces a re-list, and that is reported.
    """
    rv = ""
    restarts = 0
    while not done() and time.time() < deadline:
        query = [("watch", "1"), ("allowWatchBookmarks", "true"), ("timeoutSeconds", "60")]
        if rv:
            query.append(("resourceVersion", rv))
        method, url, headers, body, post = api.api_client.param_serialize(
            "GET",
            kind.path(namespace),
            query_params=query,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        response = api.api_client.call_api(
            method, url, headers, body, post, _request_timeout=(5, 120)
        )
        buffer = b""
        for chunk in response.response.stream(4096, decode_content=True):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if not line.strip():
                    continue
                event = json.loads(line)
                obj = event.get("object") or {}
                if event.get("type") == "ERROR":
                    if obj.get("code") == 410:
                        print("watch expired (410): re-listing", file=sys.stderr)
                        rv = ""
                    break
                rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                if event.get("type") != "BOOKMARK":
                    on_event(str(event.get("type")), obj, time.time())
            if done() or time.time() > deadline:
                break
        response.response.release_conn()
        restarts += 1
        if not done():
            print(f"watch reconnect {restarts} (rv {rv})", file=sys.stderr)


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[index]


def stage(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """p50/p99 of end - start over the names in both."""
    spans = [end[n] - start[n] for n in end if n in start]
    return {p: round(percentile(spans, q), 3) for p, q in (("p50", 50), ("p99", 99))}
