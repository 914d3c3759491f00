"""A workload's unit says, in `simulate` and `explain`, what the controller's creator wrote.

The live controller gives a unit it made for a workload (any job integration kind) its first
status, CREATED_STATUS ("Enqueued"), before any round; on a queue no round serves (the
unregistered Round policy) that message stays. The simulator records the same effect
(domain.effects.created_effects), so both come from one constant. A QueueUnit made by hand
gets no message until a round writes one, in both.
"""

from __future__ import annotations

from koordqueue.domain.effects import CREATED_STATUS, created_effects
from koordqueue.domain.integrations import POD
from koordqueue.domain.names import MSG_UNIT_ENQUEUED, POD_ADMISSION_GATE, QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase, QueueUnit
from koordqueue.domain.resources import Resources
from koordqueue.kube.api import QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.integrations import kind_of
from koordqueue.kube.settings import ControllerSettings
from koordqueue.simulation.explain import explain, view_from_scenario
from koordqueue.simulation.scenario import parse_scenario
from koordqueue.simulation.simulator import simulate
from tests.unit.kube.memory_api import MemoryApi

SCENARIO = """
quotas:
  - {name: rr, max: {cpu: "4"}, policy: Round}
  - {name: small, max: {cpu: "1"}}
units:
  - name: by-hand
    quota: rr
    resource: {cpu: "1"}
  - workload:
      apiVersion: v1
      kind: Pod
      metadata: {name: solo, labels: {quota.scheduling.koordinator.sh/name: rr}}
      spec:
        schedulingGates: [{name: koord-queue/admission}]
        containers: [{name: c, resources: {requests: {cpu: "1"}}}]
  - workload:
      apiVersion: v1
      kind: Pod
      metadata: {name: big, labels: {quota.scheduling.koordinator.sh/name: small}}
      spec:
        schedulingGates: [{name: koord-queue/admission}]
        containers: [{name: c, resources: {requests: {cpu: "2"}}}]
"""


def _pod(name: str, quota: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "default",
            "uid": f"uid-{name}",
            "labels": {QUOTA_NAME_LABEL: quota},
        },
        "spec": {
            "schedulingGates": [{"name": POD_ADMISSION_GATE}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def _controller_first_message() -> str:
    """The status message the controller's workload reconciler writes on a unit it made
    (no quota rr on this cluster: nothing admits it)."""
    api = MemoryApi()
    pod = api.create(kind_of(POD), _pod("solo", "rr"), "default")
    controller = Controller(api, ControllerSettings(integrations="pod"), writers=1)
    controller.resync()
    controller.consumers["Pod"].on_event("ADDED", pod)
    unit = api.get(QUEUE_UNIT, POD.unit_name(pod), "default")
    assert unit is not None
    return str(unit["status"]["message"])


def test_a_workload_unit_on_an_unserved_queue_keeps_the_controllers_first_message() -> None:
    result = simulate(parse_scenario(SCENARIO, "created-status"))
    messages = result.final_messages()
    assert messages["default/solo-pod-qu"] == CREATED_STATUS.message == MSG_UNIT_ENQUEUED
    assert messages["default/solo-pod-qu"] == _controller_first_message()
    assert result.final_phases()["default/solo-pod-qu"] == CREATED_STATUS.phase.value


def test_explain_reports_the_same_status_message() -> None:
    view = view_from_scenario(parse_scenario(SCENARIO, "created-status"))
    ex = explain(view, "default/solo-pod-qu")
    assert ex is not None and ex.status_message == CREATED_STATUS.message


def test_a_unit_made_by_hand_gets_no_message_on_an_unserved_queue() -> None:
    messages = simulate(parse_scenario(SCENARIO, "created-status")).final_messages()
    assert "default/by-hand" not in messages


def test_a_rounds_message_replaces_the_first_one() -> None:
    messages = simulate(parse_scenario(SCENARIO, "created-status")).final_messages()
    assert messages["default/big-pod-qu"] not in ("", CREATED_STATUS.message)


def test_created_effects_only_for_workload_kinds() -> None:
    def unit(kind: str | None) -> QueueUnit:
        return QueueUnit("ns", "u", "uid", Resources.of(cpu="1"), consumer_kind=kind)

    assert created_effects(unit(None)) == []
    (only,) = created_effects(unit("Pod"))
    assert (only.phase, only.message) == (Phase.ENQUEUED, MSG_UNIT_ENQUEUED)  # type: ignore[union-attr]
    assert len(created_effects(unit("Job"))) == 1
