"""How the scheduler adapter sorts pods for queue admission (cache -> GateView), and flags."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.features import FeatureGateError, parse_feature_gates
from koordqueue.scheduler.gates import FEATURE_GATE, GATE_NAME, OPT_IN_ANNOTATION


def pod(name: str, gates: list[str], opt_in: bool, node: str | None = None) -> dict[str, Any]:
    notes = {OPT_IN_ANNOTATION: "true"} if opt_in else {}
    spec: dict[str, Any] = {"schedulerName": "volcano",
                            "schedulingGates": [{"name": g} for g in gates],
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "ns", "uid": name, "annotations": notes},
            "spec": spec, "status": {"phase": "Pending"}}


def view_of(*pods: dict[str, Any], enabled: bool = True) -> Any:
    cache = SchedulerCache()
    cache.replace(CachedKind.POD, pods)
    return cache.build(gates_enabled=enabled)


def test_only_our_gate_and_opt_in_makes_a_candidate() -> None:
    built = view_of(pod("a", [GATE_NAME], True), pod("b", ["x", GATE_NAME], True))
    assert built.view.candidates == {"a"}


def test_an_ungated_pending_opt_in_pod_holds_a_reservation() -> None:
    built = view_of(pod("r", [], True), pod("plain", [], False), pod("bound", [], True, "n"))
    assert built.view.reserved == {"r"}


def test_our_gate_without_opt_in_is_reported_not_released() -> None:
    built = view_of(pod("w", [GATE_NAME], False))
    assert (built.view.candidates, built.gate_without_opt_in) == (frozenset(), ["ns/w"])


def test_with_the_feature_gate_off_nothing_is_sorted() -> None:
    built = view_of(pod("a", [GATE_NAME], True), pod("r", [], True), enabled=False)
    assert (built.view.candidates, built.view.reserved) == (frozenset(), frozenset())


def test_feature_gates_default_off_and_parse_the_kubernetes_format() -> None:
    assert parse_feature_gates("")[FEATURE_GATE] is False
    assert parse_feature_gates(f"{FEATURE_GATE}=true")[FEATURE_GATE] is True


def test_unknown_feature_gates_are_refused() -> None:
    with pytest.raises(FeatureGateError):
        parse_feature_gates("NoSuchGate=true")


def test_a_pod_is_converted_again_when_its_resource_version_moves() -> None:
    cache = SchedulerCache()
    first = pod("a", [], False)
    first["metadata"]["resourceVersion"] = "1"
    cache.replace(CachedKind.POD, [first])
    cache.build()
    second = pod("a", [], False)
    second["metadata"]["resourceVersion"] = "2"
    second["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3"
    cache.replace(CachedKind.POD, [second])
    [job] = cache.build().snapshot.jobs
    assert job.tasks["a"].resreq["cpu"] == 3_000_000_000
