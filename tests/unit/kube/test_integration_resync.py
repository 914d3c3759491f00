"""The integration kinds' periodic resync and creation back-off (integrations.py), in memory.

A watch event the controller never saw (the objects are written straight into the in-memory
API) is repaired by the next resync, on the controller's `resync_period`: a missing unit is
created, an admitted workload still suspended is resumed, a finished one gives its quota
back, a unit whose workload is gone is deleted. A refused unit creation is tried again on
CREATE_RETRY's schedule, with a Warning event saying why.
"""

from __future__ import annotations

from typing import Any

from koordqueue.domain import names
from koordqueue.domain.integrations import POD
from koordqueue.domain.names import QUEUE_POLICY_KEY, QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE, QUEUE_UNIT, ApiError, Kind
from koordqueue.kube.controller import Controller
from koordqueue.kube.controller.integrations import kind_of, register_integrations
from koordqueue.kube.controller.workload_writes import RETRY as CREATE_RETRY
from koordqueue.kube.controller.workloads import WorkloadReconciler
from koordqueue.kube.settings import ControllerSettings
from tests.unit.integrations.helpers import condition
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_integration_wiring import PYTORCH, UNIT, current, install_crd, pytorch

PERIOD = 30.0
KEY = f"default/{UNIT}"
PODS = kind_of(POD)


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class CountingApi(MemoryApi):
    """Counts lists of each kind (and keeps their selectors); refuses the first `refuse`
    QueueUnit creations (403)."""

    def __init__(self, refuse: int = 0) -> None:
        super().__init__()
        self.refuse = refuse
        self.unit_creates = 0
        self.lists: dict[str, int] = {}
        self.selectors: list[tuple[str, str | None, str | None, str | None]] = []
        """(plural, namespace, label selector, field selector) of every list."""

    def list_objects(
        self,
        kind: Kind,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        self.lists[kind.plural] = self.lists.get(kind.plural, 0) + 1
        self.selectors.append((kind.plural, namespace, label_selector, field_selector))
        return super().list_objects(kind, namespace, label_selector, field_selector)

    def create(self, kind: Kind, body: Any, namespace: str | None = None) -> dict[str, Any]:
        if kind == QUEUE_UNIT:
            self.unit_creates += 1
            if self.unit_creates <= self.refuse:
                raise ApiError(403, "Forbidden", "exceeded quota", "POST", kind.path())
        return super().create(kind, body, namespace)


def make(
    api: MemoryApi, integrations: str = "kubeflow.org/pytorchjob", cpu: str = "8"
) -> tuple[Controller, WorkloadReconciler, Clock]:
    install_crd(api, "pytorchjobs", "kubeflow.org", "v1")
    api.create(
        ELASTIC_QUOTA,
        {
            "metadata": {
                "name": "q",
                "namespace": "default",
                "labels": {QUEUE_POLICY_KEY: "Priority"},
            },
            "spec": {"max": {"cpu": cpu, "memory": "64Gi"}},
        },
        "default",
    )
    clock = Clock()
    c = start(api, integrations, clock)
    consumer = c.consumers["PyTorchJob"]
    assert isinstance(consumer, WorkloadReconciler)
    return c, consumer, clock


def start(api: MemoryApi, integrations: str, clock: Clock) -> Controller:
    """A controller started on what `api` holds: its start-up resync, then its Queues."""
    settings = ControllerSettings(integrations=integrations, resync_period=PERIOD)
    c = Controller(api, settings, clock=clock, writers=1)
    register_integrations(c)
    c.resync()
    for obj in api.list_objects(QUEUE):
        c.on_queue("ADDED", obj)
    return c


def cpu_used(c: Controller) -> str | None:
    used = {row.name: row.used for row in c.engine.tree.report()}["q"]
    value = used.to_quantities().get("cpu")
    return None if not value else str(value)


def next_period(c: Controller, clock: Clock) -> None:
    clock.now += PERIOD
    c.admission_round()  # fires the consumers' timers: the resync starts (and runs inline)


def looks_of(c: Any, kind: str) -> list[str]:
    """The unit keys the `kind` consumer looks at from now on, in order."""
    consumer = c.consumers[kind]
    assert isinstance(consumer, WorkloadReconciler)
    looks: list[str] = []
    original = consumer._look

    def counting(key: str, *args: Any) -> None:
        looks.append(key)
        original(key, *args)

    consumer._look = counting  # type: ignore[method-assign]
    return looks


def test_a_workload_whose_added_event_was_lost_gets_its_unit_at_the_next_resync() -> None:
    api = CountingApi()
    c, _, clock = make(api)
    started = api.lists.get("pytorchjobs", 0)  # (the start-up resync lists every kind)
    pytorch(api)  # no event reaches the consumer
    clock.now += PERIOD - 1
    c.admission_round()
    assert api.get(QUEUE_UNIT, UNIT, "default") is None  # not before the period is up
    assert api.lists.get("pytorchjobs", 0) == started
    next_period(c, clock)
    made = api.get(QUEUE_UNIT, UNIT, "default")
    assert made is not None and c.engine.unit(made["metadata"]["uid"]) is not None
    assert api.lists["pytorchjobs"] == started + 1
    assert made["status"]["phase"] == "Dequeued"  # the same round admitted it ...
    assert current(api)["spec"]["runPolicy"]["suspend"] is False  # ... and resumed the job


def test_an_admitted_workload_left_suspended_is_resumed_by_the_resync() -> None:
    api = CountingApi()
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    c.admission_round()
    assert current(api)["spec"]["runPolicy"]["suspend"] is False
    # the resume write lost (as if it never landed): suspended again, no event to the consumer
    api.merge_patch(PYTORCH, "test-job", {"spec": {"runPolicy": {"suspend": True}}}, "default")
    next_period(c, clock)
    assert current(api)["spec"]["runPolicy"]["suspend"] is False


def test_a_workload_that_finished_unseen_gives_its_quota_back_at_the_resync() -> None:
    api = CountingApi()
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    c.admission_round()
    assert cpu_used(c) == "4"
    status = {"status": {"conditions": [condition("Succeeded")]}}
    api.merge_patch(PYTORCH, "test-job", status, "default", "status")
    next_period(c, clock)
    unit = api.get(QUEUE_UNIT, UNIT, "default")
    assert unit is not None and unit["status"]["phase"] == Phase.SUCCEED.value
    assert cpu_used(c) is None
    looks: list[str] = []
    consumer._look = lambda key, *args: looks.append(key)  # type: ignore[method-assign]
    next_period(c, clock)
    assert looks == []  # a finished unit is not looked at again, period after period


def test_a_unit_whose_workload_was_deleted_unseen_is_deleted_by_the_resync() -> None:
    api = CountingApi()
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    c.admission_round()
    uid = api.get(QUEUE_UNIT, UNIT, "default")["metadata"]["uid"]  # type: ignore[index]
    api.delete(PYTORCH, "test-job", "default")  # the DELETED event lost, no garbage collector
    next_period(c, clock)
    assert api.get(QUEUE_UNIT, UNIT, "default") is None
    assert c.engine.unit(uid) is None
    assert cpu_used(c) is None


def test_a_unit_not_made_by_the_integration_is_not_deleted_by_the_resync() -> None:
    api = CountingApi()
    c, _, clock = make(api)
    unit = {
        "metadata": {
            "name": "hand-made",
            "namespace": "default",
            "labels": {QUOTA_NAME_LABEL: "q"},
        },
        "spec": {
            "resource": {"cpu": "1"},
            "consumerRef": {"kind": "PyTorchJob", "name": "nowhere", "namespace": "default"},
        },
    }
    c.on_unit("ADDED", api.create(QUEUE_UNIT, unit, "default"))
    next_period(c, clock)
    assert api.get(QUEUE_UNIT, "hand-made", "default") is not None


def test_a_workload_with_an_event_while_the_list_was_read_is_left_to_that_event() -> None:
    """The listing is older than the event: the fold must not look at that workload again."""
    api = CountingApi()
    c, consumer, clock = make(api)
    job = pytorch(api)
    posted: list[Any] = []
    c.writer.use_pool(0, posted.append)  # writes queue up; the test runs them
    clock.now += PERIOD
    c.fire_timers()  # the resync's lists are asked for
    assert consumer.resync_touched == set()
    consumer.on_event("ADDED", job)  # an event comes meanwhile
    looks = 0
    original = consumer._look

    def counting(*args: Any) -> None:
        nonlocal looks
        looks += 1
        original(*args)

    consumer._look = counting  # type: ignore[method-assign]
    while len(c.writer._queue):  # run every queued write, then its continuation
        c.writer._queue.take()()
        while posted:
            posted.pop(0)()
    assert consumer.resync_touched is None  # the fold came back
    assert looks == 0  # ... and left the workload to its event's look
    assert api.get(QUEUE_UNIT, UNIT, "default") is not None  # which made the unit


def test_a_resync_is_not_started_again_while_the_last_list_is_out() -> None:
    api = CountingApi()
    c, _, clock = make(api)
    posted: list[Any] = []
    c.writer.use_pool(0, posted.append)
    clock.now += PERIOD
    c.fire_timers()
    clock.now += PERIOD
    c.fire_timers()
    assert len(c.writer._queue) == 1


def test_a_pod_group_is_looked_at_once_per_resync() -> None:
    api = CountingApi()
    c, _, clock = make(api, "kubeflow.org/pytorchjob,pod")
    for i in range(3):
        api.create(
            PODS,
            {
                "metadata": {
                    "name": f"gang-{i}",
                    "namespace": "default",
                    "uid": f"p{i}",
                    "labels": {QUOTA_NAME_LABEL: "q", names.POD_GROUP_NAME_LABEL: "gang"},
                    "annotations": {names.POD_GROUP_TOTAL_COUNT_ANNOTATION: "3"},
                },
                "spec": {
                    "schedulingGates": [{"name": names.POD_ADMISSION_GATE}],
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}],
                },
            },
            "default",
        )
    looks = looks_of(c, "Pod")
    next_period(c, clock)
    assert looks == ["default/gang-pod-qu"]  # one look for the group, not one per pod
    assert api.get(QUEUE_UNIT, "gang-pod-qu", "default") is not None
    assert all(not (p["spec"].get("schedulingGates")) for p in api.list_objects(PODS))


