"""The plugin guide's example (docs/examples/plugins/draining.py) works as documented."""

from __future__ import annotations

import importlib.metadata
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.resources import Resources
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.framework import ClusterSnapshot, parse_config, registry, run_session

from .builders import bound_nodes

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples" / "plugins"
CONFIG = """
actions: "enqueue, allocate, backfill"
tiers:
  - plugins:
      - name: priority
      - name: gang
      - name: conformance
  - plugins:
      - name: predicates
      - name: nodeorder
      - name: draining
        arguments:
          draining.preferredTier: gold
          draining.weight: 1000
"""


@pytest.fixture
def draining_entry_point(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Install the example as a third-party package would: through the entry-point group."""
    monkeypatch.syspath_prepend(str(EXAMPLES))
    real = importlib.metadata.entry_points

    def entry_points(**kwargs: Any) -> Any:
        if kwargs.get("group") == "koordqueue.plugins":
            return [
                importlib.metadata.EntryPoint("draining", "draining:build", "koordqueue.plugins")
            ]
        return real(**kwargs)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    registry.load_entry_point_plugins(reload=True)
    yield
    registry.unregister_plugin_builder("draining")
    sys.modules.pop("draining", None)
    monkeypatch.undo()
    registry.load_entry_point_plugins(reload=True)


def snapshot(*nodes: NodeInfo) -> ClusterSnapshot:
    pod = TaskInfo("p", "p", resreq=Resources.of(cpu="1"))
    return ClusterSnapshot(
        nodes=nodes, jobs=[JobInfo("j", tasks=[pod])], queues=[QueueInfo("default")]
    )


def node(name: str, **labels: str) -> NodeInfo:
    return NodeInfo(
        name,
        Resources.of(cpu="4", memory="8Gi"),
        labels={f"example.koordqueue.io/{k}": v for k, v in labels.items()},
    )


def test_draining_nodes_are_never_chosen(draining_entry_point: None) -> None:
    result = run_session(snapshot(node("a", draining="true"), node("b")), parse_config(CONFIG))
    assert bound_nodes(result) == {"p": "b"}


def test_draining_reason_appears_in_the_fit_errors(draining_entry_point: None) -> None:
    result = run_session(snapshot(node("a", draining="true")), parse_config(CONFIG))
    assert result.binds == ()
    assert "node is draining" in result.fit_errors["p"].message()


def test_preferred_tier_wins_the_score(draining_entry_point: None) -> None:
    result = run_session(
        snapshot(node("a", tier="silver"), node("b", tier="gold"), node("c")), parse_config(CONFIG)
    )
    assert bound_nodes(result) == {"p": "b"}
