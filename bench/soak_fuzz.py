"""Bad input at the edge while the soak runs (issue 30, part 3).

A hypothesis fuzzer, seeded with the soak's seed, creates malformed ElasticQuotas, Queues,
QueueUnits and batch/v1 Jobs (wrong types, huge and unicode quantities and names, missing
fields) one at a time on the real API server while bench/soak.py's replicas are faulted, and
creates and breaks quota cycles. For each object it predicts, with the domain rules the
controller itself runs, the answer an operator must get, and waits for it:

- a quota the controller cannot take: a Warning `InvalidQuota` event with the problems'
  text (domain.quota_fold.check_quota); one it takes: its Queue;
- a unit it cannot read: a Warning `InvalidQueueUnit` event (queue_unit_from_object); one it
  can: a status (a phase and, unless admitted, a message);
- a Queue with an unknown policy: a Warning `AddQueueFail` event (make_policy);
- a Job it cannot queue: a Warning `InvalidJob` event (queue_unit_for); one it can: a unit;
- a cycle (two quotas each naming the other as parent): `QuotaCycle` on them and a unit
  inside told of the cycle; broken (one re-parented to the root): the unit admitted; an edit
  that would close the cycle again: refused with `QuotaCycle`, the admitted unit kept.

After each example a healthy Job (quota fz-ok, room for all) must be admitted: every good
object is still served. An object the API server refuses (400, 422) is answered by it.

Misses are reported to the soak's checker as `bad-input-unanswered` / `good-input-unserved`.
The wait for an answer is `bound` seconds after the later of the object's creation and the
last fault (faults delay answers, as the checker's `fits-not-admitted` allows for). All of it
lives in namespace FUZZ_NAMESPACE and quotas named `fz-*` (a tree of its own), which the
checker's invariants skip (`ignored`): their answers are what is checked here instead.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, Final

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from koordqueue.domain import names
from koordqueue.domain.integrations import BATCH_JOB, InvalidJobError
from koordqueue.domain.integrations.base import queue_unit_for
from koordqueue.domain.integrations.reconcile import creation_skip
from koordqueue.domain.names import DEFAULT_POLICY, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.domain.policies import QueueSettings, UnknownPolicyError, make_policy
from koordqueue.domain.queue_unit import (
    ADMITTED_PHASES,
    InvalidQueueUnitError,
    queue_unit_from_object,
)
from koordqueue.domain.quota_fold import check_quota
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.kube.api import (
    ELASTIC_QUOTA,
    EVENT,
    JOB,
    NAMESPACE,
    QUEUE,
    QUEUE_UNIT,
    ApiError,
    Kind,
    KubeApi,
)

FUZZ_NAMESPACE: Final = "soak-fuzz"
PREFIX: Final = "fz-"
QUOTA_NAMESPACE: Final = "default"
HEALTHY: Final = "fz-ok"
ADMITTED: Final = frozenset(str(p) for p in ADMITTED_PHASES)
UNANSWERED: Final = "bad-input-unanswered"
UNSERVED: Final = "good-input-unserved"

Report = Callable[[str, str], None]
"""(invariant, detail): a miss, recorded by the soak's checker."""


def ignored(obj: Mapping[str, Any]) -> bool:
    """The fuzzer's own objects, which the soak's invariants skip."""
    meta = obj.get("metadata") or {}
    return meta.get("namespace") == FUZZ_NAMESPACE or str(meta.get("name") or "").startswith(
        PREFIX)


# --- what is drawn ------------------------------------------------------------------------
QUANTITIES = st.sampled_from([
    "1", "0", "-5", "1m", "1e-9", "1e30", "9999999999999999999999999Ei", "0.0000001", "1Ei",
    ".5", "+3", "100Gi", "-0", "", "１", "1е3", "∞", "NaN", "12xyz", "2 Gi",
]) | st.integers(min_value=-(2**63), max_value=2**63) | st.none() | st.booleans()
RESOURCE_NAMES = st.sampled_from([
    "cpu", "memory", "nvidia.com/gpu", "example.com/unknown", "pods", "cpü", "gpu/😀", "x" * 300,
    "UPPER", "weird_resource",
])
ODD_NAMES = st.sampled_from([
    "", "UPPER_case.x", "a" * 63, "a" * 64, "-x", "under_score", "fz-no-such-quota", "ünïcode",
    "队列",
])
LABEL_VALUES = ODD_NAMES | st.just(HEALTHY)
RESOURCES = st.dictionaries(RESOURCE_NAMES, QUANTITIES, max_size=4)
WRONG_TYPES = st.sampled_from([[], ["1"], 7, "cpu=1", True, {"cpu": {"nested": "1"}}])
POLICIES = st.sampled_from(["Priority", "Block", "NoSuchPolicy", "", "priority", "Priorität",
                            "x" * 300])


