"""Simulator and live controller agree (issue 15): same events, same unit phases and messages.

Random small scenarios (hypothesis, a few examples, no shrinking) run through `simulate` and
through the real controller on the real control plane. All objects are created before the
controller starts, so its first round sees every unit at once, as the simulator's step 0 does;
units are created in name order, so the creation-time tie breaker orders them as the
simulator's (all arrive at step 0, ties broken by name).

Plans may hold workloads of the `pod` integration too (a single gated Pod or a pod group,
issue 13): the simulator builds their units from the same manifests (`workload:`), the
controller (run with `--integrations batch/job,pod`) from the Pods it watches. It creates
those units after its first round, in no set order, so each workload has a root quota of its
own (or names a missing one): its outcome does not depend on when its unit arrives. A
workload's unit on an unserved (Round) queue keeps its creator's first message, Enqueued.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

import yaml
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from koordqueue.domain.names import (
    ENABLE_PREEMPTION_ANNOTATION,
    MAX_DEPTH_ANNOTATION,
    POD_ADMISSION_GATE,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUOTA_NAME_LABEL,
    ROOT_QUOTA,
    WAIT_FOR_PODS_RUNNING_ANNOTATION,
)
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import QuotaDef, Scenario, UnitDef, parse_scenario
from koordqueue.simulation.simulator import simulate
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

POLICIES = ("Priority", "Block", "Intelligent", "Round")
GHOST = "ghost"
MISSING = "missing"
INTEGRATIONS = "batch/job,pod"
WORKLOAD_POLICIES = POLICIES
"""Round included: a workload's unit on that unserved queue keeps its creator's first status
message ("Enqueued", domain.effects.CREATED_STATUS), in the simulator as in the controller."""


class QuotaPlan(NamedTuple):
    policy: str
    parent: int | str | None  # index of an earlier quota, GHOST (missing), None (root)
    cpu: int
    depth: int | None


class UnitPlan(NamedTuple):
    quota: int | str | None  # index, MISSING (no such quota), None (no label)
    cpu: int
    priority: int


class WorkloadPlan(NamedTuple):
    """Pods of one workload (1: a single Pod; more: a pod group) in a root quota of its own
    (`quota_cpu`; None: the workload names a quota that does not exist)."""

    pods: int
    cpu: int  # per pod
    policy: str
    quota_cpu: int | None


Plan = tuple[tuple[QuotaPlan, ...], tuple[UnitPlan, ...], tuple[WorkloadPlan, ...]]


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    quotas: list[QuotaPlan] = []
    for i in range(draw(st.integers(1, 3))):
        parent = draw(st.sampled_from([None, GHOST, *range(i)]))
        quotas.append(
            QuotaPlan(
                draw(st.sampled_from(POLICIES)),
                parent,
                draw(st.integers(1, 4)),
                draw(st.sampled_from([None, 1])),
            )
        )
    targets: list[int | str | None] = [*range(len(quotas)), MISSING, None]
    units = draw(
        st.lists(
            st.builds(
                UnitPlan, st.sampled_from(targets), st.integers(1, 3), st.integers(0, 6)
            ),
            min_size=1,
            max_size=6,
        )
    )
    workloads = draw(
        st.lists(
            st.builds(
                WorkloadPlan,
                st.integers(1, 3),
                st.integers(1, 2),
                st.sampled_from(WORKLOAD_POLICIES),
                st.sampled_from([None, 1, 2, 4]),
            ),
            max_size=2,
        )
    )
    return tuple(quotas), tuple(units), tuple(workloads)


def _quota_name(prefix: str, ref: int | str) -> str:
    return f"{prefix}-{ref}" if isinstance(ref, str) else f"{prefix}-q{ref}"


def _scenario(plan: Plan, prefix: str, ns: str) -> Scenario:
    quotas = tuple(
        QuotaDef(
            name=_quota_name(prefix, i),
            parent=ROOT_QUOTA if q.parent is None else _quota_name(prefix, q.parent),
            max=Resources.of(cpu=str(q.cpu)),
            policy=q.policy,
            annotations={MAX_DEPTH_ANNOTATION: str(q.depth)} if q.depth else {},
        )
        for i, q in enumerate(plan[0])
    )
    units = tuple(
        UnitDef(
            name=f"u{i}",
            namespace=ns,
            quota=None if u.quota is None else _quota_name(prefix, u.quota),
            resource=Resources.of(cpu=str(u.cpu)),
            priority=u.priority,
        )
        for i, u in enumerate(plan[1])
    )
    own = tuple(
        QuotaDef(
            name=_quota_name(prefix, f"w{i}"),
            max=Resources.of(cpu=str(w.quota_cpu)),
            policy=w.policy,
        )
        for i, w in enumerate(plan[2])
        if w.quota_cpu is not None
    )
    return Scenario(
        "differential", "generated", 3, "1", quotas + own, units + _workload_units(plan, prefix, ns)
    )


def _workloads(plan: Plan, prefix: str, ns: str) -> list[list[dict[str, Any]]]:
    """Each workload's held Pods, as created on the cluster and given to the simulator."""
    out = []
    for i, w in enumerate(plan[2]):
        quota = _quota_name(prefix, f"w{i}" if w.quota_cpu is not None else MISSING)
        group = {POD_GROUP_NAME_LABEL: f"w{i}"} if w.pods > 1 else {}
        count = {POD_GROUP_TOTAL_COUNT_ANNOTATION: str(w.pods)} if w.pods > 1 else {}
        out.append([
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"w{i}-{j}" if w.pods > 1 else f"w{i}",
                    "namespace": ns,
                    "labels": {QUOTA_NAME_LABEL: quota, **group},
                    "annotations": count,
                },
                "spec": {
                    "restartPolicy": "Never",
                    "schedulingGates": [{"name": POD_ADMISSION_GATE}],
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"requests": {"cpu": str(w.cpu)}},
                        }
                    ],
                },
            }
            for j in range(w.pods)
        ])
    return out


