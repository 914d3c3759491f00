"""Issue 26, Kueue's further kinds, on the real API server: what kubectl shows for each.

The kinds' CRDs (vendored in tests/crds/integrations/) are installed and one controller runs
with `--integrations` naming them. No framework operator runs on this plane, so the test
writes each workload's status as its operator would (through the status subresource).

For each kind, on a quota with room for one workload: the first, created held with the
quota label, gets its unit (the kind's suffix, the consumerRef, every pod set counted), is
admitted against the quota (`Admitted` event naming it) and released (its own release
field); an identical second one waits held. The first's unit follows its status to Running,
then Succeed, which gives the quota back: the second is admitted and released, then fails
and its unit is Failed. And: a workload admitted but not running is preempted by a
higher-priority Job and held again (unit back to Enqueued, `Preempted` event).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain import names
from koordqueue.domain.names import QUOTA_NAME_LABEL
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
NOW = "2026-01-01T00:00:00Z"

Obj = dict[str, Any]
Make = Callable[[str, str, str, str | None], Obj]
"""(name, namespace, quota, priority class) -> the held object's manifest, asking for 2 cpu."""


def _pod_spec(cpu: str = "1", priority_class: str | None = None) -> Obj:
    spec: Obj = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}},
            }
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return spec


def _meta(name: str, ns: str, quota: str) -> Obj:
    return {"name": name, "namespace": ns, "labels": {QUOTA_NAME_LABEL: quota}}


def _condition(kind: str, status: str = "True") -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": kind,
        "message": "written by the test, as the operator would",
        "lastTransitionTime": NOW,
    }


# --- the kinds ------------------------------------------------------------------------------
def appwrapper(name: str, ns: str, quota: str, priority_class: str | None) -> Obj:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{name}-job"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "template": {"spec": _pod_spec(priority_class=priority_class)},
        },
    }
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": _meta(name, ns, quota),
        "spec": {"suspend": True, "components": [{"template": job}]},
    }


def appwrapper_bad_path(obj: Obj) -> Obj:
    obj["spec"]["components"][0]["podSets"] = [{"path": "template.spec.nowhere"}]
    return obj


def _spec_suspended(obj: Obj) -> bool:
    return bool((obj.get("spec") or {}).get("suspend"))


@dataclass(frozen=True)
class KindCase:
    """One kind as the test drives it."""

    resource: str
    kind: str
    suffix: str
    make: Make
    suspended: Callable[[Obj], bool]
    running: Obj
    succeeded: Obj
    failed: Obj
    bad: Callable[[Obj], Obj]
    """The held manifest made invalid (a count, a path, a role the kind refuses)."""
    bad_field: str
    """The field the InvalidJob event names."""


KINDS: dict[str, KindCase] = {
    "appwrapper": KindCase(
        "appwrappers.workload.codeflare.dev",
        "AppWrapper",
        "aw-qu",
        appwrapper,
        _spec_suspended,
        {"phase": "Running", "conditions": [_condition("PodsReady")]},
        {"phase": "Succeeded", "conditions": [_condition("PodsReady", "False")]},
        {"phase": "Failed", "conditions": [_condition("ResourcesDeployed", "False")]},
        appwrapper_bad_path,
        "spec.components[0].podSets[0].path",
    ),
}
INTEGRATIONS = "batch/job,workload.codeflare.dev/appwrapper"


@pytest.fixture(scope="module")
def served(integration_crds: list[str], kubeconfig: Path) -> Iterator[RunningController]:
    with RunningController(kubeconfig, integrations=INTEGRATIONS) as rc:
        yield rc


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("kueue-kinds"))


# --- what an operator reads ---------------------------------------------------------------
def unit(kubectl: Any, ns: str, name: str) -> Obj:
    found = kq.get(kubectl, QU, name, ns)
    assert found is not None, f"no unit {ns}/{name}"
    return found


def wait_phase(kubectl: Any, ns: str, name: str, *phases: str) -> None:
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, name) in phases,
        what=f"{name} {'/'.join(phases)}",
        state=lambda: kq.get(kubectl, QU, name, ns),
    )


def admitted(kubectl: Any, ns: str, unit_name: str, quota: str) -> None:
    """The unit was admitted into `quota`, as its status and events say."""
    wait_phase(kubectl, ns, unit_name, "Dequeued", "Running")
    assert unit(kubectl, ns, unit_name)["status"]["admissions"]
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, unit_name, "Admitted"),
        what=f"{unit_name} Admitted event",
    )
    assert quota in events[0]["message"]