def test_a_refused_unit_creation_is_retried_on_the_back_off_schedule_with_a_warning() -> None:
    api = CountingApi(refuse=3)
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    start = clock.now
    waits = []
    while api.get(QUEUE_UNIT, UNIT, "default") is None:
        due, _ = consumer.retries[KEY]
        waits.append(due - clock.now)
        clock.now = due - 0.01
        attempts = api.unit_creates
        consumer.fire_timers()
        assert api.unit_creates == attempts  # not before its time
        clock.now = due
        consumer.fire_timers()
        assert clock.now - start < 60
    assert waits == [CREATE_RETRY.delay(n) for n in range(3)] == [1.0, 2.0, 4.0]
    assert api.unit_creates == 4
    assert consumer.retries == {} and consumer.refusals == {}
    made = api.get(QUEUE_UNIT, UNIT, "default")
    assert made is not None and c.engine.unit(made["metadata"]["uid"]) is not None
    refused = [e for e in api.events if e["reason"] == names.REASON_UNIT_CREATE_REFUSED]
    assert refused and refused[0]["type"] == "Warning"
    assert "exceeded quota" in refused[0]["message"]
    assert refused[0]["involvedObject"]["name"] == "test-job"


def test_a_workload_deleted_while_its_creation_waits_is_not_retried() -> None:
    api = CountingApi(refuse=1)
    _, consumer, clock = make(api)
    job = pytorch(api)
    consumer.on_event("ADDED", job)
    assert KEY in consumer.retries
    api.delete(PYTORCH, "test-job", "default")
    consumer.on_event("DELETED", job)
    assert consumer.retries == {}
    clock.now += 60
    consumer.fire_timers()
    assert api.unit_creates == 1


