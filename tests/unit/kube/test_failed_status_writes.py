"""A Job-extension status write that fails past its retries is tried again soon, not at the
next resync (issue 12, part 3: found by the 409 storm in tests/e2e/test_faults.py, where a
finished Job's unit stayed Dequeued, holding its quota, for the 60 s until the resync)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.kube.api import ELASTIC_QUOTA, JOB, QUEUE, QUEUE_UNIT, ApiError, Kind
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import controller
from tests.unit.kube.test_controller_state import quota as state_quota
from tests.unit.kube.test_controller_state import unit as state_unit
from tests.unit.kube.test_job_extension_controller import make, set_job_status, submit, unit


class Storm(MemoryApi):
    """Answers 409 to every QueueUnit status patch while `conflicts` is set."""

    conflicts = False

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if self.conflicts and kind == QUEUE_UNIT and subresource == "status":
            raise ApiError(409, "Conflict", "storm", "PATCH", kind.path())
        return super().merge_patch(kind, name, patch, namespace, subresource)


def test_a_succeed_write_refused_past_its_retries_is_written_at_the_next_round() -> None:
    api = Storm()
    c, clock = make(api, cpu="1")
    submit(c, api, "first")
    submit(c, api, "second")  # waits: the quota holds one
    assert unit(api, "first")["status"]["phase"] == "Dequeued"

    api.conflicts = True
    set_job_status(c, api, "first", succeeded=1,
                   conditions=[{"type": "Complete", "status": "True"}])
    assert unit(api, "first")["status"]["phase"] == "Dequeued"  # every attempt refused
    uid = unit(api, "first")["metadata"]["uid"]
    assert c.engine.is_admitted(uid), "the quota is held for as long as the API says Dequeued"

    api.conflicts = False
    clock.offset += 2.0
    c.admission_round()  # the retry is due: no Job event, no resync
    assert unit(api, "first")["status"]["phase"] == "Succeed"
    assert not c.engine.is_admitted(uid)
    c.admission_round()
    assert unit(api, "second")["status"]["phase"] == "Dequeued"
    c.close()


class Throttled(MemoryApi):
    """Answers 429 to every QueueUnit create while `throttled` is set."""

    throttled = False

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        if self.throttled and kind == QUEUE_UNIT:
            raise ApiError(429, "TooManyRequests", "slow down", "POST", kind.path())
        return super().create(kind, body, namespace)


def test_a_unit_create_refused_past_its_retries_is_tried_again_at_the_next_round() -> None:
    """Found by the 429/500 fault e2e: the Job waited for the 60 s resync to get its unit."""
    api = Throttled()
    c, clock = make(api, cpu="1")
    api.throttled = True
    submit(c, api, "j")
    assert api.get(QUEUE_UNIT, "j", "ns") is None
    api.throttled = False
    clock.offset += 2.0
    c.admission_round()  # the retry is due: no Job event, no resync
    c.admission_round()
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    c.close()


class LostReply(MemoryApi):
    """Applies the next QueueUnit status patch, then loses the answer (connection dropped)."""

    lose_next = False

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        result = super().merge_patch(kind, name, patch, namespace, subresource)
        if self.lose_next and kind == QUEUE_UNIT and subresource == "status":
            self.lose_next = False
            raise ApiError(0, "ProtocolError", "connection aborted", "PATCH", kind.path())
        return result


def test_an_admission_whose_answer_was_lost_but_which_landed_is_kept_and_resumes_the_job() -> None:
    """Found by the dropped-connections fault e2e: the controller rolled back an admission the
    API had stored, so the Job stayed suspended until the 60 s resync."""
    api = LostReply()
    c, _ = make(api, cpu="1")
    api.lose_next = True
    submit(c, api, "j")  # the fast path admits it; its write lands, the answer is lost
    assert unit(api, "j")["status"]["phase"] == "Dequeued"
    assert c.engine.is_admitted(unit(api, "j")["metadata"]["uid"])
    job = api.get(JOB, "j", "ns")
    assert job is not None and job["spec"]["suspend"] is False
    c.close()


class DroppedStatus(MemoryApi):
    """Drops the next QueueUnit status patch before the API applies it (connection dropped)."""

    drop_next = False

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if self.drop_next and kind == QUEUE_UNIT and subresource == "status":
            self.drop_next = False
            raise ApiError(0, "ProtocolError", "connection aborted", "PATCH", kind.path())
        return super().merge_patch(kind, name, patch, namespace, subresource)


def _status(api: MemoryApi, name: str) -> Mapping[str, Any]:
    return (api.get(QUEUE_UNIT, name, "ns") or {}).get("status") or {}


def test_a_status_message_lost_to_a_dropped_connection_is_written_at_a_later_round() -> None:
    """Found by bench/soak.py (fz-unit-3118, fz-unit-571: a unit left with no status for good):
    the round marked the message as reported before writing it, and a message-only write
    that failed undid neither the mark nor the round's record entry, so no later round
    planned it again. Fails without the renew in `AdmissionRounds._took_in` (checked: the
    unit keeps no status after three more rounds)."""
    api = DroppedStatus()
    api.create(ELASTIC_QUOTA, state_quota("q", cpu="1"), "default")
    api.create(QUEUE_UNIT, state_unit("big", "q", cpu="2"), "ns")  # never fits: a message only
    c = controller(api)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    api.drop_next = True
    c.admission_round()
    assert not _status(api, "big").get("message"), "the write was dropped"
    for _ in range(3):
        c.admission_round()
    assert "big" not in {u.name for u in c.engine.units() if c.engine.is_admitted(u.uid)}
    assert _status(api, "big").get("message"), "the lost message is written again"
    c.close()


class GoneUnits(MemoryApi):
    """Answers 404 to every QueueUnit status patch (the unit deleted, the watch not yet told),
    and counts them."""

    patches = 0

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Mapping[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind == QUEUE_UNIT and subresource == "status":
            self.patches += 1
            raise ApiError(404, "NotFound", "gone", "PATCH", kind.path())
        return super().merge_patch(kind, name, patch, namespace, subresource)


def test_a_status_message_refused_with_404_is_not_written_again_every_round() -> None:
    """The retry above is for transient failures only: a leader whose cache still held two
    deleted units (bench/soak.py, seed 3, after an etcd restart) patched them again in every
    round, ten times a second, with the retry renewing on any failure."""
    api = GoneUnits()
    api.create(ELASTIC_QUOTA, state_quota("q", cpu="1"), "default")
    api.create(QUEUE_UNIT, state_unit("big", "q", cpu="2"), "ns")
    c = controller(api)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    for _ in range(4):
        c.admission_round()
    assert api.patches == 1
    c.close()
