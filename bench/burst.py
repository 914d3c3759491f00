"""What the live benchmarks share: run a component, create a burst of objects while watching
them with the benchmark's own watch (no polling load), and summarise the latencies."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koordqueue.kube.api import Kind, KubeApi

ROOT = Path(__file__).resolve().parents[1]


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

    Deliberately not koordqueue's Informer: the observer stamps each event as its line
    arrives, with no work queue or worker thread in between, and shares no code with what it
    measures. The stream is resumed from the last resourceVersion when the server ends it, so a
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


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory in MB, from /proc/PID/status (pid 0: this process):
    `field` VmRSS, what it holds now, or VmHWM, the most it ever held (its peak)."""
    status = Path(f"/proc/{pid or 'self'}/status").read_text()
    for line in status.splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))
    return ordered[index]


def stage(start: dict[str, float], end: dict[str, float]) -> dict[str, float]:
    """p50/p99 of end - start over the names in both."""
    spans = [end[n] - start[n] for n in end if n in start]
    return {p: round(percentile(spans, q), 3) for p, q in (("p50", 50), ("p99", 99))}


@contextmanager
def component(
    args: list[str], log_path: str, startup_s: float = 3.0, runner: list[str] | None = None
) -> Iterator[int]:
    """`koordqueue ARGS` as a subprocess (output in `log_path`); yields its pid, stops it after.
    `runner`: what runs it instead of `python -m koordqueue.cli.main` (bench/traced.py)."""
    from tests.controlplane.harness import _set_parent_death_signal

    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [*(runner or [sys.executable, "-m", "koordqueue.cli.main"]), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            cwd=ROOT,
            # a stopped or killed bench leaves no controller behind: one orphaned run spun
            # beside later benches at ~10 % of a core against its dead API server
            preexec_fn=_set_parent_death_signal,  # noqa: PLW1509 - a prctl only
        )
        try:
            time.sleep(startup_s)  # start-up listing
            if proc.poll() is not None:
                raise SystemExit(f"koordqueue {args[0]} exited: see {log_path}")
            yield proc.pid
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:  # still draining a backlog: the run is over anyway
                proc.kill()
                proc.wait(10)


@dataclass
class Burst:
    """Wall times per object name: create call sent / answered, ADDED seen, target state seen."""

    created: dict[str, float] = field(default_factory=dict)
    accepted: dict[str, float] = field(default_factory=dict)
    added: dict[str, float] = field(default_factory=dict)
    reached: dict[str, float] = field(default_factory=dict)
    create_s: float = 0.0
    total_s: float = 0.0
    cpu_s: float = 0.0
    apiserver_cpu_s: float = 0.0


def run_burst(
    api: KubeApi,
    kind: Kind,
    namespace: str,
    bodies: list[dict[str, Any]],
    *,
    reached: Callable[[dict[str, Any]], bool],
    pid: int,
    clients: int = 8,
) -> Burst:
    """Create `bodies` from `clients` threads; watch until each `reached` (or 10 minutes)."""
    burst = Burst()

    def on_event(event_type: str, obj: dict[str, Any], at: float) -> None:
        name = (obj.get("metadata") or {}).get("name")
        if name and event_type == "ADDED":
            burst.added.setdefault(name, at)
        if name and reached(obj):
            burst.reached.setdefault(name, at)

    def create(body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        burst.created[name] = time.time()
        api.create(kind, body, namespace)
        burst.accepted[name] = time.time()

    cpu_before = cpu_seconds(pid)
    watcher = threading.Thread(
        target=watch_objects,
        args=(api, kind, namespace, on_event),
        kwargs={"done": lambda: len(burst.reached) >= len(bodies), "deadline": time.time() + 600},
        daemon=True,
    )
    watcher.start()
    time.sleep(1)
    t0 = time.time()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(create, bodies))
    burst.create_s = time.time() - t0
    watcher.join(620)
    burst.total_s = max(burst.reached.values(), default=time.time()) - t0
    burst.cpu_s = cpu_seconds(pid) - cpu_before
    return burst


def dump_times(burst: Burst, path: str) -> None:
    """Every object's wall times (JSON), for a closer look than the percentiles."""
    times = {
        "created": burst.created,
        "accepted": burst.accepted,
        "added": burst.added,
        "reached": burst.reached,
    }
    Path(path).write_text(json.dumps(times))


def latency_figures(latencies: list[float]) -> dict[str, float]:
    """p50 / p90 / p99 / max of `latencies`, in seconds to the millisecond."""
    return {
        "p50": round(statistics.median(latencies), 3),
        "p90": round(percentile(latencies, 90), 3),
        "p99": round(percentile(latencies, 99), 3),
        "max": round(max(latencies), 3),
    }


def summary(burst: Burst, last_stage: str, dump: str = "") -> dict[str, Any]:
    """Latency percentiles, throughput and the stage split; `dump` keeps every timestamp."""
    if dump:
        dump_times(burst, dump)
    latencies = [burst.reached[n] - burst.created[n] for n in burst.reached if n in burst.created]
    return {
        "create_phase_s": round(burst.create_s, 2),
        "total_s": round(burst.total_s, 2),
        "throughput_per_s": round(len(burst.reached) / burst.total_s, 1),
        "latency_s": latency_figures(latencies),
        # where the time goes: the create call; the API server's watch delivery (this script's
        # own watch sees the object); the component under test, up to the state measured
        "stages_s": {
            "create_call": stage(burst.created, burst.accepted),
            "watch_delivery": stage(burst.accepted, burst.added),
            last_stage: stage(burst.added, burst.reached),
        },
    }


_REQUEST = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
WRITE_VERBS = frozenset({"POST", "PATCH", "PUT", "DELETE", "APPLY", "CREATE", "UPDATE"})


def api_writes(api: KubeApi, writes_only: bool = True) -> Counter[str]:
    """The API server's write requests so far (every request with `writes_only` False), by
    "VERB resource[/subresource]", from its own apiserver_request_total (every client:
    subtract what the benchmark itself sent)."""
    method, url, headers, body, post = api.api_client.param_serialize(
        "GET", "/metrics", header_params={"Accept": "text/plain"}, auth_settings=["BearerToken"]
    )
    response = api.api_client.call_api(method, url, headers, body, post, _request_timeout=30)
    text = response.read().decode()
    counts: Counter[str] = Counter()
    for line in text.splitlines():
        match = _REQUEST.match(line)
        if match is None:
            continue
        labels = dict(_LABEL.findall(match.group(1)))
        if writes_only and labels.get("verb") not in WRITE_VERBS:
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[f"{labels['verb']} {resource}"] += int(float(match.group(2)))
    return counts


def writes_per_job(
    before: Counter[str],
    after: Counter[str],
    jobs: int,
    created: int,
    own: Mapping[str, int] | None = None,
) -> dict[str, float]:
    """The controller's writes per Job by kind (the benchmark's own `created` Job creates and
    `own` other writes, such as release mode's quota edits, taken out), and their total."""
    diff = after - before
    diff["POST jobs"] -= created
    for key, count in (own or {}).items():
        diff[key] -= count
    out = {k: round(v / max(jobs, 1), 3) for k, v in sorted(diff.items()) if v > 0}
    out["total"] = round(sum(v for v in diff.values() if v > 0) / max(jobs, 1), 3)
    return out
