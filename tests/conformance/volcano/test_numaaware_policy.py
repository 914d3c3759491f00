"""numa-aware's policies and cpu-manager provider: every case of volcano-sh/volcano v1.14.1
pkg/scheduler/plugins/numaaware/policy (Test_none_predicate, Test_best_effort_predicate,
Test_restricted_predicate, Test_single_numa_node_predicate) and
provider/cpumanager (Test_GetTopologyHints, Test_Allocate), inputs and expected outcomes
in our terms (a NUMA mask is an int: bit i = NUMA node i).

Feature switched off: each case also runs with the feature off and asserts that the expected
outcome is then NOT reached, so every case is checked failing without the feature:
- a policy case runs through the `none` policy (the topology manager switched off); the none
  case itself runs through best-effort (switching the none policy off);
- a provider case runs with the provider giving no hints (a pod the cpu manager ignores:
  a fractional cpu request); an Allocate case with the provider off (no cpus given) and
  with no best hint (the aligned step off), or, where its answer is itself "no cpus"
  (test-5), with the taken cpus' accounting off (every cpu of the node free).
"""

from __future__ import annotations

import pytest

from koordqueue.scheduler.api.numa import CpuInfo, NumaTopology, mask_of, parse_cpuset
from koordqueue.scheduler.numa import cpumanager
from koordqueue.scheduler.numa.policy import ProviderHints, TopologyHint, policy_for

NODES = [0, 1]


def M(*ids: int) -> int:  # noqa: N802 - reads like Volcano's NewBitMask
    return mask_of(ids)


def H(mask: int, preferred: bool) -> TopologyHint:  # noqa: N802
    return TopologyHint(mask, preferred)


def two(cpu: list[TopologyHint], gpu: list[TopologyHint]) -> list[ProviderHints]:
    """Two providers, one resource each (cpu, gpu), as every policy case has."""
    return [{"cpu": cpu}, {"gpu": gpu}]


# The cases Test_best_effort_predicate and Test_restricted_predicate share (same inputs,
# same expectations), and Test_single_numa_node_predicate's.
CASE_HINTS = {
    "test-1": two([H(M(0, 1), False), H(M(0), True)], [H(M(0, 1), False), H(M(0), True)]),
    "test-2": two([H(M(0, 1), False), H(M(1), True)], [H(M(0, 1), False), H(M(1), True)]),
    "test-3": two([H(M(0, 1), False), H(M(0), True), H(M(1), True)],
                  [H(M(0, 1), False), H(M(0), True), H(M(1), True)]),
    "test-4": two([H(M(0, 1), False), H(M(0), True)], [H(M(0, 1), False), H(M(1), True)]),
    "test-5": two([H(M(0, 1), False), H(M(0), True)], [H(M(0, 1), True)]),
    "test-6": two([H(M(0, 1), True)], [H(M(0, 1), True)]),
}
BEST_EFFORT_EXPECT = {
    "test-1": H(M(0), True), "test-2": H(M(1), True), "test-3": H(M(0), True),
    "test-4": H(M(0), False), "test-5": H(M(0), True), "test-6": H(M(0, 1), True),
}
SINGLE_EXPECT = {
    "test-1": H(M(0), True), "test-2": H(M(1), True), "test-3": H(M(0), True),
    "test-4": H(M(0, 1), False), "test-5": H(M(0, 1), False),
}


def _best(policy: str, hints: list[ProviderHints]) -> TopologyHint:
    return policy_for(policy, NODES)(hints)[0]


def test_none_predicate() -> None:
    """Test_none_predicate: no hints -> the empty hint (mask None, not preferred).
    Off (best-effort instead of none): the all-nodes mask, preferred -> differs."""
    assert _best("none", []) == TopologyHint()
    assert _best("best-effort", []) != TopologyHint()


@pytest.mark.parametrize("case", sorted(BEST_EFFORT_EXPECT))
def test_best_effort_predicate(case: str) -> None:
    """Test_best_effort_predicate: preferred over not, then the narrowest, lowest mask."""
    assert _best("best-effort", CASE_HINTS[case]) == BEST_EFFORT_EXPECT[case]
    assert _best("none", CASE_HINTS[case]) != BEST_EFFORT_EXPECT[case]


@pytest.mark.parametrize("case", sorted(BEST_EFFORT_EXPECT))
def test_restricted_predicate(case: str) -> None:
    """Test_restricted_predicate: the same best hints as best-effort; admitted only when
    preferred (test-4 is refused)."""
    best, admit = policy_for("restricted", NODES)(CASE_HINTS[case])
    assert best == BEST_EFFORT_EXPECT[case]
    assert admit is best.preferred
    assert _best("none", CASE_HINTS[case]) != BEST_EFFORT_EXPECT[case]