@st.composite
def bad_quota(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    parent = draw(st.sampled_from(["self", "missing", "odd", "none", "fz-root"]))
    if parent == "self":
        labels[QUOTA_PARENT_LABEL] = name
    elif parent == "missing":
        labels[QUOTA_PARENT_LABEL] = "fz-no-such-parent"
    elif parent == "odd":  # (never the healthy quota: a child's min would change its room)
        labels[QUOTA_PARENT_LABEL] = draw(ODD_NAMES)
    elif parent == "fz-root":
        labels[QUOTA_PARENT_LABEL] = "fz-root"
    spec: dict[str, Any] = {}
    for field in ("max", "min"):
        shape = draw(st.sampled_from(["map", "map", "wrong", "absent"]))
        if shape == "map":
            spec[field] = draw(RESOURCES)
        elif shape == "wrong":
            spec[field] = draw(WRONG_TYPES)
    body = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": QUOTA_NAMESPACE, "labels": labels},
            "spec": spec}
    if draw(st.integers(0, 7)) == 0:
        del body["spec"]  # missing altogether
    return body


@st.composite
def bad_unit(draw: st.DrawFn, name: str) -> dict[str, Any]:
    labels: dict[str, Any] = {}
    if draw(st.booleans()):
        labels[QUOTA_NAME_LABEL] = draw(LABEL_VALUES | st.just("fz-root"))
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["resource"] = draw(RESOURCES | WRONG_TYPES)
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-(2**40), max_value=2**40) | st.text(
            max_size=4))
    if draw(st.booleans()):
        spec["queue"] = draw(LABEL_VALUES)
    if draw(st.booleans()):
        spec["podSet"] = draw(st.sampled_from([
            [{"name": "p", "count": 2**31 - 1}], [{"count": -1}], [], "podset", [{}]]))
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
            "metadata": {"name": name, "namespace": FUZZ_NAMESPACE, "labels": labels},
            "spec": spec}


@st.composite
def bad_queue(draw: st.DrawFn, name: str) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["queuePolicy"] = draw(POLICIES)
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-(2**40), max_value=2**40))
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": name, "namespace": names.QUEUE_NAMESPACE}, "spec": spec}


@st.composite
def bad_job(draw: st.DrawFn, name: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "busybox", "command": ["true"]}
    requests = draw(st.dictionaries(RESOURCE_NAMES, QUANTITIES.map(str), max_size=3))
    if requests:
        container["resources"] = {"requests": requests, "limits": dict(requests)}
    init = [{"name": "init", "image": "busybox", "restartPolicy": "Always",
             "resources": {"requests": {"cpu": draw(st.sampled_from(["1e3", "10m", "5"]))}}}]
    pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    if draw(st.booleans()):
        pod["initContainers"] = init
    labels: dict[str, Any] = {QUOTA_NAME_LABEL: draw(LABEL_VALUES | st.just("fz-root"))}
    annotations = {"fz/unicode": draw(st.text(max_size=12))}
    spec: dict[str, Any] = {"suspend": True, "template": {"spec": pod}}
    if draw(st.booleans()):
        spec["parallelism"] = draw(st.sampled_from([0, 1, 1000, 2**31 - 1]))
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": FUZZ_NAMESPACE, "labels": labels,
                         "annotations": annotations},
            "spec": spec}


def _quota(name: str, parent: str | None, cpu: str = "10") -> dict[str, Any]:
    labels = {QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": QUOTA_NAMESPACE, "labels": labels},
            "spec": {"max": {"cpu": cpu, "memory": "1Ti"}}}