def write_status(kubectl: Any, case: KindCase, ns: str, name: str, status: Obj) -> None:
    """What the kind's operator would write (no operator runs on this plane)."""
    kubectl(
        "patch",
        case.resource,
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def is_held(kubectl: Any, case: KindCase, ns: str, name: str) -> bool:
    return case.suspended(kq.get(kubectl, case.resource, name, ns) or {})


# --- the tests ------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_held_admitted_released_followed_to_the_end_giving_quota_back(
    kubectl: Any, served: RunningController, ns: str, kind: str
) -> None:
    case = KINDS[kind]
    quota = kq.unique("kinds")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))  # room for one
    kubectl.create(case.make("first", ns, quota, None))
    first = f"first-{case.suffix}"
    kq.wait_for(lambda: kq.get(kubectl, QU, first, ns), what=f"{first} created")
    spec = unit(kubectl, ns, first)["spec"]
    assert (spec["consumerRef"]["kind"], spec["consumerRef"]["name"]) == (case.kind, "first")
    assert spec["resource"]["cpu"] == "2"  # every pod set, count x request
    admitted(kubectl, ns, first, quota)
    kq.wait_for(lambda: not is_held(kubectl, case, ns, "first"), what="first released")

    kubectl.create(case.make("second", ns, quota, None))
    second = f"second-{case.suffix}"
    wait_phase(kubectl, ns, second, "Enqueued")
    time.sleep(1.0)  # five admission rounds: it still waits, holds nothing, stays held
    status = unit(kubectl, ns, second)["status"]
    assert status["phase"] == "Enqueued" and not status.get("admissions"), status
    assert is_held(kubectl, case, ns, "second")

    write_status(kubectl, case, ns, "first", case.running)
    wait_phase(kubectl, ns, first, "Running")
    write_status(kubectl, case, ns, "first", case.succeeded)
    wait_phase(kubectl, ns, first, "Succeed")
    assert unit(kubectl, ns, first)["status"]["admissions"] == []

    admitted(kubectl, ns, second, quota)  # the freed quota goes to the one that waited
    kq.wait_for(lambda: not is_held(kubectl, case, ns, "second"), what="second released")
    write_status(kubectl, case, ns, "second", case.failed)
    wait_phase(kubectl, ns, second, "Failed")
    assert unit(kubectl, ns, second)["status"]["admissions"] == []


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_preempted_workload_is_held_again(
    kubectl: Any, served: RunningController, ns: str, kind: str
) -> None:
    case = KINDS[kind]
    quota = kq.unique("kinds-preempt")
    kubectl.apply(
        kq.quota(
            quota,
            max_={"cpu": "2", "memory": "4Gi"},
            annotations={
                "koord-queue/wait-for-pods-running": "true",
                "koord-queue/enable-queueunit-preemption": "true",
            },
        )
    )
    kubectl.create(case.make("low", ns, quota, None))
    low = f"low-{case.suffix}"
    admitted(kubectl, ns, low, quota)
    kq.wait_for(lambda: not is_held(kubectl, case, ns, "low"), what="low released")
    pc = kq.unique("urgent-pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 1000,
        }
    )
    kubectl.apply(kq.job("urgent", ns, quota, cpu="2", memory="1Gi", priority_class=pc))
    wait_phase(kubectl, ns, "urgent", "Dequeued")
    wait_phase(kubectl, ns, low, "Enqueued")
    kq.wait_for(lambda: is_held(kubectl, case, ns, "low"), what="low held again")
    events = kq.wait_for(lambda: kq.events_for(kubectl, ns, low, "Preempted"), what="event")
    assert events[0]["message"] == f"preempted by {ns}/urgent; back in queue"


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_bad_input_gets_an_event_naming_the_field_and_no_unit(
    kubectl: Any, served: RunningController, ns: str, kind: str
) -> None:
    case = KINDS[kind]
    quota = kq.unique("kinds-bad")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))
    kubectl.create(case.bad(case.make("bad", ns, quota, None)))
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, "bad", names.REASON_INVALID_JOB), what="InvalidJob"
    )
    assert events[0]["type"] == "Warning"
    assert case.bad_field in events[0]["message"], events[0]["message"]
    assert kq.get(kubectl, QU, f"bad-{case.suffix}", ns) is None
    assert is_held(kubectl, case, ns, "bad")  # never released
