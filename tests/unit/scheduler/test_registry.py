"""Third-party plugins load through the `koordqueue.plugins` entry-point group."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from koordqueue.scheduler import ConfigError, parse_config, run_session
from koordqueue.scheduler.api import TaskInfo
from koordqueue.scheduler.framework import Arguments, Plugin, Session
from koordqueue.scheduler.framework.registry import (
    load_entry_point_plugins,
    unregister_plugin_builder,
)

from .builders import bound_nodes, job, node, snapshot, task

OPENED: list[str] = []


class OnlyNodeTwo(Plugin):
    """A third-party predicate: only node n2 is acceptable."""

    name = "only-n2"

    def on_session_open(self, session: Session) -> None:
        OPENED.append(self.arguments.get_str("label", ""))

        def predicate(_task: TaskInfo, node_info: object) -> str | None:
            return None if getattr(node_info, "name", "") == "n2" else "not n2"

        session.add_predicate_fn(self.name, predicate)


@dataclass
class FakeEntryPoint:
    name: str
    value: str
    target: object

    def load(self) -> object:
        if isinstance(self.target, Exception):
            raise self.target
        return self.target


@pytest.fixture
def fake_entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    points = [
        FakeEntryPoint("only-n2", "thirdparty:OnlyNodeTwo", OnlyNodeTwo),
        FakeEntryPoint("broken", "thirdparty:Broken", ImportError("no module named thirdparty")),
    ]

    def entry_points(**kwargs: object) -> list[FakeEntryPoint]:
        assert kwargs == {"group": "koordqueue.plugins"}
        return points

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    load_entry_point_plugins(reload=True)
    OPENED.clear()
    yield
    unregister_plugin_builder("only-n2")
    monkeypatch.undo()
    load_entry_point_plugins(reload=True)


@pytest.mark.usefixtures("fake_entry_points")
def test_entry_point_plugin_is_loaded_and_used() -> None:
    cfg = parse_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: only-n2\n    arguments: {label: x}\n'
    )
    result = run_session(snapshot([node("n1"), node("n2")], [job("j", [task("t")])]), cfg)
    assert OPENED == ["x"]
    assert bound_nodes(result) == {"t": "n2"}


@pytest.mark.usefixtures("fake_entry_points")
def test_broken_entry_point_is_reported_when_configured() -> None:
    with pytest.raises(ConfigError, match="no module named thirdparty"):
        parse_config("tiers:\n- plugins:\n  - name: broken\n")


def test_plugin_class_is_its_own_builder() -> None:
    assert isinstance(OnlyNodeTwo(Arguments({"label": "y"})), Plugin)
