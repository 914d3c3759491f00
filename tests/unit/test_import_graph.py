"""The package's import graph (issue 25, part 3): no import cycle anywhere in `koordqueue`,
and the scheduler framework imports no plugin or action (they register from outside, as
Volcano's plugins/factory.go and actions/factory.go do).

The graph is grimp's (the library import-linter builds on), read from the source each time
(no cache, so an edit is never judged by a stale graph). Imports under `if TYPE_CHECKING:`
are left out: they are never executed, so they cannot form a cycle at run time; they are how
a contract names the class that calls it (a plugin's `on_session_open(session: Session)`),
which in Go is two files of one package.

Both tests fail at 5ff42c3, where `framework/registry.py` imported the built-in actions and
plugins: one circle of 22 modules (framework, actions, plugins).
"""

from __future__ import annotations

import graphlib
from pathlib import Path

import grimp
import pytest

import koordqueue

PACKAGE = "koordqueue"


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    found = grimp.build_graph(PACKAGE, exclude_type_checking_imports=True, cache_dir=None)
    # the graph is of the tree under test (the one `import koordqueue` found)
    root = Path(koordqueue.__file__).parent
    assert (root / "scheduler" / "framework" / "registry.py").exists()
    return found


def test_no_import_cycle_in_the_package(graph: grimp.ImportGraph) -> None:
    deps = {module: graph.find_modules_directly_imported_by(module) for module in graph.modules}
    assert len(deps) > 100  # the whole package, not an empty graph
    try:
        graphlib.TopologicalSorter(deps).prepare()
    except graphlib.CycleError as exc:
        cycle = exc.args[1]
        pytest.fail("import cycle: " + " -> ".join(cycle))


@pytest.mark.parametrize(
    "library",
    [
        "koordqueue.scheduler.plugins",
        "koordqueue.scheduler.actions",
        "koordqueue.scheduler.interpod",
    ],
)
def test_the_framework_imports_no_plugin_or_action(
    graph: grimp.ImportGraph, library: str
) -> None:
    chain = graph.find_shortest_chain(
        importer="koordqueue.scheduler.framework", imported=library, as_packages=True
    )
    assert chain is None, f"the framework reaches {library}: {' -> '.join(chain or ())}"
