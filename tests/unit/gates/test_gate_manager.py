"""GateManager: guarded, non-blocking gate removal (SPEC 3.5), against an in-memory API."""

from __future__ import annotations

import copy
from typing import Any

from koordqueue.kube.api import ApiError
from koordqueue.kube.gates.manager import GateManager, GateOp, Outcome
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION


class FakeApi:
    """One pod; JSON patch with `test` and `remove` ops; optional concurrent edits."""

    def __init__(self, pod: dict[str, Any], concurrent_edits: int = 0) -> None:
        self.pod = pod
        self.concurrent_edits = concurrent_edits
        self.patches = 0

    def get(self, kind: Any, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        return copy.deepcopy(self.pod)

    def _bump(self) -> None:
        meta = self.pod["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)

    def json_patch(self, kind: Any, name: str, ops: list[dict[str, Any]],
                   namespace: str | None = None) -> dict[str, Any]:
        self.patches += 1
        if self.concurrent_edits:  # someone else wrote between our read and our patch
            self.concurrent_edits -= 1
            self._bump()
        for op in ops:
            if op["op"] == "test" and op["path"] == "/metadata/resourceVersion":
                if self.pod["metadata"]["resourceVersion"] != op["value"]:
                    raise ApiError(422, "Invalid", "test failed", "PATCH", name)
            elif op["op"] == "remove":
                index = int(op["path"].rsplit("/", 1)[1])
                del self.pod["spec"]["schedulingGates"][index]
        self._bump()
        return self.pod


def pod(gates: list[str], opt_in: bool = True) -> dict[str, Any]:
    notes = {OPT_IN_ANNOTATION: "true"} if opt_in else {}
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u", "resourceVersion": "1",
                         "annotations": notes},
            "spec": {"schedulingGates": [{"name": g} for g in gates]}}


OP = GateOp("ns", "p", "u")


def test_our_only_gate_is_removed() -> None:
    api = FakeApi(pod([GATE_NAME]))
    assert GateManager(api).remove(OP) == Outcome.REMOVED  # type: ignore[arg-type]
    assert api.pod["spec"]["schedulingGates"] == []


def test_a_concurrent_change_is_re_read_and_the_removal_retried() -> None:
    api = FakeApi(pod([GATE_NAME]), concurrent_edits=2)
    assert GateManager(api).remove(OP) == Outcome.REMOVED  # type: ignore[arg-type]
    assert api.patches == 3


def test_our_gate_stays_while_other_gates_remain() -> None:
    api = FakeApi(pod(["other", GATE_NAME]))
    assert GateManager(api).remove(OP) == Outcome.OTHER_GATES  # type: ignore[arg-type]
    assert api.patches == 0


def test_our_gate_without_the_annotation_is_never_removed() -> None:
    api = FakeApi(pod([GATE_NAME], opt_in=False))
    assert GateManager(api).remove(OP) == Outcome.NOT_OPTED_IN  # type: ignore[arg-type]
    assert api.patches == 0


def test_a_recreated_pod_with_the_same_name_is_left_alone() -> None:
    api = FakeApi(pod([GATE_NAME]))
    assert GateManager(api).remove(GateOp("ns", "p", "other-uid")) == Outcome.GONE  # type: ignore[arg-type]


def test_enqueue_never_blocks_and_reports_a_full_queue() -> None:
    manager = GateManager(FakeApi(pod([GATE_NAME])), workers=1, per_worker=2)  # type: ignore[arg-type]
    accepted = [manager.enqueue(GateOp("ns", f"p{i}", f"u{i}")) for i in range(3)]
    assert accepted == [True, True, False]


def test_a_pod_already_queued_is_not_queued_twice() -> None:
    manager = GateManager(FakeApi(pod([GATE_NAME])))  # type: ignore[arg-type]
    assert [manager.enqueue(OP), manager.enqueue(OP)] == [True, False]


def test_workers_drain_the_queue() -> None:
    api = FakeApi(pod([GATE_NAME]))
    manager = GateManager(api, workers=2)  # type: ignore[arg-type]
    manager.start()
    try:
        manager.enqueue(OP)
        assert manager.wait_idle(5.0)
    finally:
        manager.stop()
    assert api.pod["spec"]["schedulingGates"] == []


def test_the_schedulers_copy_of_the_pod_saves_the_first_read() -> None:
    api = FakeApi(pod([GATE_NAME]))
    reads = []
    original_get = api.get
    api.get = lambda *a, **k: reads.append(1) or original_get(*a, **k)  # type: ignore[method-assign]
    op = GateOp("ns", "p", "u", copy.deepcopy(api.pod))
    assert GateManager(api).remove(op) == Outcome.REMOVED  # type: ignore[arg-type]
    assert reads == []
