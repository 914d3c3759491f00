"""CPU per watch event read and per API answer decoded (issues 11 and 19: JSON decoding was
6-16 % (watch events) and ~16 % (KubeApi answers) of the controller's CPU samples).

Before: kubernetes.watch.Watch's reader (line split, UTF-8 decode, json.loads) and json.loads
of an answer. After: the informer's WatchStream and api.loads (orjson). A fixed ~1 KB pod
event, one per chunk as the API server flushes them. Reports the best of several repeats in
CPU time (time.process_time) and as a multiple of the calibration yardstick
(bench/calibration.py). Run: `python bench/bench_decode.py`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes.watch import Watch

from bench.calibration import best_cpu_seconds, calibrate
from koordqueue.kube.api import loads
from koordqueue.kube.informer import WatchStream

_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "job-1234-worker-7", "namespace": "team-a",
        "uid": "5f0c7a1e-2b1d-4c55-9a0e-1d2f3a4b5c6d",
        "resourceVersion": "123456", "creationTimestamp": "2026-12-03T10:00:00Z",
        "labels": {"app": "trainer", "koord-queue/job": "job-1234", "role": "worker"},
        "annotations": {"scheduling.k8s.io/group-name": "job-1234", "koord-queue/queue": "q-a"},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "job-1234",
                             "uid": "0a1b2c3d-4e5f-6789-abcd-ef0123456789", "controller": True}],
    },
    "spec": {
        "schedulerName": "koordqueue", "priority": 100, "nodeName": "node-17",
        "containers": [{"name": "main", "image": "registry.example/trainer:1.2.3",
                        "args": ["--epochs", "10", "--lr", "0.001"],
                        "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                      "limits": {"cpu": "1", "memory": "2Gi"}}}],
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "batch",
                         "effect": "NoSchedule"}],
    },
    "status": {"phase": "Running", "qosClass": "Burstable", "podIP": "10.1.2.3",
               "conditions": [{"type": "Ready", "status": "True",
                               "lastTransitionTime": "2026-12-03T10:00:05Z"}]},
}
_LINE = json.dumps({"type": "MODIFIED", "object": _POD}).encode() + b"\n"
_BODY = json.dumps(_POD).encode()
_EVENTS = 5_000


class _Response:
    status = 200

    def stream(self, amt: Any = None, decode_content: bool = False) -> Iterator[bytes]:
        for _ in range(_EVENTS):
            yield _LINE

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


def _watch_before() -> None:
    for _ in Watch().stream(lambda **kw: _Response(), timeout_seconds=60):  # type: ignore[no-untyped-call]
        pass


def _watch_after() -> None:
    for _ in WatchStream().events(_Response()):
        pass


def _bodies(decode: Callable[[bytes], Any]) -> Callable[[], None]:
    def run() -> None:
        for _ in range(_EVENTS):
            decode(_BODY)
    return run


def main() -> None:
    cal = calibrate()
    print(cal.line())
    print(f"event line {len(_LINE)} B, answer body {len(_BODY)} B")
    for label, fn in (
        ("watch event, kubernetes Watch (before)", _watch_before),
        ("watch event, WatchStream+orjson (after)", _watch_after),
        ("answer, json.loads (before)", _bodies(json.loads)),
        ("answer, api.loads/orjson (after)", _bodies(loads)),
    ):
        per = best_cpu_seconds(fn) / _EVENTS
        refs = cal.in_py_refs(per) * 1e6
        print(f"{label}: {per * 1e6:.2f} us CPU each ({refs:.1f} micro-py-ref)")


if __name__ == "__main__":
    main()
