"""drf's opt-in namespace order (`enableNamespaceOrder`, Volcano <= v1.7 drf.go
namespaceOrderFn and its namespace policy in preemptableFn) and drf's preemptable rule."""

from __future__ import annotations

import pytest

from koordqueue.scheduler import ClusterSnapshot, parse_config
from koordqueue.scheduler.api import JobInfo, QueueInfo
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.config import ConfigError
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.plugins.drf import namespace_weight

from .builders import node, running, task


def open_drf(
    jobs: list[JobInfo],
    *,
    namespace_order: bool = True,
    labels: dict[str, dict[str, str]] | None = None,
) -> Session:
    flag = "true" if namespace_order else "false"
    cfg = parse_config(
        'actions: "allocate"\ntiers:\n- plugins:\n  - name: drf\n'
        f"    enableNamespaceOrder: {flag}\n"
    )
    snap = ClusterSnapshot(
        [node("n1", "8", "64Gi")], jobs, [QueueInfo("default")], namespace_labels=labels or {}
    )
    return open_session(snap, cfg)


def busy_and_idle(**kwargs: object) -> Session:
    """Namespace "busy" runs 4 of 8 cpu (job big, four 1-cpu tasks) and has an empty job j1;
    namespace "idle" has job j2 with 1 cpu running."""
    jobs = [
        JobInfo(
            "big", namespace="busy", tasks=[running(f"b{i}", "n1", "1", "0") for i in range(4)]
        ),
        JobInfo("j1", namespace="busy", tasks=[task("p1", "1", "0")]),
        JobInfo(
            "j2", namespace="idle", tasks=[running("r2", "n1", "1", "0"), task("p2", "1", "0")]
        ),
    ]
    return open_drf(jobs, **kwargs)  # type: ignore[arg-type]


def test_jobs_of_the_namespace_with_the_lower_share_come_first() -> None:
    """busy holds .5, idle .125: j2 goes before j1 although j1's own share (0) is lower."""
    session = busy_and_idle()
    assert session.job_order_less(session.jobs["j2"], session.jobs["j1"])


def test_without_namespace_order_the_job_share_decides() -> None:
    """The default (Volcano v1.8+): j1 (share 0) before j2 (.125)."""
    session = busy_and_idle(namespace_order=False)
    assert session.job_order_less(session.jobs["j1"], session.jobs["j2"])
    assert session.plugins["drf"].namespaces is None  # type: ignore[attr-defined]


def test_namespace_weight_divides_its_share() -> None:
    """busy weighs 8: .5 / 8 < .125, so busy's j1 comes first again."""
    session = busy_and_idle(labels={"busy": {"volcano.sh/namespace.weight": "8"}})
    assert session.job_order_less(session.jobs["j1"], session.jobs["j2"])


def test_allocation_updates_the_namespace_share() -> None:
    """Four more cpu allocated to idle (.625) put it behind busy (.5)."""
    session = busy_and_idle()
    for i in range(4):
        extra = task(f"x{i}", "1", "0")
        session.jobs["j2"].add_task(extra)
        session.allocate_task(extra, session.nodes["n1"])
    assert session.job_order_less(session.jobs["j1"], session.jobs["j2"])


@pytest.mark.parametrize(
    ("value", "weight", "bad"),
    [(None, 1, None), ("3", 3, None), ("0", 1, "0"), ("-2", 1, "-2"), ("x", 1, "x")],
)
def test_namespace_weight_label(value: str | None, weight: int, bad: str | None) -> None:
    """A missing label is weight 1; a non-positive or non-integer one is 1 and reported."""
    labels = {} if value is None else {"volcano.sh/namespace.weight": value}
    assert namespace_weight(labels) == (weight, bad)


def test_bad_namespace_weight_is_a_warning_not_a_crash() -> None:
    session = busy_and_idle(labels={"busy": {"volcano.sh/namespace.weight": "heavy"}})
    assert any("namespace busy" in w and "'heavy'" in w for w in session.warnings)
    assert session.job_order_less(session.jobs["j2"], session.jobs["j1"])


def test_preemptor_takes_from_a_namespace_that_stays_ahead() -> None:
    """Namespace policy: idle's preemptor (.25 after) takes from busy (.375 after)."""
    session = busy_and_idle()
    preemptor = session.jobs["j2"].tasks["p2"]
    victim = session.jobs["big"].tasks["b0"]
    assert session.preemptable(preemptor, [victim]) == [victim]


def test_preemptor_spares_a_namespace_that_would_fall_behind() -> None:
    """busy's preemptor (.625 after) may not take idle's task (0 after), although the job
    rule alone (j1 .125 vs j2 0) would also refuse."""
    session = busy_and_idle()
    preemptor = session.jobs["j1"].tasks["p1"]
    assert session.preemptable(preemptor, [session.jobs["j2"].tasks["r2"]]) == []


def test_namespace_policy_overrides_the_job_rule() -> None:
    """idle's one job j2 holds 2 of 8 cpu; busy's five 1-cpu jobs hold 5. With the preemptor
    idle reaches .375 and busy keeps .5, so the namespace policy takes s0's task; the job rule
    alone would not (j2 .375 after > s0's 0 after)."""
    jobs = [
        JobInfo(f"s{i}", namespace="busy", tasks=[running(f"s{i}r", "n1", "1", "0")])
        for i in range(5)
    ]
    jobs.append(
        JobInfo("j2", namespace="idle", tasks=[running("r2", "n1", "2", "0"), task("p2", "1", "0")])
    )
    victim_uid = "s0r"
    on = open_drf(jobs)
    victim = on.jobs["s0"].tasks[victim_uid]
    assert on.preemptable(on.jobs["j2"].tasks["p2"], [victim]) == [victim]
    off = open_drf(jobs, namespace_order=False)
    assert off.preemptable(off.jobs["j2"].tasks["p2"], [off.jobs["s0"].tasks[victim_uid]]) == []


# --- drf's job rule (always on) ----------------------------------------------------------------
def test_preemptable_judges_a_jobs_victims_one_after_another() -> None:
    """Volcano's preemptableFn subtracts each victim from its job's running allocation: the
    preemptor reaches 1/8; the victim job (3 of 8) keeps 2/8 then 1/8 (equal: allowed) then
    0 (below: spared)."""
    jobs = [
        JobInfo("v", tasks=[running(f"v{i}", "n1", "1", "0") for i in range(3)]),
        JobInfo("p", tasks=[task("p0", "1", "0")]),
    ]
    session = open_drf(jobs, namespace_order=False)
    victims = [session.jobs["v"].tasks[f"v{i}"] for i in range(3)]
    assert session.preemptable(session.jobs["p"].tasks["p0"], victims) == victims[:2]


@pytest.mark.parametrize("key", ["enableNamespaceOrder", "enableHierarchy"])
def test_drf_switch_that_is_not_a_boolean_is_refused(key: str) -> None:
    """A switch must be true or false: the configuration is refused when loaded, naming it."""
    with pytest.raises(ConfigError, match=f"{key} must be true or false"):
        parse_config(f"tiers:\n- plugins:\n  - name: drf\n    {key}: 'yes'\n")


def test_namespace_order_switch_is_off_unless_set() -> None:
    session = open_session(
        ClusterSnapshot([], [], [QueueInfo("default")]),
        parse_config("tiers:\n- plugins:\n  - name: drf\n"),
    )
    assert session.plugins["drf"].namespaces is None  # type: ignore[attr-defined]
    assert session.plugins["drf"].tree is None  # type: ignore[attr-defined]
