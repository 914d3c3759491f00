"""Issue 35 point 9 on the real API server: Koord-Queue's feature gates as an operator meets
them. A gate whose dependency is off stops `koordqueue run` at start-up with a message naming
what to add (flag or environment), before it touches the cluster; with no --feature-gates the
defaults hold in the running controller: QueueUnitConditions on (conditions written),
QueueUnitActive off (the Job's `scheduling.x-k8s.io/active: "false"` is not honoured).
(The gates on: tests/e2e/test_unit_lifecycle.py, test_admission_checks.py.)"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
ACTIVE = "scheduling.x-k8s.io/active"


def _run(kubeconfig: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        [sys.executable, "-m", "koordqueue.cli.main", "run", f"--kubeconfig={kubeconfig}",
         *args],
        check=False, capture_output=True, text=True, timeout=60,
        env={**os.environ, **(env or {})},
    )


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("MaximumExecutionTime=true", "needs QueueUnitActive enabled too"),
        ("QueueUnitRequeueState=true,QueueUnitConditions=false",
         "needs QueueUnitConditions enabled too"),
    ],
)
def test_a_gate_whose_dependency_is_off_stops_the_start_naming_it(
    kubeconfig: Path, line: str, says: str
) -> None:
    for how in ("flag", "env"):
        if how == "flag":
            done = _run(kubeconfig, f"--feature-gates={line}")
        else:
            done = _run(kubeconfig, env={"KOORDQUEUE_FEATURE_GATES": line})
        assert done.returncode == 2, (how, done.returncode, done.stderr[-2000:])
        assert "--feature-gates" in done.stderr and says in done.stderr, (how, done.stderr)


@pytest.fixture(scope="module")
def defaults(kubeconfig: Path) -> Iterator[RunningController]:
    with RunningController(kubeconfig) as rc:  # no feature_gates: Koord-Queue's defaults
        yield rc


def test_default_gates_write_conditions_and_do_not_read_the_active_annotation(
    kubectl: Any, defaults: RunningController
) -> None:
    ns = kq.namespace(kubectl, kq.unique("gates"))
    quota = kq.unique("gates")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "8Gi"}))
    kq.wait_for(lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue"),
                what="queue")
    kubectl.apply(kq.job("paused", ns, quota, annotations={ACTIVE: "false"}))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "paused") == "Dequeued", what="admitted anyway",
                state=lambda: (kq.get(kubectl, QU, "paused", ns) or {}).get("status"))
    kq.wait_for(lambda: not (kq.get(kubectl, "job", "paused", ns) or {})["spec"]["suspend"],
                what="Job resumed")
    unit = kq.get(kubectl, QU, "paused", ns)
    assert unit is not None
    conditions = {c["type"]: (c["status"], c["reason"]) for c in unit["status"]["conditions"]}
    assert conditions["Admitted"] == ("True", "Admitted")
    assert conditions["QuotaReserved"][0] == "True"
