"""Issue 18 item 11 on the real API server: the Job extension as an operator sees it with kubectl.

One story, two Jobs on a one-CPU quota, with `--job-running-timeout`: annotations on the Jobs,
unit status messages (every version, from `kubectl get --watch`), resume, the running timeout
(TimeoutBackoff, Job suspended again), the back-off ending, SchedSucceed resuming a Job with the
`Resume` event, and a finished Job's unit with its admissions cleared. There is no kubelet or
Job controller on this plane, so the test writes Job status the way the Job controller would.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
HAS_ENQUEUED = "koord-queue/job-has-enqueued"
ENQUEUE_TS = "koord-queue/job-enqueue-timestamp"
DEQUEUE_TS = "koord-queue/job-dequeue-timestamp"
# time.Now().String() in Go: nanoseconds without trailing zeros, zone, monotonic reading
GO_TIME = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{1,9})? \+0000 UTC m=\+\d+\.\d{9}$")
RUNNING_TIMEOUT = 8.0  # second's pod must be reported running within it, on a loaded CI
BACKOFF_TIME = 3.0


class UnitHistory:
    """`kubectl get queueunits --watch -o json`: every version of every unit, in order."""

    def __init__(self, kubectl: Any, namespace: str) -> None:
        cmd = [
            str(kubectl.binary),
            f"--kubeconfig={kubectl.kubeconfig}",
            "get",
            QU,
            "-n",
            namespace,
            "--watch",
            "-o",
            "json",
        ]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        self._versions: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        decoder, buffer = json.JSONDecoder(), ""
        for line in self._proc.stdout:
            buffer += line
            while buffer.strip():
                try:
                    obj, end = decoder.raw_decode(buffer.lstrip())
                except json.JSONDecodeError:
                    break  # an object split over lines: read on
                buffer = buffer.lstrip()[end:]
                with self._lock:
                    self._versions.append(obj)

    def statuses(self, name: str) -> list[tuple[str, str]]:
        """(phase, message) of each version of unit `name` that has a phase, repeats merged."""
        with self._lock:
            seen = [
                (
                    (v.get("status") or {}).get("phase", ""),
                    (v.get("status") or {}).get("message", ""),
                )
                for v in self._versions
                if v["metadata"]["name"] == name and (v.get("status") or {}).get("phase")
            ]
        return [s for i, s in enumerate(seen) if i == 0 or seen[i - 1] != s]

    def close(self) -> None:
        self._proc.terminate()
        self._proc.wait(timeout=10)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _job_status(kubectl: Any, ns: str, name: str, status: dict[str, Any]) -> None:
    """Write Job status as the Job controller would (this plane runs none)."""
    kubectl(
        "patch",
        "job",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def _complete(kubectl: Any, ns: str, name: str) -> None:
    now = _now()
    done = {"lastTransitionTime": now, "lastProbeTime": now, "reason": "CompletionsReached"}
    _job_status(
        kubectl,
        ns,
        name,
        {
            "active": 0,
            "ready": 0,
            "succeeded": 1,
            "completionTime": now,
            "conditions": [
                {"type": "SuccessCriteriaMet", "status": "True", "message": "done", **done},
                {"type": "Complete", "status": "True", "message": "done", **done},
            ],
        },
    )


def _job(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, "job", name, ns)
    assert obj is not None, f"job {name} is gone"
    return obj


def _unit(kubectl: Any, ns: str, name: str) -> dict[str, Any]:
    obj = kq.get(kubectl, QU, name, ns)
    assert obj is not None, f"unit {name} is gone"
    return obj


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("jobext"))


def test_job_extension_annotations_messages_resume_running_timeout_and_finish(
    kubectl: Any, kubeconfig: Any, ns: str
) -> None:
    quota = kq.unique("jobext")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    history = UnitHistory(kubectl, ns)
    rc = RunningController(
        kubeconfig, job_running_timeout=RUNNING_TIMEOUT, job_backoff_time=BACKOFF_TIME
    )
    try:
        rc.start()
        # 1. enqueue annotates the Job; admission resumes it and stamps the dequeue time
        kubectl.apply(kq.job("first", ns, quota, cpu="1"))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "first") == "Dequeued", what="first admitted")
        first = kq.wait_for(
            lambda: (j := _job(kubectl, ns, "first"))["spec"]["suspend"] is False and j,
            what="first resumed",
        )
        annotations = first["metadata"]["annotations"]
        assert annotations[HAS_ENQUEUED] == "true"
        assert GO_TIME.match(annotations[ENQUEUE_TS]), annotations[ENQUEUE_TS]
        assert GO_TIME.match(annotations[DEQUEUE_TS]), annotations[DEQUEUE_TS]
        unit = _unit(kubectl, ns, "first")
        assert unit["metadata"]["annotations"][HAS_ENQUEUED] == "true"
        assert unit["spec"]["podSet"][0]["name"] == "first"
        assert unit["status"]["admissions"] == [{"name": "first", "replicas": 1}]

        # 2. a second Job waits for the quota; its unit started with message "Enqueued"
        kubectl.apply(kq.job("second", ns, quota, cpu="1"))
        kq.wait_for(
            lambda: kq.events_for(kubectl, ns, "second", "FailedScheduling"), what="second waits"
        )
        # (the watch's output can trail what `kubectl get` reads: wait for its first version)
        seen = kq.wait_for(lambda: history.statuses("second"), what="second's unit watched")
        assert seen[0] == ("Enqueued", "Enqueued")
        assert _job(kubectl, ns, "second")["metadata"]["annotations"][HAS_ENQUEUED] == "true"

        # 3. first never gets a running pod: the running timeout backs it off, suspends it,
        # and the freed quota goes to second. Second's own running-timeout clock starts then,
        # so its pod is reported running first, before the slower looks at first's history.
        kq.wait_for(
            lambda: kq.phase(kubectl, ns, "first") == "TimeoutBackoff",
            timeout=RUNNING_TIMEOUT + 20,
            what="running timeout",
        )
        kq.wait_for(lambda: kq.phase(kubectl, ns, "second") == "Dequeued", what="second admitted")
        _job_status(kubectl, ns, "second", {"startTime": _now(), "active": 1, "ready": 1})
        kq.wait_for(
            lambda: ("TimeoutBackoff", "Backoff due to running timeout")
            in history.statuses("first"),
            what="first's back-off in the watch", state=lambda: history.statuses("first"),
        )
        suspended = kq.wait_for(
            lambda: (j := _job(kubectl, ns, "first"))["spec"]["suspend"] is True and j,
            what="first suspended again",
        )
        assert suspended["metadata"]["annotations"][DEQUEUE_TS] == ""

        # 4. second's pod runs: its unit says Running (and it never timed out itself)
        kq.wait_for(lambda: kq.phase(kubectl, ns, "second") == "Running", what="second running")
        kq.wait_for(lambda: ("Running", "Running") in history.statuses("second"),
                    what="second's Running in the watch", state=lambda: history.statuses("second"))
        assert not [s for s in history.statuses("second") if s[0] == "TimeoutBackoff"], (
            f"second timed out before its running status was written: {history.statuses('second')}"
        )

        # 5. first's back-off ends: Enqueued again, then it waits for second's quota
        kq.wait_for(
            lambda: ("Enqueued", "Enqueued because backoff timeout") in history.statuses("first"),
            timeout=BACKOFF_TIME + 20,
            what="back-off over",
            state=lambda: history.statuses("first"),
        )
        assert _job(kubectl, ns, "first")["spec"]["suspend"] is True

        # 6. a scheduler reports SchedSucceed for first: its Job is resumed, with the event
        kubectl(
            "patch",
            QU,
            "first",
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"phase": "SchedSucceed", "message": "placed"}}),
        )
        kq.wait_for(
            lambda: _job(kubectl, ns, "first")["spec"]["suspend"] is False, what="first resumed"
        )
        events = kq.wait_for(
            lambda: [
                e
                for e in kq.events_for(kubectl, ns, "first", "Resume")
                if e["involvedObject"]["kind"] == "Job"
            ],
            what="Resume event",
        )
        assert (events[0]["type"], events[0]["message"]) == (
            "Normal",
            "Job is resumed by job-extension",
        )

        # 7. second completes: Succeed, "Succeeded", admissions cleared
        _complete(kubectl, ns, "second")
        kq.wait_for(lambda: kq.phase(kubectl, ns, "second") == "Succeed", what="second done")
        status = _unit(kubectl, ns, "second")["status"]
        assert (status["message"], status["admissions"]) == ("Succeeded", [])
    finally:
        rc.stop()
        history.close()
