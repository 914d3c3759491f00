"""What the fault e2e tests share: a controller process, a kubelet stand-in, and the QueueUnit
history replay that proves nothing was lost and nothing admitted twice.

The history is a watch of the QueueUnits through the test's own client (never through a
fault-injecting proxy): the order etcd committed the changes in, as `kubectl get queueunits -w`
shows them. Replaying it gives each unit's admissions and each quota's peak of admitted units.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from kubernetes import client as k8s
from kubernetes import watch

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.api import JOB, ApiError, KubeApi

ADMITTED = {"Reserved", "Dequeued", "Running", "SchedReady", "SchedSucceed"}
RELEASED = {"Succeed", "Failed", "Preempted", "Enqueued", "TimeoutBackoff", "Backoff"}


def start_controller(
    kubeconfig: Path, log: IO[str], *extra: str, lease: str | None = None
) -> subprocess.Popen[str]:
    """`koordqueue run` in its own process; with `lease`, leader election on short timings."""
    elect = (
        ["--leader-elect=true", f"--leader-elect-resource-name={lease}",
         "--leader-elect-lease-duration=3", "--leader-elect-renew-deadline=2",
         "--leader-elect-retry-period=0.5"]
        if lease else ["--leader-elect=false"]
    )
    return subprocess.Popen(
        [sys.executable, "-m", "koordqueue.cli.main", "run", f"--kubeconfig={kubeconfig}",
         *elect, "--admission-period=0.2", "--metrics-port=0",
         "--health-port=0", "--log-format=console", "--log-level=info",
         "--scheduler-name=kq-failover-unused", *extra],
        stdout=log, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


STOP_WITHIN = 10.0
"""Seconds `koordqueue run` may take to exit on SIGTERM in these tests: it takes well under one
(each informer's stop shuts its watch's socket). When a stop left a watch blocked, every
informer waited out its 5 s join bound: ~35 s, unnoticed, in every test behind the fault
proxy (whose answers say Connection: close)."""


def stop_controller(proc: subprocess.Popen[str]) -> float:
    """SIGTERM, then SIGKILL after 30 s; the seconds it took to exit."""
    started = time.monotonic()
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    return time.monotonic() - started


class History:
    """Every QueueUnit status change in the namespace, in the order etcd committed them.

    The watch resumes from the last resourceVersion when it ends or fails (an etcd or API
    server restart), so no change is skipped; a 410 would re-list and is counted in `relists`
    (a test that must see every change asserts there was none).
    """

    def __init__(self, api_client: Any, namespace: str) -> None:
        self.changes: list[tuple[str, str, str]] = []  # (unit, quota, phase)
        self.times: list[float] = []  # time.monotonic() each change was seen
        self.admitted_seen = 0
        self.relists = 0
        self._api = k8s.CustomObjectsApi(api_client)
        self._ns = namespace
        self._stop = threading.Event()
        self._last: dict[str, str] = {}
        self.on_admitted: list[str] = []
        self.lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> History:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        rv = ""
        while not self._stop.is_set():
            try:
                stream = watch.Watch().stream(
                    self._api.list_namespaced_custom_object, "scheduling.x-k8s.io", "v1alpha1",
                    self._ns, "queueunits", resource_version=rv or None, timeout_seconds=5,
                    _request_timeout=(5, 15),
                )
                for event in stream:
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        if obj.get("code") == 410:
                            rv = ""
                            self.relists += 1
                        break
                    rv = obj["metadata"]["resourceVersion"]
                    self._record(event["type"], obj)
                    if self._stop.is_set():
                        break
            except Exception as exc:  # the API server or etcd is down: retry from rv
                if getattr(exc, "status", None) == 410:
                    rv = ""
                    self.relists += 1
                self._stop.wait(0.5)

    def _record(self, event_type: str, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        quota = (obj["metadata"].get("labels") or {}).get(QUOTA_NAME_LABEL, "")
        phase = "Deleted" if event_type == "DELETED" else str(
            (obj.get("status") or {}).get("phase") or "")
        with self.lock:
            if self._last.get(name) == phase:
                return
            self._last[name] = phase
            self.changes.append((name, quota, phase))
            self.times.append(time.monotonic())
            if phase in ADMITTED:
                self.admitted_seen += 1
                self.on_admitted.append(name)

    def slowest(self, n: int = 5) -> list[tuple[str, list[tuple[float, str]]]]:
        """The `n` units whose last change came last: their phases, in seconds since the first
        change (to see where a slow convergence waited)."""
        with self.lock:
            t0 = self.times[0] if self.times else 0.0
            steps: dict[str, list[tuple[float, str]]] = defaultdict(list)
            for (unit, _, phase), t in zip(self.changes, self.times, strict=True):
                steps[unit].append((round(t - t0, 1), phase))
        return sorted(steps.items(), key=lambda kv: kv[1][-1][0])[-n:]

    def final(self) -> dict[str, str]:
        with self.lock:
            return dict(self._last)


def admitted_peaks(changes: list[tuple[str, str, str]]) -> tuple[dict[str, int], dict[str, int]]:
    """(admissions per unit, peak admitted units per quota) from a QueueUnit history."""
    holding: dict[str, set[str]] = defaultdict(set)
    admissions: dict[str, int] = defaultdict(int)
    peak: dict[str, int] = defaultdict(int)
    for unit, quota, phase in changes:
        if phase in ADMITTED and unit not in holding[quota]:
            holding[quota].add(unit)
            admissions[unit] += 1
            peak[quota] = max(peak[quota], len(holding[quota]))
        elif phase in RELEASED or phase == "Deleted":
            holding[quota].discard(unit)
    return dict(admissions), dict(peak)


def complete(api: KubeApi, namespace: str, name: str, timeout: float = 120.0) -> None:
    """Mark a resumed Job finished, as its kubelet-run pods would (retried until resumed)."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    done = {"status": "True", "lastTransitionTime": now, "lastProbeTime": now,
            "reason": "CompletionsReached", "message": "done"}
    status = {"status": {"startTime": now, "completionTime": now, "succeeded": 1,
                         "conditions": [{"type": "SuccessCriteriaMet", **done},
                                        {"type": "Complete", **done}]}}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            job = api.get(JOB, name, namespace)
            if job is not None and job["spec"].get("suspend") is False:
                api.merge_patch(JOB, name, status, namespace, subresource="status")
                return
        except ApiError as exc:
            if not (exc.retryable or exc.conflict):
                raise
        time.sleep(0.3)
    raise AssertionError(f"job {namespace}/{name} was never resumed")


class Kubelet:
    """Completes every Job whose unit the history saw admitted, on a small thread pool."""

    def __init__(self, api: KubeApi, namespace: str, history: History) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self._api, self._ns, self._history = api, namespace, history
        self._pool = ThreadPoolExecutor(8)
        self._started: set[str] = set()

    def tick(self) -> None:
        with self._history.lock:
            fresh = [n for n in self._history.on_admitted if n not in self._started]
            self._started.update(fresh)
        for name in fresh:
            self._pool.submit(complete, self._api, self._ns, name)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