def _healthy_job(name: str, quota: str) -> dict[str, Any]:
    container = {"name": "main", "image": "busybox", "command": ["true"],
                 "resources": {"requests": {"cpu": "10m", "memory": "1Mi"}}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": FUZZ_NAMESPACE,
                         "labels": {QUOTA_NAME_LABEL: quota}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never",
                                                            "containers": [container]}}}}


# --- what is expected ----------------------------------------------------------------------
def expected_quota(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(reason, message) of the Warning a quota the controller refuses gets; None: taken."""
    problems, _ = check_quota(obj, QuotaTree())
    if not problems:
        return None
    return names.REASON_INVALID_QUOTA, "; ".join(str(p) for p in problems)


def expected_unit(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    try:
        queue_unit_from_object(obj)
    except InvalidQueueUnitError as exc:
        return names.REASON_INVALID_QUEUE_UNIT, str(exc)
    return None


def expected_queue(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    name = str(obj["metadata"]["name"])
    policy = str((obj.get("spec") or {}).get("queuePolicy") or DEFAULT_POLICY)
    try:
        make_policy(policy, QueueSettings.from_annotations({}, policy))
    except UnknownPolicyError:
        return names.REASON_ADD_QUEUE_FAIL, names.MSG_UNKNOWN_POLICY.format(
            queue=name, policy=policy)
    return None


def expected_job(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    try:
        queue_unit_for(BATCH_JOB, [dict(obj)])
    except InvalidJobError as exc:
        return names.REASON_INVALID_JOB, str(exc)
    return None


class Fuzzer(threading.Thread):
    """Runs examples until `stop` is set (the one under way is finished and judged, unless
    `abort` is set too); `outcomes` counts what each example came to."""

    def __init__(self, api: KubeApi, seed_: int, bound: float, report: Report,
                 last_fault: Callable[[], float]) -> None:
        super().__init__(name="soak-fuzz", daemon=True)
        self.api, self.seed, self.bound = api, seed_, bound
        self.report, self.last_fault = report, last_fault
        self.stop = threading.Event()
        self.abort = threading.Event()
        self.outcomes: Counter[str] = Counter()
        self.error: BaseException | None = None
        self._n = 0

    # --- plumbing --------------------------------------------------------------------------
    def _call(self, what: Callable[[], Any], seconds: float = 60.0) -> Any:
        """An API call retried through faults (the fuzzer plays a user, not the system)."""
        end = time.time() + seconds
        while True:
            try:
                return what()
            except ApiError as exc:
                if exc.status in (400, 404, 409, 422) or time.time() > end:
                    raise
            except Exception:
                if time.time() > end:
                    raise
            time.sleep(1.0)

    def _wait(self, what: str, check: Callable[[], bool], since: float,
              invariant: str = UNANSWERED) -> bool:
        """Polls `check` until it holds, or `bound` seconds after the later of `since` and
        the last fault (then a miss is reported)."""
        while not self.abort.is_set():
            try:
                if check():
                    return True
            except Exception:  # a read refused by a fault: look again
                pass
            if time.time() > max(since, self.last_fault()) + self.bound:
                self.report(invariant, what)
                self.outcomes[f"missed: {what.split(':', 1)[0]}"] += 1
                return False
            time.sleep(0.5)
        return True  # aborted: no verdict

    def _warned(self, namespace: str, name: str, reason: str, message: str | None) -> bool:
        for event in self.api.list_objects(EVENT, namespace):
            involved = event.get("involvedObject") or {}
            if (involved.get("name") == name and event.get("type") == "Warning"
                    and event.get("reason") == reason
                    and (message is None or event.get("message") == message[:1024])):
                return True
        return False

    def _unit_status(self, name: str) -> dict[str, Any]:
        unit = self.api.get(QUEUE_UNIT, name, FUZZ_NAMESPACE) or {}
        return dict(unit.get("status") or {})

    def _remove(self, kind: Any, name: str, namespace: str) -> None:
        with contextlib.suppress(ApiError):
            self._call(lambda: self.api.delete(kind, name, namespace), 20.0)

    def _next(self, what: str) -> str:
        self._n += 1
        return f"{PREFIX}{what}-{self._n}"

    # --- the run -----------------------------------------------------------------------------
    def setup(self) -> None:
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": FUZZ_NAMESPACE}}
        made: list[tuple[Kind, dict[str, Any], str | None]] = [
            (NAMESPACE, ns, None),
            (ELASTIC_QUOTA, _quota(HEALTHY, None, "1000"), QUOTA_NAMESPACE),
            (ELASTIC_QUOTA, _quota("fz-root", None, "2"), QUOTA_NAMESPACE),
        ]
        for kind, body, where in made:
            def create(kind: Kind = kind, body: dict[str, Any] = body,
                       where: str | None = where) -> Any:
                return self.api.create(kind, body, where)

            try:
                self._call(create)
            except ApiError as exc:
                if exc.status != 409:
                    raise

    def run(self) -> None:
        try:
            self.setup()
            while not self.stop.is_set():  # (hypothesis ends a run whose space it exhausted)
                settings(max_examples=100_000, deadline=None, database=None,
                         phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                         )(seed(self.seed + self._n)(given(st.data())(self._example)))()
        except BaseException as exc:  # the fuzzer's own failure is reported, not hidden
            if not self.stop.is_set():  # (once stopped, hypothesis calls the draws flaky)
                self.error = self.error or exc

    def _example(self, data: st.DataObject) -> None:
        """One example; once stopped, examples draw nothing, which ends hypothesis's run (a
        raise would make it replay the example, which then draws less: FlakyStrategy)."""
        if self.stop.is_set():
            return
        kind = data.draw(st.sampled_from(["quota", "unit", "queue", "job", "cycle"]))
        try:
            if kind == "cycle":
                self.cycle()
            else:
                name = self._next(kind)
                maker = {"quota": bad_quota, "unit": bad_unit, "queue": bad_queue,
                         "job": bad_job}[kind]
                self.one(kind, data.draw(maker(name)))
            self.healthy_served()
        except Exception as exc:  # the fuzzer's own trouble (an API unreachable for long)
            self.outcomes[f"fuzzer could not finish a {kind} example"] += 1
            self.error = self.error or exc

    def one(self, kind: str, body: dict[str, Any]) -> None:
        """Create one drawn object, wait for its answer, delete it."""
        target = {"quota": ELASTIC_QUOTA, "unit": QUEUE_UNIT, "queue": QUEUE, "job": JOB}[kind]
        meta = body["metadata"]
        name, namespace = str(meta["name"]), str(meta["namespace"])
        try:
            created = self._call(lambda: self.api.create(target, body, namespace))
        except ApiError as exc:
            if exc.status in (400, 422):
                self.outcomes[f"{kind}: refused by the API server"] += 1
                return
            raise
        since = time.time()
        try:
            expect = {"quota": expected_quota, "unit": expected_unit, "queue": expected_queue,
                      "job": expected_job}[kind](created)
            if expect is not None:
                reason, message = expect
                if self._wait(f"{kind}: no {reason} event on {name} ({message[:80]})",
                              lambda: self._warned(namespace, name, reason, message), since):
                    self.outcomes[f"{kind}: {reason} event"] += 1
                return
            if kind == "quota":
                if not self._wait(
                        f"quota: no Queue for {name}",
                        lambda: self.api.get(QUEUE, name, names.QUEUE_NAMESPACE) is not None,
                        since):
                    return
                if meta["labels"].get(QUOTA_PARENT_LABEL) == name and self._wait(
                        f"quota: no QuotaCycle event on {name}, its own parent",
                        lambda: self._warned(namespace, name, names.REASON_QUOTA_CYCLE, None),
                        since):
                    self.outcomes["quota: its own parent, QuotaCycle event"] += 1
                    return
                self.outcomes["quota: served"] += 1
            elif kind == "unit":
                status = self._unit_status
                if self._wait(f"unit: no status on {name}",
                              lambda: bool(status(name).get("phase") or status(name).get(
                                  "message")), since):
                    self.outcomes["unit: a status"] += 1
            elif kind == "job":
                skipped = creation_skip(BATCH_JOB, [created])
                if skipped:  # (the controller makes no unit for it: nothing to await)
                    self.outcomes[f"job: not queued, {skipped}"] += 1
                    return
                unit = BATCH_JOB.unit_name(created)
                status = self._unit_status
                if self._wait(f"job: no unit {unit} with a status for {name}",
                              lambda: bool(status(unit).get("phase") or status(unit).get(
                                  "message")), since):
                    self.outcomes["job: a unit with a status"] += 1
            else:
                self.outcomes["queue: served"] += 1
        finally:
            self._remove(target, name, namespace)
            if kind == "job":  # (no garbage collector in the soak's control plane)
                self._remove(QUEUE_UNIT, BATCH_JOB.unit_name(created), namespace)

    def cycle(self) -> None:
        """Two quotas naming each other: QuotaCycle, a unit inside told; broken: the unit
        admitted; an edit closing it again: refused, the unit kept admitted."""
        a, b, job = self._next("cyc-a"), self._next("cyc-b"), self._next("cyc-job")
        unit = BATCH_JOB.unit_name(_healthy_job(job, a))
        since = time.time()
        try:
            self._call(lambda: self.api.create(ELASTIC_QUOTA, _quota(a, b), QUOTA_NAMESPACE))
            self._call(lambda: self.api.create(ELASTIC_QUOTA, _quota(b, a), QUOTA_NAMESPACE))
            self._call(lambda: self.api.create(JOB, _healthy_job(job, a), FUZZ_NAMESPACE))
            if not self._wait(f"cycle: no QuotaCycle event on {a}", lambda: self._warned(
                    QUOTA_NAMESPACE, a, names.REASON_QUOTA_CYCLE, None), since):
                return
            if not self._wait(f"cycle: unit {unit} in {a} not told of the cycle",
                              lambda: "cycle" in str(self._unit_status(unit).get("message")),
                              since):
                return
            self._call(lambda: self.api.merge_patch(
                ELASTIC_QUOTA, b, {"metadata": {"labels": {QUOTA_PARENT_LABEL: None}}},
                QUOTA_NAMESPACE))
            broken = time.time()
            if not self._wait(f"cycle broken: unit {unit} in {a} not admitted",
                              lambda: self._unit_status(unit).get("phase") in ADMITTED,
                              broken, UNSERVED):
                return
            self._call(lambda: self.api.merge_patch(
                ELASTIC_QUOTA, b, {"metadata": {"labels": {QUOTA_PARENT_LABEL: a}}},
                QUOTA_NAMESPACE))
            edited = time.time()
            refusal = names.MSG_QUOTA_CYCLE_REFUSED.split("{cycle}")[0].format(parent=a)

            def cycle_edit_refused() -> bool:
                return any(
                    (e.get("involvedObject") or {}).get("name") == b
                    and e.get("reason") == names.REASON_QUOTA_CYCLE
                    and refusal in str(e.get("message") or "")  # (after the field's name)
                    for e in self.api.list_objects(EVENT, QUOTA_NAMESPACE))

            if not self._wait(f"cycle edit: {b}'s parent {a} not refused with QuotaCycle",
                              cycle_edit_refused, edited):
                return
            if self._unit_status(unit).get("phase") not in ADMITTED:
                self.report(UNSERVED, f"cycle edit refused, yet unit {unit} is no longer "
                                      "admitted")
                return
            self.outcomes["cycle: made, told, broken, re-closing refused"] += 1
        finally:
            self._remove(JOB, job, FUZZ_NAMESPACE)
            self._remove(QUEUE_UNIT, unit, FUZZ_NAMESPACE)
            self._remove(ELASTIC_QUOTA, b, QUOTA_NAMESPACE)
            self._remove(ELASTIC_QUOTA, a, QUOTA_NAMESPACE)

    def healthy_served(self) -> None:
        """A Job in the healthy quota is admitted: the bad object did not stop the queue."""
        job = self._next("ok")
        body = _healthy_job(job, HEALTHY)
        unit = BATCH_JOB.unit_name(body)
        try:
            self._call(lambda: self.api.create(JOB, body, FUZZ_NAMESPACE))
            self._wait(f"healthy Job {job} not admitted",
                       lambda: self._unit_status(unit).get("phase") in ADMITTED,
                       time.time(), UNSERVED)
        finally:
            self._remove(JOB, job, FUZZ_NAMESPACE)
            self._remove(QUEUE_UNIT, unit, FUZZ_NAMESPACE)
