"""The controller is one state object and components wired explicitly (issue 25, part 5).

Before, `Controller` was five mixins over `ControllerBase`, whose cross-calls were
`NotImplementedError` stubs, and base.py and resync.py imported each other (under
`TYPE_CHECKING`, which tests/unit/test_import_graph.py leaves out). Each test below fails at
5119b54 (checked): the cycles package -> loop -> package and base -> resync -> base; ten
stubs in base.py; no state object.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import grimp
import pytest

import koordqueue.kube.controller as controller_package
from koordqueue.kube.api import ELASTIC_QUOTA, QUEUE_UNIT
from koordqueue.kube.controller import Controller
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_controller_state import quota, unit

PACKAGE = "koordqueue.kube.controller"
ROOT = Path(controller_package.__file__).parent


def test_no_import_cycle_in_the_controller_even_for_type_checking() -> None:
    graph = grimp.build_graph("koordqueue", exclude_type_checking_imports=False, cache_dir=None)
    modules = {m for m in graph.modules if m == PACKAGE or m.startswith(PACKAGE + ".")}
    assert len(modules) > 10
    deps = {m: graph.find_modules_directly_imported_by(m) & modules for m in modules}
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as exc:
        pytest.fail("import cycle: " + " -> ".join(exc.args[1]))


def test_no_component_stands_in_for_another_with_a_stub() -> None:
    stubs = []
    for path in sorted(ROOT.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(raised, ast.Name) and raised.id == "NotImplementedError":
                    stubs.append(f"{path.name}:{node.lineno}")
    assert stubs == []


def test_the_components_share_one_state() -> None:
    """Wired explicitly: every component holds the controller's one state, and what one
    asks of another is the other's own method (not a stand-in)."""
    api = MemoryApi()
    api.create(ELASTIC_QUOTA, quota("q", cpu="1"), "default")
    c = Controller(api, ControllerSettings(), writers=1)
    state = c.state
    for component in (c.quotas, c.queues, c.units, c.resyncer, c.rounds):
        assert component.state is state
    assert c.queues.quotas is c.quotas and c.resyncer.units is c.units
    assert c.reactions.on_unit == c.units.on_unit
    assert c.reactions.execute == c.rounds.execute
    assert c.rounds.before_round == c.resyncer.fire_timers
    for consumer in c.consumers.values():
        assert getattr(consumer, "state", None) is state
    c.resync()
    c.on_unit("ADDED", api.create(QUEUE_UNIT, unit("u", "q"), "ns"))
    c.admission_round()
    assert (api.get(QUEUE_UNIT, "u", "ns") or {})["status"]["phase"] == "Dequeued"
    c.close()
