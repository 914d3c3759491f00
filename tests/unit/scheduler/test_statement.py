"""Statement: operations are session-only until commit; discard undoes them in reverse."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordqueue.scheduler.api import TaskInfo, TaskStatus
from koordqueue.scheduler.framework import (
    Arguments,
    EventHandler,
    Plugin,
    Session,
    Statement,
    open_session,
    register_plugin_builder,
)
from koordqueue.scheduler.framework.registry import unregister_plugin_builder
from koordqueue.scheduler.framework.result import Bind
from koordqueue.scheduler.framework.statement import Operation, OpKind

from .builders import config, job, node, running, snapshot, task

EVENTS: list[tuple[str, str]] = []


class Recorder(Plugin):
    """Records allocate/deallocate events."""

    name = "recorder"

    def on_session_open(self, session: Session) -> None:
        session.add_event_handler(
            self.name,
            EventHandler(
                lambda t: EVENTS.append(("allocate", t.uid)),
                lambda t: EVENTS.append(("deallocate", t.uid)),
            ),
        )


@pytest.fixture
def session() -> Iterator[Session]:
    register_plugin_builder("recorder", Recorder)
    EVENTS.clear()
    jobs = [job("old", [running("r", "n1")]), job("new", [task("a"), task("b")])]
    yield open_session(snapshot([node("n1"), node("n2")], jobs), config("allocate", ["recorder"]))
    unregister_plugin_builder("recorder")


def _tasks(session: Session) -> dict[str, TaskInfo]:
    return {**session.jobs["old"].tasks, **session.jobs["new"].tasks}


def test_statement_discard_restores_state_and_fires_events_in_reverse(session: Session) -> None:
    tasks = _tasks(session)
    before = {name: (n.idle, n.releasing, n.pipelined) for name, n in session.nodes.items()}
    stmt = Statement(session)
    stmt.allocate(tasks["a"], session.nodes["n1"])
    stmt.pipeline(tasks["b"], session.nodes["n2"])
    stmt.evict(tasks["r"], "preempt")
    EVENTS.clear()
    stmt.discard()
    assert EVENTS == [("allocate", "r"), ("deallocate", "b"), ("deallocate", "a")]
    assert {name: (n.idle, n.releasing, n.pipelined) for name, n in session.nodes.items()} == before
    assert (tasks["a"].status, tasks["b"].status, tasks["r"].status) == (
        TaskStatus.PENDING,
        TaskStatus.PENDING,
        TaskStatus.RUNNING,
    )
    assert tasks["a"].node_name is None


def test_statement_operations_fire_events_in_order(session: Session) -> None:
    tasks = _tasks(session)
    stmt = Statement(session)
    stmt.allocate(tasks["a"], session.nodes["n1"])
    stmt.evict(tasks["r"], "preempt")
    assert EVENTS == [("allocate", "a"), ("deallocate", "r")]


def test_commit_binds_allocations_and_sends_evictions_but_keeps_pipelines_internal(
    session: Session,
) -> None:
    tasks = _tasks(session)
    stmt = Statement(session)
    stmt.allocate(tasks["a"], session.nodes["n2"])
    stmt.pipeline(tasks["b"], session.nodes["n1"])
    stmt.evict(tasks["r"], "preempt")
    stmt.commit()
    result = session.close()
    assert [(b.task, b.node) for b in result.binds] == [("a", "n2")]
    assert [(e.task, e.reason) for e in result.evictions] == [("r", "preempt")]
    assert [(p.task, p.node) for p in result.pipelined] == [("b", "n1")]
    assert tasks["a"].status is TaskStatus.BINDING


def test_uncommitted_statement_changes_only_session_state(session: Session) -> None:
    tasks = _tasks(session)
    Statement(session).allocate(tasks["a"], session.nodes["n1"])
    assert session.nodes["n1"].idle.milli("cpu") == 2000
    result = session.close()
    assert result.binds == ()


def test_statement_cannot_be_finished_twice(session: Session) -> None:
    stmt = Statement(session)
    stmt.commit()
    with pytest.raises(RuntimeError):
        stmt.discard()


def test_arguments_reach_the_plugin_builder() -> None:
    seen: list[Arguments] = []

    def builder(args: Arguments) -> Plugin:
        seen.append(args)
        return Recorder(args)

    register_plugin_builder("recorder", builder)
    try:
        from koordqueue.scheduler import parse_config

        text = 'actions: "allocate"\ntiers:\n- plugins:\n  - name: recorder\n'
        cfg = parse_config(text + "    arguments: {x.weight: 3}\n")
        open_session(snapshot([node("n1")], []), cfg)
    finally:
        unregister_plugin_builder("recorder")
    assert seen[0].get_float("x.weight", 0) == 3.0


def test_allocate_operation_and_bind_equal_their_constructor_built_twins(session: Session) -> None:
    """Statement.allocate and Session.dispatch_bind build their tuples with `tuple.__new__`
    (issue 16, part 2): they must equal what the NamedTuple constructors build, every field
    present (a missed default or a field added later would break this)."""
    tasks = _tasks(session)
    stmt = Statement(session)
    stmt.allocate(tasks["a"], session.nodes["n2"])
    assert stmt.operations == [Operation(OpKind.ALLOCATE, tasks["a"], "n2")]
    assert len(stmt.operations[0]) == len(Operation._fields)
    stmt.commit()
    binds = session.close().binds
    assert list(binds) == [Bind("a", "default", "a", "new", "n2")]
    assert len(binds[0]) == len(Bind._fields)
