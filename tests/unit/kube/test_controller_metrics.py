"""The per-queue unit gauges are kept from counts the engine updates as units move, not from a
walk of every unit per round (issue 11): after any sequence of unit adds, phase and label
changes, deletes and rounds, they equal a full recount of the controller's units."""

from __future__ import annotations

import copy
import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.mapping import QuotaName, queue_name_for
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import FINISHED_PHASES
from koordqueue.kube import metrics
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit

NAMES = tuple(f"u{i}" for i in range(8))
PHASES = (None, "Enqueued", "Enqueued", "Dequeued", "Running", "Succeed", "Failed", "Backoff")
_examples = itertools.count()

OPS = st.one_of(
    st.tuples(
        st.just("add"), st.sampled_from(NAMES), st.integers(0, 3), st.sampled_from(("1", "2"))
    ),
    st.tuples(st.just("phase"), st.sampled_from(NAMES), st.sampled_from(PHASES)),
    st.tuples(st.just("relabel"), st.sampled_from(NAMES), st.integers(0, 3)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("round")),
    st.tuples(st.just("round")),
)


def recount(c: Controller) -> dict[str, tuple[int, int]]:
    """Waiting / admitted units per queue, from every unit the controller knows."""
    counts: dict[str, list[int]] = {}
    for u in c.engine.units():
        resolution = queue_name_for(u.labels)
        if u.phase in FINISHED_PHASES or not isinstance(resolution, QuotaName):
            continue
        entry = counts.setdefault(resolution.name, [0, 0])
        entry[1 if c.engine.is_admitted(u.uid) else 0] += 1
    return {q: (n[0], n[1]) for q, n in counts.items()}


def gauges(queue: str) -> tuple[int, int]:
    pending = metrics.UNITS_PENDING.labels(queue)._value.get()
    admitted = metrics.UNITS_ADMITTED.labels(queue)._value.get()
    return int(pending), int(admitted)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(("Priority", "Block", "Intelligent")), min_size=3, max_size=3),
       st.lists(OPS, min_size=1, max_size=40))
def test_unit_gauges_equal_a_full_recount_after_any_events(
    policies: list[str], ops: list[tuple[Any, ...]]
) -> None:
    prefix = f"gm{next(_examples)}-"  # the gauges are process-wide: fresh queue names
    quotas = [f"{prefix}q{i}" for i in range(3)]
    labels = [*quotas, f"{prefix}missing"]  # (index 3: a quota that does not exist)
    api = MemoryApi()
    for name, policy in zip(quotas, policies, strict=True):
        api.create(ELASTIC_QUOTA, quota(name, policy=policy, cpu="3"), "default")
    c = Controller(api, ControllerSettings(), writers=1)
    c.resync()
    for op in ops:
        kind, name = op[0], op[1] if len(op) > 1 else ""
        current = api.get(QUEUE_UNIT, name, "ns")
        if kind == "add" and current is None:
            obj = api.create(QUEUE_UNIT, unit(name, labels[op[2]], "Enqueued", cpu=op[3]), "ns")
            c.on_unit("ADDED", copy.deepcopy(obj))
        elif kind == "phase" and current is not None:
            patch = {"status": {"phase": op[2]}} if op[2] else {"status": {"phase": ""}}
            obj = api.merge_patch(QUEUE_UNIT, name, patch, "ns")
            c.on_unit("MODIFIED", copy.deepcopy(obj))
        elif kind == "relabel" and current is not None:
            patch = {"metadata": {"labels": {QUOTA_NAME_LABEL: labels[op[2]]}}}
            obj = api.merge_patch(QUEUE_UNIT, name, patch, "ns")
            c.on_unit("MODIFIED", copy.deepcopy(obj))
        elif kind == "delete" and current is not None:
            api.delete(QUEUE_UNIT, name, "ns")
            c.on_unit("DELETED", copy.deepcopy(current))
        elif kind == "round":
            c.admission_round()
            expected = recount(c)
            assert {q: gauges(q) for q in labels} == {
                q: expected.get(q, (0, 0)) for q in labels
            }
    c.close()