class RefusingMarksApi(CountingApi):
    """Refuses the first `refuse_marks` patches of a PyTorchJob's status (its enqueue mark,
    the Queuing condition, written before its unit is made)."""

    def __init__(self, refuse_marks: int) -> None:
        super().__init__()
        self.refuse_marks = refuse_marks

    def merge_patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind == PYTORCH and subresource == "status" and self.refuse_marks > 0:
            self.refuse_marks -= 1
            raise ApiError(403, "Forbidden", "denied", "PATCH", kind.path())
        return super().merge_patch(kind, name, patch, namespace, subresource)


def test_a_refused_mark_before_the_creation_releases_the_hold_and_is_retried() -> None:
    """The unit key's hold ends (its watch event is not kept back), and the creation is
    tried again after the back-off. (Issue 25: the reconciler holds the unit and reads it no
    more; this replaces the test of a refused unit read.)"""
    api = RefusingMarksApi(refuse_marks=1)
    c, consumer, clock = make(api)
    consumer.on_event("ADDED", pytorch(api))
    assert c.units_being_created == {}
    assert api.get(QUEUE_UNIT, UNIT, "default") is None
    clock.now = consumer.retries[KEY][0]
    consumer.fire_timers()
    made = api.get(QUEUE_UNIT, UNIT, "default")
    assert made is not None and c.engine.unit(made["metadata"]["uid"]) is not None
