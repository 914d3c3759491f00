"""SPEC 2.1, 2.5, 2.6 on the real API server: Jobs -> QueueUnits -> CheckUsage -> resumed Jobs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.names import QUOTA_NAME_LABEL
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

QU = "queueunits.scheduling.x-k8s.io"
EQ = "elasticquotas.scheduling.sigs.k8s.io"


@pytest.fixture
def ns(kubectl: Any) -> str:
    return kq.namespace(kubectl, kq.unique("adm"))


def _unit(kubectl: Any, ns: str, name: str) -> dict[str, Any] | None:
    return kq.get(kubectl, QU, name, ns)


def _suspended(kubectl: Any, ns: str, name: str) -> bool | None:
    job = kq.get(kubectl, "job", name, ns)
    return None if job is None else bool(job["spec"].get("suspend"))


def _complete_job(kubectl: Any, ns: str, name: str) -> None:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "status": {
            "startTime": now,
            "completionTime": now,
            "succeeded": 1,
            "conditions": [
                {
                    "type": "SuccessCriteriaMet",
                    "status": "True",
                    "lastTransitionTime": now,
                    "lastProbeTime": now,
                    "reason": "CompletionsReached",
                    "message": "done",
                },
                {
                    "type": "Complete",
                    "status": "True",
                    "lastTransitionTime": now,
                    "lastProbeTime": now,
                    "reason": "CompletionsReached",
                    "message": "done",
                },
            ],
        }
    }
    kubectl(
        "patch",
        "job",
        name,
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(status),
    )


def test_suspended_job_gets_queue_unit_with_owner_metadata_resources_and_priority(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("jobext")
    pc = kq.unique("pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 7,
        }
    )
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))  # too small: the unit stays Enqueued
    kubectl.apply(
        kq.job(
            "train",
            ns,
            quota,
            cpu="750m",
            memory="1Gi",
            parallelism=2,
            priority_class=pc,
            annotations={"team": "ml"},
        )
    )
    unit = kq.wait_for(lambda: _unit(kubectl, ns, "train"), what="queue unit")
    job = kq.get(kubectl, "job", "train", ns)
    assert job is not None
    owner = unit["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("Job", "train", job["metadata"]["uid"])
    assert unit["metadata"]["labels"][QUOTA_NAME_LABEL] == quota
    assert unit["metadata"]["annotations"]["team"] == "ml"
    assert unit["spec"]["resource"] == {"cpu": "1500m", "memory": "2Gi"}
    assert unit["spec"]["priority"] == 7
    assert unit["spec"]["podSet"][0]["count"] == 2
    assert unit["spec"]["consumerRef"]["name"] == "train"
    kq.wait_for(lambda: kq.phase(kubectl, ns, "train") == "Enqueued" or None, timeout=5)


def test_job_not_created_suspended_gets_no_unit(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    kubectl.apply(kq.job("free", ns, "whatever", suspend=False))
    kubectl.apply(kq.job("queued", ns, "whatever"))
    kq.wait_for(lambda: _unit(kubectl, ns, "queued"), what="unit for the suspended job")
    assert _unit(kubectl, ns, "free") is None


def test_admitted_job_is_resumed_and_unit_dequeued(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("admit")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2", "memory": "4Gi"}))
    kubectl.apply(kq.job("fits", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "fits") == "Dequeued", what="Dequeued")
    kq.wait_for(lambda: _suspended(kubectl, ns, "fits") is False, what="job resumed")
    events = kq.events_for(kubectl, ns, "fits", "Admitted")
    assert events and quota in events[0]["message"]


def test_units_are_admitted_only_up_to_quota(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("upto")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}))
    for i in range(3):
        kubectl.apply(kq.job(f"j{i}", ns, quota, cpu="1"))
    kq.wait_for(
        lambda: sum(kq.phase(kubectl, ns, f"j{i}") == "Dequeued" for i in range(3)) == 2,
        what="two admitted",
    )
    waiting = [f"j{i}" for i in range(3) if kq.phase(kubectl, ns, f"j{i}") != "Dequeued"]
    assert len(waiting) == 1
    assert _suspended(kubectl, ns, waiting[0]) is True
    ev = kq.wait_for(lambda: kq.events_for(kubectl, ns, waiting[0], "FailedScheduling"))
    assert ev[0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"
    unit = _unit(kubectl, ns, waiting[0])
    assert unit is not None and unit["status"]["message"] == ev[0]["message"]


def test_unknown_quota_reports_queue_not_found_then_maps_when_quota_appears(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("later")
    kubectl.apply(kq.job("early", ns, quota))
    events = kq.wait_for(lambda: kq.events_for(kubectl, ns, "early", "QueueNotFound"), what="event")
    assert events[0]["type"] == "Warning"
    assert events[0]["message"] == f"queue {quota} not found for queueUnit {ns}/early"
    assert kq.phase(kubectl, ns, "early") in (None, "Enqueued")
    kubectl.apply(kq.quota(quota))
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, "early") == "Dequeued", what="admitted after quota appears"
    )
    # exactly one QueueNotFound event object (repeats aggregate, none after mapping)
    assert len(kq.events_for(kubectl, ns, "early", "QueueNotFound")) == 1


def test_unit_without_quota_label_is_never_admitted_and_says_why(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    kubectl.apply(kq.job("nolabel", ns, None))
    # the unit starts with message "Enqueued" (the job extension's); the round then says why
    unit = kq.wait_for(
        lambda: (
            (u := _unit(kubectl, ns, "nolabel"))
            and (u.get("status") or {}).get("message") not in (None, "Enqueued")
            and u
        ),
        what="status message",
    )
    assert "no quota label" in unit["status"]["message"]
    assert kq.phase(kubectl, ns, "nolabel") in (None, "Enqueued")
    assert _suspended(kubectl, ns, "nolabel") is True
    assert kq.events_for(kubectl, ns, "nolabel") == []  # upstream sends no event; status says it


def test_ancestor_exhausted_blocks_unit_whose_own_quota_has_room(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    parent, a, b = kq.unique("parent"), kq.unique("child-a"), kq.unique("child-b")
    kubectl.apply(kq.quota(parent, max_={"cpu": "2"}))
    kubectl.apply(kq.quota(a, parent=parent, max_={"cpu": "2"}))
    kubectl.apply(kq.quota(b, parent=parent, max_={"cpu": "2"}))
    kubectl.apply(kq.job("first", ns, a, cpu="2"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "first") == "Dequeued", what="first admitted")
    kubectl.apply(kq.job("second", ns, b, cpu="1"))
    ev = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, "second", "FailedScheduling"), what="rejection"
    )
    assert ev[0]["message"] == f"limited quotaName:{parent}, limited resKey:cpu,"
    assert _suspended(kubectl, ns, "second") is True


def test_cycle_and_missing_ancestor_are_reported_verbatim(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    x, y, orphan, ghost = kq.unique("x"), kq.unique("y"), kq.unique("orphan"), kq.unique("ghost")
    kubectl.apply(kq.quota(x, parent=y))
    kubectl.apply(kq.quota(y, parent=x))
    kubectl.apply(kq.quota(orphan, parent=ghost))
    kubectl.apply(kq.job("loop", ns, x))
    kubectl.apply(kq.job("lost", ns, orphan))
    loop = kq.wait_for(lambda: kq.events_for(kubectl, ns, "loop", "FailedScheduling"), what="cycle")
    assert loop[0]["message"] == (
        f"CheckUsage found cycle reference, item:{ns}/loop, quotaName:{x}, visited quota: {x},{y}"
    )
    lost = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, "lost", "FailedScheduling"), what="missing"
    )
    assert lost[0]["message"] == (
        f"CheckUsage found quota not exist, item:{ns}/lost, quotaName:{ghost}, "
        f"visited quota: {orphan},{ghost}"
    )
    unit = _unit(kubectl, ns, "lost")
    assert unit is not None and unit["status"]["message"] == lost[0]["message"]


def test_job_completion_releases_quota(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("release")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    kubectl.apply(kq.job("one", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "one") == "Dequeued", what="one admitted")
    kubectl.apply(kq.job("two", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "two", "FailedScheduling"), what="two waits")
    _complete_job(kubectl, ns, "one")
    kq.wait_for(lambda: kq.phase(kubectl, ns, "one") == "Succeed", what="one succeeded")
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, "two") == "Dequeued", what="two admitted after release"
    )


def test_job_deletion_deletes_unit_and_releases_quota(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("delete")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    kubectl.apply(kq.job("holder", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "holder") == "Dequeued", what="holder admitted")
    kubectl.apply(kq.job("next", ns, quota, cpu="1"))
    kq.wait_for(lambda: _unit(kubectl, ns, "next"), what="next unit")
    kubectl("delete", "job", "holder", "-n", ns)
    kq.wait_for(lambda: _unit(kubectl, ns, "holder") is None, what="unit deleted with its job")
    kq.wait_for(lambda: kq.phase(kubectl, ns, "next") == "Dequeued", what="next admitted")


def test_quota_deleted_while_units_wait_reports_queue_not_found_until_it_returns(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("flap")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    kubectl.apply(kq.job("a", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "a") == "Dequeued", what="a admitted")
    kubectl.apply(kq.job("b", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "FailedScheduling"), what="b waits")
    kubectl("delete", EQ, quota, "-n", "default")
    ev = kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "QueueNotFound"), what="QueueNotFound")
    assert ev[0]["message"] == f"queue {quota} not found for queueUnit {ns}/b"
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}))
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, "b") == "Dequeued", what="b admitted after quota returns"
    )


def test_oversell_rate_flag_scales_limits(kubectl: Any, kubeconfig: Path) -> None:
    ns = kq.namespace(kubectl, kq.unique("oversell"))
    quota = kq.unique("oversell")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}))
    with RunningController(kubeconfig, oversell_rate="1.5"):
        for i in range(4):
            kubectl.apply(kq.job(f"o{i}", ns, quota, cpu="1"))
        kq.wait_for(
            lambda: sum(kq.phase(kubectl, ns, f"o{i}") == "Dequeued" for i in range(4)) == 3,
            what="3 CPU admitted against max 2 × 1.5",
        )
        assert sum(kq.phase(kubectl, ns, f"o{i}") == "Dequeued" for i in range(4)) == 3


def test_unmapped_units_are_visible_in_the_metric(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    from koordqueue.kube.metrics import REGISTRY

    kubectl.apply(kq.job("nolabel-metric", ns, None))
    value = kq.wait_for(
        lambda: REGISTRY.get_sample_value(
            "koordqueue_units_unmapped", {"reason": "no quota label"}
        ),
        what="koordqueue_units_unmapped{reason='no quota label'} > 0",
    )
    assert value >= 1


def test_block_policy_holds_later_units_behind_an_oversized_head(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("block")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}, policy="Block"))
    kubectl.apply(kq.job("holder", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "holder") == "Dequeued", what="holder admitted")
    pc = kq.unique("block-pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 10,
        }
    )
    kubectl.apply(kq.job("head", ns, quota, cpu="2", priority_class=pc))
    kq.wait_for(
        lambda: kq.events_for(kubectl, ns, "head", "FailedScheduling"), what="head rejected"
    )
    kubectl.apply(kq.job("small", ns, quota, cpu="1"))
    kq.wait_for(lambda: _unit(kubectl, ns, "small"), what="small unit")
    import time as _time

    _time.sleep(2)  # several rounds: Block must keep `small` behind `head` although it fits
    assert kq.phase(kubectl, ns, "small") == "Enqueued"
    kubectl("delete", "job", "holder", "-n", ns)
    kq.wait_for(lambda: kq.phase(kubectl, ns, "head") == "Dequeued", what="head admitted first")
    assert kq.phase(kubectl, ns, "small") == "Enqueued"


def test_priority_policy_lets_a_small_unit_pass_an_oversized_one(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("prio")
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}, policy="Priority"))
    kubectl.apply(kq.job("big", ns, quota, cpu="3"))
    kubectl.apply(kq.job("small", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "small") == "Dequeued", what="small admitted")
    ev = kq.wait_for(
        lambda: kq.events_for(kubectl, ns, "big", "FailedScheduling"), what="big rejected"
    )
    assert ev[0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"
    assert kq.phase(kubectl, ns, "big") == "Enqueued"


def test_sched_failed_unit_backs_off_releases_quota_and_suspends_its_job(
    kubectl: Any, controller: RunningController, ns: str
) -> None:
    quota = kq.unique("backoff")
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    kubectl.apply(kq.job("flaky", ns, quota, cpu="1"))
    kq.wait_for(lambda: _suspended(kubectl, ns, "flaky") is False, what="flaky resumed")
    kubectl.apply(kq.job("patient", ns, quota, cpu="1"))
    kq.wait_for(lambda: _unit(kubectl, ns, "patient"), what="patient unit")
    kubectl(
        "patch",
        QU,
        "flaky",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": {"phase": "SchedFailed", "message": "pods unschedulable"}}),
    )
    kq.wait_for(lambda: kq.phase(kubectl, ns, "flaky") == "TimeoutBackoff", what="Backoff phase")
    unit = _unit(kubectl, ns, "flaky")
    assert unit is not None and unit["status"]["attempts"] == 1
    assert "retry 1 in" in unit["status"]["message"]
    kq.wait_for(lambda: _suspended(kubectl, ns, "flaky") is True, what="flaky suspended again")
    kq.wait_for(
        lambda: kq.phase(kubectl, ns, "patient") == "Dequeued", what="released quota reused"
    )
    assert kq.events_for(kubectl, ns, "flaky", "Backoff")