def _workload_units(plan: Plan, prefix: str, ns: str) -> tuple[UnitDef, ...]:
    """The simulator's units for the workloads: parsed from `workload:` manifests, so built
    as the scenario file builds them (name with the kind's suffix, resource, quota label)."""
    pods = _workloads(plan, prefix, ns)
    if not pods:
        return ()
    doc = {
        "name": "workloads",
        "steps": 1,
        "quotas": [{"name": f"{prefix}-unused", "max": {"cpu": "1"}}],
        "units": [{"workload": members if len(members) > 1 else members[0]} for members in pods],
    }
    return parse_scenario(yaml.safe_dump(doc), "differential").units


def _manifests(scenario: Scenario) -> list[dict[str, Any]]:
    out = [q.as_object() for q in scenario.quotas]
    for u in scenario.units:
        labels = {QUOTA_NAME_LABEL: u.quota} if u.quota is not None else {}
        out.append(
            {
                "apiVersion": "scheduling.x-k8s.io/v1alpha1",
                "kind": "QueueUnit",
                "metadata": {"name": u.name, "namespace": u.namespace, "labels": labels},
                "spec": {"resource": u.resource.to_quantities(), "priority": u.priority},
            }
        )
    return out


def _cluster_objects(scenario: Scenario, plan: Plan, prefix: str, ns: str) -> list[dict[str, Any]]:
    """Quotas, plain units, and the workloads' Pods (whose units the controller makes)."""
    plain = {u.name for u in scenario.units if u.consumer_kind is None}
    objects = [
        o for o in _manifests(scenario)
        if o["kind"] != "QueueUnit" or o["metadata"]["name"] in plain
    ]
    return objects + [pod for members in _workloads(plan, prefix, ns) for pod in members]


Observed = tuple[dict[str, tuple[str, str | None]], dict[str, frozenset[tuple[str, str, str]]]]


def _expected(scenario: Scenario) -> Observed:
    result = simulate(scenario)
    phases, messages = result.final_phases(), result.final_messages()
    units = {key: (phases[key], messages.get(key)) for key in phases}
    events: dict[str, set[tuple[str, str, str]]] = {}
    for record in result.steps:
        for e in record.events:
            kind, _, name = e.unit.partition("/")
            key = f"queue:{name}" if kind == "queue" else name
            events.setdefault(key, set()).add((e.type, e.reason, e.message))
    return units, {k: frozenset(v) for k, v in events.items()}


def _observed(kubectl: Any, ns: str, quota_names: set[str]) -> Observed:
    units: dict[str, tuple[str, str | None]] = {}
    for item in kubectl.json("get", "queueunits.scheduling.x-k8s.io", "-n", ns)["items"]:
        status = item.get("status") or {}
        key = f"{ns}/{item['metadata']['name']}"
        units[key] = (status.get("phase") or "Enqueued", status.get("message"))
    events: dict[str, set[tuple[str, str, str]]] = {}
    listed = kubectl.json("get", "events", "-n", ns)["items"]
    listed += [
        e for e in kubectl.json("get", "events", "-n", "koord-queue")["items"]
        if e["involvedObject"].get("name") in quota_names
    ]
    for e in listed:
        obj = e["involvedObject"]
        key = f"queue:{obj['name']}" if obj.get("kind") == "Queue" else obj["name"]
        events.setdefault(key, set()).add((e["type"], e["reason"], e["message"]))
    return units, {k: frozenset(v) for k, v in events.items()}


