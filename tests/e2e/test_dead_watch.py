"""A watch that dies silently under a running controller (issue 12): noticed in seconds.

`koordqueue run` talks to the API server through tests/controlplane/faultproxy.py. Its Job
watch is answered and delivers (a first Job is admitted through it), then goes silent with the
connection open, as when a NAT entry or a middlebox loses the server's side: no event, no
bookmark, no close. A Job created after that can reach the controller only once the informer
gives the dead watch up and opens a new one. With the liveness deadline (no byte for
`KOORDQUEUE_WATCH_IDLE_TIMEOUT`, 75 s by default, 10 s here) that happens within the deadline;
before it, only the read timeout ended such a watch (330 s), or the periodic resync (60 s by
default; disabled here with a 600 s period so it cannot rescue the Job).

Asserted as an operator sees it: the second Job is resumed, its QueueUnit is Dequeued and
carries the admission event, within the deadline plus a few seconds; the controller logged
that it gave a silent Job watch up, and resumed it without re-listing the Jobs.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain import names
from koordqueue.kube.api import JOB, KubeApi
from koordqueue.kube.informer import WATCH_IDLE_TIMEOUT_ENV
from tests.controlplane.faultproxy import FaultProxy, Rule
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.replay import STOP_WITHIN, start_controller, stop_controller

IDLE = 10.0  # the controller's liveness deadline in this test (seconds)
JOB_WATCH = r"/apis/batch/v1/jobs\?(.*&)?watch=(1|true)"


def resumed(api: KubeApi, ns: str, name: str) -> bool:
    job = api.get(JOB, name, ns)
    return job is not None and job["spec"].get("suspend") is False


def test_a_job_watch_that_dies_silently_is_replaced_within_the_idle_deadline(
    control_plane: ControlPlane, kubectl: Any, api_client: Any, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns = kq.namespace(kubectl, kq.unique("deadwatch"))
    quota = kq.unique("dw")
    kubectl.apply(kq.quota(quota, max_={"cpu": "4", "memory": "1Ti"}))
    api = KubeApi(api_client)
    # the controller's first Job watch delivers until silence(), then nothing, held open
    rules = [Rule("stall", methods=frozenset({"GET"}), path=JOB_WATCH, times=1, after=math.inf)]
    monkeypatch.setenv(WATCH_IDLE_TIMEOUT_ENV, str(IDLE))  # inherited by the controller
    log_path = tmp_path / "controller.log"
    with FaultProxy(control_plane, rules, faults_for=3600) as proxy, open(log_path, "w") as log:
        proc = start_controller(proxy.write_kubeconfig(tmp_path / "kubeconfig"), log,
                                "--resync-period=600")
        try:
            kq.wait_for(lambda: proxy.fired["stall"] == 1, timeout=60,
                        what="the controller's Job watch opened through the proxy",
                        state=lambda: log_path.read_text()[-3000:])
            # the watch works: a Job created now is admitted through it
            api.create(JOB, kq.job("before", ns, quota, cpu="1", memory="1Mi"), ns)
            kq.wait_for(lambda: resumed(api, ns, "before"), timeout=IDLE / 2,
                        what="the first Job resumed through the live watch",
                        state=lambda: log_path.read_text()[-3000:])
            assert kq.phase(kubectl, ns, "before") == "Dequeued"

            proxy.silence()
            kq.wait_for(lambda: proxy.silenced, timeout=5, what="the Job watch gone silent")
            created = time.monotonic()
            api.create(JOB, kq.job("after", ns, quota, cpu="1", memory="1Mi"), ns)
            kq.wait_for(lambda: resumed(api, ns, "after"), timeout=IDLE + 15, interval=0.2,
                        what="the second Job resumed after the dead watch was replaced",
                        state=lambda: log_path.read_text()[-3000:])
            waited = time.monotonic() - created
            assert proc.poll() is None, "the controller exited"
        finally:
            stopped_in = stop_controller(proc)
    assert stopped_in < STOP_WITHIN, f"the controller took {stopped_in:.1f} s to exit on SIGTERM"
    text = log_path.read_text()
    assert kq.phase(kubectl, ns, "after") == "Dequeued"
    events = kq.events_for(kubectl, ns, "after")
    assert names.REASON_ADMITTED in {e["reason"] for e in events}, events
    silent = [ln for ln in text.splitlines() if "watch silent past its deadline" in ln]
    assert any("jobs" in ln for ln in silent), text[-3000:]
    # resumed from the last version the dead watch delivered: no re-list of the Jobs
    assert not [ln for ln in text.splitlines() if "re-listing" in ln and "jobs" in ln]
    assert proxy.fired["stall"] == 1 and len(proxy.silenced) == 1
    # within the deadline (counted from the last byte, before the silence) plus the time to
    # re-watch and admit; the old read timeout was 330 s
    assert waited < IDLE + 5, waited
    print(f"second Job resumed {waited:.1f} s after its watch went silent (deadline {IDLE} s)")
