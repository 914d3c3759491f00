"""Bad input at the edge (issue 12, part 4): QueueUnits, Queues and ElasticQuotas created by
hand with missing or absurd fields that the CRD schemas let through.

A hypothesis fuzzer (a fixed number of examples, derandomized, no shrinking, bounded in time)
creates one such object per example against the live controller, then:
- the object gets a clear answer: an object the controller cannot read gets a Warning event
  naming the field (InvalidQuota, InvalidQueueUnit); a readable unit gets a status message
  (Enqueued, queue not found, no quota label...); a readable quota its Queue;
- the controller keeps serving every other queue: a Job in a healthy quota created after the
  bad object is admitted, every time.
What the controller must make of each object is predicted with the domain parsers the
controller itself uses (quota_from_object, queue_unit_from_object).
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from koordqueue.domain import names
from koordqueue.domain.names import DEFAULT_POLICY, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.domain.policies import QueueSettings, UnknownPolicyError, make_policy
from koordqueue.domain.queue_unit import InvalidQueueUnitError, queue_unit_from_object
from koordqueue.domain.quota import InvalidQuotaError, quota_from_object
from koordqueue.kube.api import ELASTIC_QUOTA, EVENT, QUEUE, QUEUE_UNIT, ApiError, KubeApi
from tests.e2e import kq

EXAMPLES = 24
NAMESPACE = "koord-queue"

QUANTITIES = st.sampled_from([
    "1", "0", "-5", "1m", "1e-9", "1e30", "9999999999999999999999999Ei", "0.0000001",
    "123456789012345678901234567890", "1Ei", ".5", "+3", "1E+18", "100Gi", "-0",
]) | st.integers(min_value=-(2**62), max_value=2**62)
RESOURCE_NAMES = st.sampled_from(
    ["cpu", "memory", "nvidia.com/gpu", "example.com/unknown", "pods", "ephemeral-storage",
     "weird_resource", "Xx-Not-Known"])
LABEL_VALUES = st.sampled_from(
    ["", "UPPER_case.x", "a" * 63, "-x", "x-", "under_score", "dots.in.name", "nope-not-there"])
RESOURCES = st.dictionaries(RESOURCE_NAMES, QUANTITIES, max_size=4)


@st.composite
def bad_quota(draw: st.DrawFn, n: int) -> dict[str, Any]:
    name = f"fz-q-{n}"
    labels: dict[str, str] = {}
    parent = draw(st.sampled_from(["self", "missing", "odd", "none", "fz-root"]))
    if parent == "self":
        labels[QUOTA_PARENT_LABEL] = name  # a quota that is its own parent
    elif parent == "missing":
        labels[QUOTA_PARENT_LABEL] = "fz-no-such-parent"
    elif parent == "odd":
        labels[QUOTA_PARENT_LABEL] = draw(LABEL_VALUES)
    elif parent == "fz-root":
        labels[QUOTA_PARENT_LABEL] = "fz-root"
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["max"] = draw(RESOURCES)
    if draw(st.booleans()):
        spec["min"] = draw(RESOURCES)
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": spec}


@st.composite
def bad_unit(draw: st.DrawFn, n: int, ns: str) -> dict[str, Any]:
    labels: dict[str, str] = {}
    quota = draw(st.sampled_from(["none", "odd", "fz-root"]))
    if quota == "odd":
        labels[QUOTA_NAME_LABEL] = draw(LABEL_VALUES)
    elif quota == "fz-root":
        labels[QUOTA_NAME_LABEL] = "fz-root"
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["resource"] = draw(RESOURCES)
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
    if draw(st.booleans()):
        spec["queue"] = draw(LABEL_VALUES)
    if draw(st.booleans()):
        spec["podSet"] = [{"name": "p", "count": draw(st.integers(0, 2**31 - 1))}]
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
            "metadata": {"name": f"fz-u-{n}", "namespace": ns, "labels": labels},
            "spec": spec}


@st.composite
def bad_queue(draw: st.DrawFn, n: int) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["queuePolicy"] = draw(st.sampled_from(
            ["Priority", "Block", "NoSuchPolicy", "", "priority", "x" * 63]))
    if draw(st.booleans()):
        spec["priority"] = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "Queue",
            "metadata": {"name": f"fz-queue-{n}", "namespace": NAMESPACE}, "spec": spec}


def explicit_cases(counter: Any, ns: str) -> list[tuple[str, dict[str, Any]]]:
    """A quota that is its own parent (with room, so the walk up reaches the cycle); huge
    quantities and unknown resource names; a quota label that is not a DNS label."""
    a, b, c = next(counter), next(counter), next(counter)
    own = f"fz-q-{a}"
    return [
        ("quota", {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                   "metadata": {"name": own, "namespace": "default",
                                "labels": {QUOTA_PARENT_LABEL: own}},
                   "spec": {"max": {"cpu": "10", "memory": "10Gi"}}}),
        ("quota", {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                   "metadata": {"name": f"fz-q-{b}", "namespace": "default", "labels": {}},
                   "spec": {"max": {"cpu": "9999999999999999999999999Ei",
                                    "example.com/unknown": "1e30"}}}),
        ("unit", {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
                  "metadata": {"name": f"fz-u-{c}", "namespace": ns,
                               "labels": {QUOTA_NAME_LABEL: "UPPER_case.x"}},
                  "spec": {"resource": {"cpu": "1e30", "weird_resource": "3"}}}),
    ]


def warnings_for(api: KubeApi, namespace: str, name: str) -> list[tuple[str, str]]:
    return [
        (str(e.get("reason")), str(e.get("message")))
        for e in api.list_objects(EVENT, namespace)
        if (e.get("involvedObject") or {}).get("name") == name and e.get("type") == "Warning"
    ]


def test_bad_objects_get_a_clear_answer_and_every_other_queue_is_still_served(
    controller: Any, kubectl: Any, api_client: Any, tmp_path: Path
) -> None:
    api = KubeApi(api_client)
    ns = kq.namespace(kubectl, kq.unique("fuzz"))
    healthy = kq.unique("healthy")
    kubectl.apply(kq.quota(healthy, max_={"cpu": "1000", "memory": "1Ti"}))
    kubectl.apply(kq.quota("fz-root", max_={"cpu": "2", "memory": "1Gi"}))
    counter = iter(range(10_000))
    outcomes: list[str] = []
    started = time.monotonic()

    def admitted(name: str) -> bool:
        return kq.phase(kubectl, ns, name) == "Dequeued"

    def example(kind: str, data: st.DataObject) -> None:
        n = next(counter)
        body = data.draw({"quota": bad_quota(n), "unit": bad_unit(n, ns),
                          "queue": bad_queue(n)}[kind])
        check(kind, body, n)

    def check(kind: str, body: dict[str, Any], n: int) -> None:
        target = {"quota": ELASTIC_QUOTA, "unit": QUEUE_UNIT, "queue": QUEUE}[kind]
        where = body["metadata"]["namespace"]
        name = body["metadata"]["name"]
        try:
            created = api.create(target, body, where)
        except ApiError as exc:
            assert exc.status in (400, 422), exc  # the schema refused it: nothing to answer
            outcomes.append(f"{kind}: refused by the API server")
            return

        if kind == "quota":
            try:
                quota_from_object(created)
            except InvalidQuotaError as exc:
                why = str(exc)
                kq.wait_for(
                    lambda: (names.REASON_INVALID_QUOTA, why)
                    in warnings_for(api, "default", name),
                    timeout=15, what=f"an InvalidQuota event on {name}",
                    state=lambda: warnings_for(api, "default", name))
                outcomes.append("quota: InvalidQuota event")
            else:
                kq.wait_for(lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", name,
                                           NAMESPACE), timeout=15, what=f"the Queue of {name}")
                # a unit submitted to it is told what became of it (a quota that is its own
                # parent: the CheckUsage cycle message, as Koord-Queue reports it)
                probe = f"probe-{n}"
                api.create(QUEUE_UNIT, {
                    "apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
                    "metadata": {"name": probe, "namespace": ns,
                                 "labels": {QUOTA_NAME_LABEL: name}},
                    "spec": {"resource": {"cpu": "1m"}}}, ns)

                def told() -> str:
                    found = kq.get(kubectl, "queueunits.scheduling.x-k8s.io", probe, ns) or {}
                    return str((found.get("status") or {}).get("message") or "")

                message = kq.wait_for(told, timeout=15, what=f"a status message on {probe}")
                if body["metadata"]["labels"].get(QUOTA_PARENT_LABEL) == name:
                    # CheckUsage looks at the unit's own quota first (an empty spec, or
                    # too little of it), then walks up and finds the cycle
                    assert name in message and any(
                        w in message for w in ("cycle", "spec is empty", "exceed")), message
                    if "10Gi" in str(body["spec"]):
                        assert "cycle" in message, message
                outcomes.append(f"quota: unit told {message[:30]}")
        elif kind == "unit":
            try:
                queue_unit_from_object(created)
            except InvalidQueueUnitError as exc:
                why = str(exc)
                kq.wait_for(
                    lambda: (names.REASON_INVALID_QUEUE_UNIT, why)
                    in warnings_for(api, ns, name),
                    timeout=15, what=f"an InvalidQueueUnit event on {name}",
                    state=lambda: warnings_for(api, ns, name))
                outcomes.append("unit: InvalidQueueUnit event")
            else:
                def answered() -> str:
                    found = kq.get(kubectl, "queueunits.scheduling.x-k8s.io", name, ns) or {}
                    status = found.get("status") or {}
                    return str(status.get("message") or "")

                message = kq.wait_for(answered, timeout=15, what=f"a status message on {name}")
                outcomes.append(f"unit: {message[:40]}")
        else:
            policy = str((created.get("spec") or {}).get("queuePolicy") or DEFAULT_POLICY)
            try:
                make_policy(policy, QueueSettings.from_annotations({}, policy))
            except UnknownPolicyError:
                expected = names.MSG_UNKNOWN_POLICY.format(queue=name, policy=policy)
                kq.wait_for(
                    lambda: (names.REASON_ADD_QUEUE_FAIL, expected)
                    in warnings_for(api, NAMESPACE, name),
                    timeout=15, what=f"an AddQueueFail event on {name}",
                    state=lambda: warnings_for(api, NAMESPACE, name))
                outcomes.append("queue: AddQueueFail event")
            else:
                outcomes.append("queue: served")

        job = f"ok-{n}"
        kubectl.apply(kq.job(job, ns, healthy, cpu="10m", memory="1Mi"))
        kq.wait_for(lambda: admitted(job), timeout=15,
                    what=f"a Job in a healthy quota admitted after {kind} {body}")
        assert controller._thread is not None

    def for_kind(kind: str) -> Any:
        def one(data: st.DataObject) -> None:
            example(kind, data)

        return one

    try:
        # the cases the issue names, always; then the fuzzer's
        for kind, body in explicit_cases(counter, ns):
            check(kind, body, int(body["metadata"]["name"].rsplit("-", 1)[1]))
        for kind in ("quota", "unit", "queue"):  # EXAMPLES / 3 of each kind
            run = settings(
                max_examples=EXAMPLES // 3, deadline=None, derandomize=True, database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow],
            )(given(data=st.data())(for_kind(kind)))
            run()
    finally:
        for n in range(next(counter)):
            for plural, where in (("elasticquotas.scheduling.sigs.k8s.io", "default"),
                                  ("queues.scheduling.x-k8s.io", NAMESPACE)):
                kubectl("delete", plural, f"fz-q-{n}", f"fz-queue-{n}", "-n", where,
                        "--ignore-not-found", "--wait=false", check=False)
    elapsed = time.monotonic() - started
    seen = collections.Counter(o.split(":")[0] + ":" + o.split(":")[1][:25] for o in outcomes)
    print(f"{len(outcomes)} examples in {elapsed:.0f} s: {dict(seen)}")
    assert len(outcomes) == EXAMPLES + 3
    assert elapsed < 120