EXAMPLE: Plan = (
    (
        QuotaPlan("Block", None, 3, None),
        QuotaPlan("Intelligent", 0, 2, None),
        QuotaPlan("Round", GHOST, 2, None),
    ),
    (
        UnitPlan(0, 2, 1),  # Block head after u1: does not fit any more, blocks quota q0
        UnitPlan(0, 2, 5),  # admitted into q0 (priority first)
        UnitPlan(1, 3, 6),  # Intelligent high unit that does not fit: holds the low one
        UnitPlan(1, 1, 0),  # low: waits while a high unit waits
        UnitPlan(0, 1, 0),  # would fit q0, but q0 is blocked by u0
        UnitPlan(MISSING, 1, 0),
        UnitPlan(None, 1, 0),
    ),
    (
        WorkloadPlan(3, 1, "Priority", 4),  # a pod group of 3 x 1 cpu: admitted whole
        WorkloadPlan(1, 2, "Block", 1),  # a single pod bigger than its quota: limited
        WorkloadPlan(2, 1, "Priority", None),  # a group naming a missing quota
        WorkloadPlan(1, 1, "Round", 2),  # on an unserved queue: keeps its first message
    ),
)


@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(plan=EXAMPLE)
@given(plan=plans())
def test_simulator_and_controller_write_the_same_events_and_messages(
    kubectl: Any, kubeconfig: Any, plan: Plan
) -> None:
    prefix = kq.unique("diff")
    ns = kq.namespace(kubectl, prefix)
    scenario = _scenario(plan, prefix, ns)
    expected = _expected(scenario)
    objects = _cluster_objects(scenario, plan, prefix, ns)
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": objects})
    quota_names = {q.name for q in scenario.quotas}
    with RunningController(kubeconfig, integrations=INTEGRATIONS):
        kq.wait_for(
            lambda: _observed(kubectl, ns, quota_names) == expected,
            timeout=20.0,
            what="the controller's events and unit statuses to match the simulator's",
            state=lambda: (_observed(kubectl, ns, quota_names), expected),
        )
        time.sleep(1.0)  # a few more rounds: nothing more may be written
        assert _observed(kubectl, ns, quota_names) == expected


def test_preemption_writes_the_simulators_events_and_messages(
    kubectl: Any, kubeconfig: Any
) -> None:
    """The Preempted event and the victim's message (they differed before issue 15).

    Replayed until settled: the round after the reclaim offers the victim again and finds the
    quota full, so its last message is the refusal (a 3-step replay stopped at 'reclaimed')."""
    prefix = kq.unique("diffpre")
    ns = kq.namespace(kubectl, prefix)
    on = {WAIT_FOR_PODS_RUNNING_ANNOTATION: "true", ENABLE_PREEMPTION_ANNOTATION: "true"}
    scenario = Scenario(
        "preemption", "generated", 5, "1",
        (QuotaDef(name=f"{prefix}-q", max=Resources.of(cpu="2"), annotations=on),),
        (
            UnitDef("low", ns, f"{prefix}-q", Resources.of(cpu="2"), priority=1),
            UnitDef("urgent", ns, f"{prefix}-q", Resources.of(cpu="2"), priority=9, arrive=1),
        ),
    )
    expected = _expected(scenario)
    assert expected[1]["low"] >= {
        ("Warning", "Preempted", f"preempted by {ns}/urgent; back in queue"),
        ("Normal", "Reclaimed", "reclaimed: 1 admitted replica(s) not running were taken back"),
    }
    assert expected[0][f"{ns}/low"][1] == f"limited quotaName:{prefix}-q, limited resKey:cpu,"
    quota, low, urgent = _manifests(scenario)
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [quota, low]})
    with RunningController(kubeconfig):
        kq.wait_for(lambda: kq.phase(kubectl, ns, "low") == "Dequeued", what="low admitted")
        kubectl.apply(urgent)
        kq.wait_for(
            lambda: _observed(kubectl, ns, {f"{prefix}-q"}) == expected,
            timeout=20.0,
            what="the controller's events and unit statuses to match the simulator's",
            state=lambda: (_observed(kubectl, ns, {f"{prefix}-q"}), expected),
        )
        time.sleep(1.0)  # a few more rounds: the settled world stays as it is
        assert _observed(kubectl, ns, {f"{prefix}-q"}) == expected
