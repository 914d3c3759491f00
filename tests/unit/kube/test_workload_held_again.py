"""A workload of ours let go while its unit waits is held again (level-triggered repair).

Koord-Queue leaves such a workload alone; then a release that lands after the round that took
the quota back (or a suspend flag cleared by hand) lets it run outside its quota for good.
"""

from __future__ import annotations

import copy

from koordqueue.domain.integrations import JOBSET, POD
from koordqueue.domain.integrations.base import JobStatus
from koordqueue.domain.integrations.reconcile import hold_again
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube.api import QUEUE_UNIT
from tests.unit.integrations.helpers import jobset, pod, template
from tests.unit.kube.test_job_writes import CountingApi
from tests.unit.kube.test_workloads_every_kind import (
    JOBSETS,
    UNIT,
    add_jobset,
    current,
    jobset_patches,
    make,
)


def released_by_hand(api: CountingApi) -> dict[str, object]:
    stored = api.objects[(JOBSETS.plural, "ns", "jobset")]
    stored["spec"]["suspend"] = False
    stored["metadata"]["generation"] = int(stored["metadata"].get("generation") or 1) + 1
    return copy.deepcopy(stored)


def test_a_jobset_let_go_while_its_unit_waits_is_held_again() -> None:
    api = CountingApi()
    c, _ = make(api, cpu="500m")  # the 1-cpu JobSet waits
    add_jobset(c, api)
    unit = api.get(QUEUE_UNIT, UNIT, "ns")
    assert unit is not None and unit["status"]["phase"] == "Enqueued"
    assert current(api)["spec"]["suspend"] is True
    before = jobset_patches(api)
    c.consumers["JobSet"].on_event("MODIFIED", released_by_hand(api))
    assert current(api)["spec"]["suspend"] is True
    assert jobset_patches(api) == before + 1
    c.close()


def test_an_admitted_jobset_let_go_stays_let_go() -> None:
    api = CountingApi()
    c, _ = make(api)  # 4 cpu: admitted and resumed
    add_jobset(c, api)
    assert current(api)["spec"]["suspend"] is False
    before = jobset_patches(api)
    c.consumers["JobSet"].on_event("MODIFIED", released_by_hand(api))
    assert current(api)["spec"]["suspend"] is False
    assert jobset_patches(api) == before
    c.close()


def _unit_of(obj: dict[str, object]) -> dict[str, object]:
    m = obj["metadata"]
    assert isinstance(m, dict)
    return {"metadata": {"ownerReferences": [{"uid": m["uid"], "kind": "x"}]}}


def test_only_a_waiting_unit_of_ours_in_place_and_pending_is_held_again() -> None:
    released = jobset([("w", 1, 1, 1, template("1"))])
    released["metadata"]["uid"] = "u1"
    released["spec"]["suspend"] = False
    unit = _unit_of(released)
    assert hold_again(JOBSET, [released], unit, JobStatus.PENDING,
                      phase=Phase.ENQUEUED, admitted=False)
    assert not hold_again(JOBSET, [released], unit, JobStatus.PENDING,
                          phase=Phase.DEQUEUED, admitted=False)
    assert not hold_again(JOBSET, [released], unit, JobStatus.PENDING,
                          phase=Phase.ENQUEUED, admitted=True)
    assert not hold_again(JOBSET, [released], unit, JobStatus.RUNNING,
                          phase=Phase.ENQUEUED, admitted=False)
    assert not hold_again(JOBSET, [released], {"metadata": {}}, JobStatus.PENDING,
                          phase=Phase.ENQUEUED, admitted=False)  # not its unit
    held = copy.deepcopy(released)
    held["spec"]["suspend"] = True
    assert not hold_again(JOBSET, [held], unit, JobStatus.PENDING,
                          phase=Phase.ENQUEUED, admitted=False)  # nothing to write
    let_go = pod("p", gated=False)
    assert not hold_again(POD, [let_go], _unit_of(let_go), JobStatus.PENDING,
                          phase=Phase.ENQUEUED, admitted=False)  # a pod would be deleted