@pytest.mark.parametrize("case", sorted(SINGLE_EXPECT))
def test_single_numa_node_predicate(case: str) -> None:
    """Test_single_numa_node_predicate: only preferred one-node hints count; when none
    merge (test-4: cpu on 0, gpu on 1; test-5: gpu only on both) the best is all nodes,
    not preferred, refused."""
    best, admit = policy_for("single-numa-node", NODES)(CASE_HINTS[case])
    assert best == SINGLE_EXPECT[case]
    assert admit is best.preferred
    assert _best("none", CASE_HINTS[case]) != SINGLE_EXPECT[case]


# --- provider/cpumanager -------------------------------------------------------------------
# Volcano's numaInfo: 8 cpus, two per core; cores 0-1 on socket/NUMA 0, cores 2-3 on 1.
TOPO = NumaTopology(
    "n",
    cpus={cpu: CpuInfo(numa=cpu // 4, socket=cpu // 4, core=cpu // 2) for cpu in range(8)},
)
FRACTIONAL = 1500
"""A request the cpu manager does not pin (the provider switched off for the pod)."""


def _hints(cpus: int, free: str) -> list[TopologyHint] | None:
    answer = cpumanager.topology_hints(cpus * 1000, TOPO, {"cpu": parse_cpuset(free)})
    return None if answer is None else answer["cpu"]


HINT_CASES = {
    "test-1": (4, "0-7", [H(M(0), True), H(M(1), True), H(M(0, 1), False)]),
    "test-2": (4, "1-7", [H(M(1), True), H(M(0, 1), False)]),
    "test-3": (5, "0-7", [H(M(0, 1), True)]),
    "test-4": (8, "0-7", [H(M(0, 1), True)]),
    "test-5": (9, "0-7", []),
    "test-6": (4, "2-5", [H(M(0, 1), False)]),
}


@pytest.mark.parametrize("case", sorted(HINT_CASES))
def test_get_topology_hints(case: str) -> None:
    """Test_GetTopologyHints: every mask with enough free cpus; preferred are the masks as
    narrow as the narrowest that could ever hold the request (test-6: 4 cpus fit NUMA 0
    alone on an empty node, so {0,1} is not preferred); 9 cpus: no hint at all."""
    cpus, free, expect = HINT_CASES[case]
    assert _hints(cpus, free) == expect
    off = cpumanager.topology_hints(FRACTIONAL, TOPO, {"cpu": parse_cpuset(free)})
    assert off is None and expect != off


ALLOCATE_CASES = {
    "test-1": (4, "0-7", H(M(0), True), "0-3"),
    "test-2": (4, "1-7", H(M(1), True), "4-7"),
    "test-3": (5, "0-7", H(M(0, 1), True), "0-4"),
    "test-4": (5, "1-7", H(M(0, 1), True), "1,4-7"),
    "test-5": (8, "1-7", H(M(0, 1), True), ""),
}


@pytest.mark.parametrize("case", sorted(ALLOCATE_CASES))
def test_allocate(case: str) -> None:
    """Test_Allocate: whole sockets, then whole cores, then single cpus, from the best
    hint's NUMA nodes first (test-2: NUMA 1's 4-7 though 1-3 are free too; test-4: socket
    1 whole, then the lone cpu 1 before the whole core 2-3); 8 cpus of 7 free: none."""
    cpus, free, best, expect = ALLOCATE_CASES[case]
    got = cpumanager.allocate(cpus * 1000, best, TOPO, {"cpu": parse_cpuset(free)})
    assert got == {"cpu": parse_cpuset(expect)}
    off_aligned = cpumanager.allocate(cpus * 1000, TopologyHint(), TOPO,
                                      {"cpu": parse_cpuset(free)})
    off = cpumanager.allocate(FRACTIONAL, best, TOPO, {"cpu": parse_cpuset(free)})
    off_accounting = cpumanager.allocate(cpus * 1000, best, TOPO, {"cpu": parse_cpuset("0-7")})
    assert any(variant != got for variant in (off, off_aligned, off_accounting))


def test_reserved_cpus_are_left_out() -> None:
    """The node's resReserved cpu (rounded up, taken by topology: cpus 0-1 here) is never
    given nor counted: 4 cpus then fit only NUMA 1. Without the reservation NUMA 0 fits."""
    reserved = NumaTopology("n", cpus=TOPO.cpus, reserved_cpu_millis=1500)
    got = cpumanager.topology_hints(4000, reserved, {"cpu": parse_cpuset("0-7")})
    assert got == {"cpu": [H(M(1), True), H(M(0, 1), False)]}
    assert _hints(4, "0-7") != got["cpu"]
