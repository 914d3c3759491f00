"""Jobs outside the queue (issue 33 part 7), on the controller's one workload path.

- A Job labelled after it was made reaches its unit: the unit copies the Job's labels only
  when it is made, so a Job created suspended without the label stayed unmapped forever.
- A Job that names a quota but was created running (no webhook to hold it) gets one Warning
  event saying it runs outside quota, not one per resync.

Both fail on the code before this change (no label patch of the unit; no event).
"""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.api import JOB, QUEUE_UNIT
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_job_extension_controller import job, make, unit


def create_job(api: MemoryApi, name: str, labels: dict[str, str], suspend: bool) -> dict[str, Any]:
    return api.create(
        JOB,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": "ns", "labels": labels},
            "spec": {
                "suspend": suspend,
                "parallelism": 1,
                "template": {
                    "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
                },
            },
        },
        "ns",
    )


def relabel(api: MemoryApi, name: str, labels: dict[str, str]) -> dict[str, Any]:
    obj = copy.deepcopy(job(api, name))
    obj["metadata"]["labels"] = labels
    obj["metadata"]["resourceVersion"] = str(int(obj["metadata"]["resourceVersion"]) + 1000)
    api.objects[api._key(JOB, "ns", name)] = obj
    return obj


def test_a_job_labelled_after_it_was_made_reaches_its_unit_and_is_admitted() -> None:
    api = MemoryApi()
    c, _ = make(api)
    jobs = c.consumers["Job"]
    jobs.on_event("ADDED", create_job(api, "late", {"app": "x"}, suspend=True))
    assert QUOTA_NAME_LABEL not in unit(api, "late")["metadata"]["labels"]
    c.admission_round()
    assert (unit(api, "late").get("status") or {}).get("phase") == "Enqueued"
    jobs.on_event("MODIFIED", relabel(api, "late", {"app": "x", QUOTA_NAME_LABEL: "q"}))
    assert unit(api, "late")["metadata"]["labels"][QUOTA_NAME_LABEL] == "q"
    c.admission_round()
    assert unit(api, "late")["status"]["phase"] == "Dequeued"
    assert job(api, "late")["spec"]["suspend"] is False


def test_an_admitted_units_quota_label_does_not_follow_the_job() -> None:
    api = MemoryApi()
    c, _ = make(api, cpu="2")
    jobs = c.consumers["Job"]
    jobs.on_event("ADDED", create_job(api, "a", {QUOTA_NAME_LABEL: "q"}, suspend=True))
    c.admission_round()
    assert unit(api, "a")["status"]["phase"] == "Dequeued"
    jobs.on_event("MODIFIED", relabel(api, "a", {QUOTA_NAME_LABEL: "other", "team": "ml"}))
    labels = unit(api, "a")["metadata"]["labels"]
    assert labels[QUOTA_NAME_LABEL] == "q" and labels["team"] == "ml"


def outside_events(api: MemoryApi, name: str) -> list[dict[str, Any]]:
    return [
        e
        for e in api.events
        if e["reason"] == names.REASON_RUNS_OUTSIDE_QUOTA and e["involvedObject"]["name"] == name
    ]


def test_a_labelled_job_created_running_is_told_once_that_it_runs_outside_quota() -> None:
    api = MemoryApi()
    c, _ = make(api)
    running = create_job(api, "free", {QUOTA_NAME_LABEL: "q"}, suspend=False)
    c.consumers["Job"].on_event("ADDED", running)
    for _ in range(3):
        c.resync()  # every resync looks at it again
    events = outside_events(api, "free")
    assert len(events) == 1, events
    assert events[0]["type"] == "Warning"
    assert events[0]["message"].startswith(
        "Job free names quota q but was created running: it runs outside quota"
    )
    assert api.get(QUEUE_UNIT, "free", "ns") is None


def test_no_warning_for_jobs_the_queue_does_not_concern() -> None:
    api = MemoryApi()
    c, _ = make(api)
    jobs = c.consumers["Job"]
    jobs.on_event("ADDED", create_job(api, "plain", {"app": "x"}, suspend=False))  # no label
    finished = create_job(api, "done", {QUOTA_NAME_LABEL: "q"}, suspend=False)
    finished["status"] = {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 1}
    jobs.on_event("ADDED", finished)
    assert outside_events(api, "plain") == [] and outside_events(api, "done") == []
