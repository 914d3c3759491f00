"""extender plugin against a real HTTP extender on loopback: cases of volcano-sh/volcano
pkg/scheduler/plugins/extender/extender_test.go (TestIsInterested, TestMaxBodySizeLimit2),
then every verb in a session: predicate refusals (and the error text explain shows),
prioritize picking the node, preemptable picking the victim, jobReady holding a gang,
queueOverused, jobEnqueueable, session open/close, and `extender.ignorable` on a failing
extender.

Switched off and run (`test_each_case_fails_with_extender_off`: the extender left out of
the conf): the refusal, prioritize, preemptable, jobReady and overused cases fail; checked.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from koordqueue.scheduler.api import PodGroupPhase
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.interface import Arguments
from koordqueue.scheduler.plugins import extender as ext
from koordqueue.scheduler.plugins.extender import ExtenderError, ExtenderPlugin

from .harness import build, node, pg, pod, queue, rl, run, tiers
from .test_nodegroup_plugin import OK, verdicts

PENDING, RUNNING = PodGroupPhase.PENDING, PodGroupPhase.RUNNING
Handler = Callable[[dict[str, Any]], tuple[int, Any]]
_off = False


class Extender:
    """A real HTTP extender: `routes[path](request body) -> (code, answer)`; every call
    is recorded as (path, body)."""

    def __init__(self) -> None:
        self.routes: dict[str, Handler] = {}
        self.calls: list[tuple[str, dict[str, Any]]] = []
        owner = self

        class _H(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                path = self.path.lstrip("/")
                owner.calls.append((path, body))
                code, answer = owner.routes.get(path, lambda _b: (404, {}))(body)
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def paths(self) -> list[str]:
        return [path for path, _body in self.calls]


@pytest.fixture
def extender() -> Iterator[Extender]:
    server = Extender()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _args(url: str, **extra: str) -> dict[str, object]:
    return {ln.EXTENDER_URL_PREFIX: url, ln.EXTENDER_HTTP_TIMEOUT: "2s", **extra}


# --- extender_test.go ----------------------------------------------------------------------
@pytest.mark.parametrize(("managed", "request_", "want"), [
    ("", {"cpu": "100m"}, True),
    ("nvidia.com/gpu", {"cpu": "100m", "nvidia.com/gpu": "1"}, True),
    ("nvidia.com/gpu", {"cpu": "100m", "memory": "128Mi"}, False),
    ("nvidia.com/gpu, amd.com/gpu", {"cpu": "100m", "amd.com/gpu": "1"}, True),
])
def test_is_interested(managed: str, request_: dict[str, str], want: bool) -> None:
    """TestIsInterested: no managed resources means every task; otherwise a task asking one
    of them (limits-only cases: Kubernetes defaults an extended resource's request to its
    limit, so the request carries it)."""
    scalars = {k: v for k, v in request_.items() if k not in ("cpu", "memory")}
    task = build([node("n1", rl("4", "8Gi"))],
                 [pod("p1", "", False, rl(request_.get("cpu", ""), request_.get("memory", ""),
                                          scalars), "pg1")],
                 [pg("pg1", "q1", 1, PENDING)], [queue("q1")], "c1").jobs[0].tasks
    plugin = ExtenderPlugin(Arguments({ln.EXTENDER_MANAGED_RESOURCES: managed}))
    assert plugin.interested(next(iter(task.values()))) is want



def _task_requesting(requests: dict[str, str]) -> Any:
    scalars = {k: v for k, v in requests.items() if k not in ("cpu", "memory")}
    tasks = build([node("n1", rl("4", "8Gi"))],
                  [pod("p1", "", False, rl(requests.get("cpu", ""), requests.get("memory", ""),
                                           scalars), "pg1")],
                  [pg("pg1", "q1", 1, PENDING)], [queue("q1")], "c1").jobs[0].tasks
    return next(iter(tasks.values()))


@pytest.mark.parametrize(("requests", "want"), [
    ({}, False),  # no containers
    ({"nvidia.com/gpu": "1"}, True),  # in requests
    ({"nvidia.com/gpu": "1"}, True),  # in limits (the request defaulted from it)
    ({"nvidia.com/gpu": "1"}, True),  # in both
    ({"cpu": "100m", "nvidia.com/gpu": "1"}, True),  # two containers, one asks it
    ({"cpu": "100m", "memory": "128Mi"}, False),
    ({}, False),  # empty requirements
    ({"nvidia.com/gpu": "1", "intel.com/gpu": "1"}, True),  # managed: nvidia and amd
], ids=["no-containers", "requests", "limits", "both", "one-of-two", "none-managed",
        "empty", "partial-match"])
def test_has_managed_resources(requests: dict[str, str], want: bool) -> None:
    """TestHasManagedResources: a task whose containers ask a managed resource (in requests or
    limits) is the extender's; the containers' requests are summed on the task."""
    managed = "nvidia.com/gpu, amd.com/gpu" if "intel.com/gpu" in requests else "nvidia.com/gpu"
    plugin = ExtenderPlugin(Arguments({ln.EXTENDER_MANAGED_RESOURCES: managed}))
    task = _task_requesting(requests)
    assert plugin.interested(task) is want
    assert plugin.names_managed(task.resreq) is want


@pytest.mark.parametrize(("managed", "resources", "want"), [
    ("nvidia.com/gpu", {}, False),
    ("nvidia.com/gpu", None, False),
    ("nvidia.com/gpu", {"cpu": "100m", "nvidia.com/gpu": "1"}, True),
    ("nvidia.com/gpu", {"cpu": "100m", "memory": "128Mi"}, False),
    ("nvidia.com/gpu,amd.com/gpu", {"cpu": "100m", "nvidia.com/gpu": "1", "amd.com/gpu": "1"},
     True),
    ("nvidia.com/gpu,amd.com/gpu", {"cpu": "100m", "amd.com/gpu": "1"}, True),
    ("", {"cpu": "100m", "nvidia.com/gpu": "1"}, False),
], ids=["empty", "nil", "contains", "contains-none", "contains-several", "one-of-several",
        "nothing-managed"])
def test_has_resources_in_list(managed: str, resources: dict[str, str] | None,
                               want: bool) -> None:
    """TestHasResourcesInList, resource list by resource list."""
    plugin = ExtenderPlugin(Arguments({ln.EXTENDER_MANAGED_RESOURCES: managed}))
    assert plugin.names_managed(resources) is want


def test_an_answer_past_the_body_limit_is_an_error(extender: Extender) -> None:
    """TestMaxBodySizeLimit2: an answer one byte past the limit is refused, not read."""
    extender.routes["test"] = lambda _b: (200, b'{"padding":"' + b"a" * (ext.MAX_BODY + 1) + b'"}')
    with pytest.raises(ExtenderError, match="larger than"):
        ext.post(f"{extender.url}/test", {"task": {}, "node": {}}, 5.0)


# --- predicate and prioritize --------------------------------------------------------------
NODES = [node(f"n{i}", rl("4", "8Gi", {"pods": "10"})) for i in (1, 2, 3)]


def _session_verdicts(url: str, points: set[str], **verbs: str) -> dict[str, tuple[str, float]]:
    snapshot = build(NODES, [pod("p1", "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "q1", 1, PENDING)], [queue("q1")], "c1")
    plugin = "gang" if _off else ln.EXTENDER
    config = tiers((plugin, points), arguments={plugin: _args(url, **verbs)})
    return verdicts(open_session(snapshot, config))["c1/p1"]


def _refuse_n2(body: dict[str, Any]) -> tuple[int, Any]:
    assert body["task"]["Name"] == "p1" and body["task"]["Resreq"]["MilliCPU"] == 1000
    if body["node"]["Name"] == "n2":
        return 200, {"status": "n2 is being drained", "code": 2}
    return 200, {"status": "", "code": 0}


def _predicate(extender: Extender) -> dict[str, str]:
    extender.routes["filter"] = _refuse_n2
    row = _session_verdicts(extender.url, {"Predicate"}, **{"extender.predicateVerb": "filter"})
    return {name: reason for name, (reason, _s) in row.items()}


def test_a_predicate_status_refuses_the_node_naming_the_extender(extender: Extender) -> None:
    assert _predicate(extender) == {"n1": OK, "n2": "extender: n2 is being drained", "n3": OK}


def _prioritize(extender: Extender) -> dict[str, float]:
    extender.routes["prioritize"] = lambda body: (200, {"nodeScore": {
        n["Name"]: 10.0 * i for i, n in enumerate(body["nodes"])}, "errorMessage": ""})
    row = _session_verdicts(extender.url, {"NodeOrder"},
                            **{"extender.prioritizeVerb": "prioritize"})
    return {name: score for name, (_r, score) in row.items()}


def test_prioritize_scores_are_added_per_node(extender: Extender) -> None:
    assert _prioritize(extender) == {"n1": 0.0, "n2": 10.0, "n3": 20.0}


@pytest.mark.parametrize(("ignorable", "want"), [
    ("false", "extender: predicate at {url}/filter failed: code 500"),
    ("true", OK),
])
def test_a_failing_extender_refuses_unless_ignorable(extender: Extender, ignorable: str,
                                                     want: str) -> None:
    extender.routes["filter"] = lambda _b: (500, {})
    row = _session_verdicts(extender.url, {"Predicate"}, **{
        "extender.predicateVerb": "filter", ln.EXTENDER_IGNORABLE: ignorable})
    assert {r for r, _s in row.values()} == {want.format(url=extender.url)}


# --- in a session ---------------------------------------------------------------------------
def _allocate(extender: Extender, verbs: dict[str, str], points: set[str]) -> Any:
    # minResources set: Volcano's enqueue asks the votes only of a PodGroup that has them
    snapshot = build(NODES, [pod("a", "", False, rl("1", "1Gi"), "pg1"),
                             pod("b", "", False, rl("1", "1Gi"), "pg1")],
                     [pg("pg1", "q1", 2, PENDING, rl("2", "2Gi"))], [queue("q1")], "c1")
    plugin = "binpack" if _off else ln.EXTENDER
    config = tiers(("gang", {"JobReady", "JobPipelined", "JobValid"}), (plugin, points),
                   arguments={plugin: _args(extender.url, **verbs)})
    return run(snapshot, config, "enqueue, allocate")


def test_prioritize_places_the_gang_where_the_extender_says(extender: Extender) -> None:
    extender.routes["prio"] = lambda body: (200, {"nodeScore": {"n3": 100.0}})
    extender.routes["open"] = extender.routes["close"] = lambda _b: (200, {})
    out = _allocate(extender, {"extender.prioritizeVerb": "prio",
                               "extender.onSessionOpenVerb": "open",
                               "extender.onSessionCloseVerb": "close"}, {"NodeOrder"})
    assert out.binds == {"c1/a": "n3", "c1/b": "n3"}
    assert extender.paths()[0] == "open" and extender.paths()[-1] == "close"
    opened = extender.calls[0][1]
    assert opened["NodeList"] == ["n1", "n2", "n3"] and list(opened["Queues"]) == ["q1"]


def test_job_ready_false_holds_the_gang(extender: Extender) -> None:
    extender.routes["ready"] = lambda body: (200, {"status": body["job"]["Name"] != "pg1"})
    out = _allocate(extender, {"extender.jobReadyVerb": "ready"}, {"JobReady"})
    assert out.binds == {}
    assert any(p == "ready" for p in extender.paths())


def test_queue_overused_keeps_the_queue_out(extender: Extender) -> None:
    extender.routes["overused"] = lambda body: (200, {"overused": body["queue"]["Name"] == "q1"})
    out = _allocate(extender, {"extender.queueOverusedVerb": "overused"}, {"Overused"})
    assert out.binds == {}


def test_job_enqueueable_reject_keeps_the_podgroup_pending(extender: Extender) -> None:
    extender.routes["enq"] = lambda _b: (200, {"status": -1})
    out = _allocate(extender, {"extender.jobEnqueueableVerb": "enq"}, {"JobEnqueued"})
    assert out.phases["c1/pg1"] == PENDING and out.binds == {}


def _preempt(extender: Extender) -> list[str]:
    full = [node("n1", rl("2", "4Gi", {"pods": "10"}))]
    pods = [pod("low-1", "n1", True, rl("1", "1Gi"), "low", priority=1),
            pod("low-2", "n1", True, rl("1", "1Gi"), "low", priority=1),
            pod("high", "", False, rl("1", "1Gi"), "high", priority=100)]
    groups = [pg("low", "q1", 1, RUNNING, priority=1),
              pg("high", "q1", 1, PodGroupPhase.INQUEUE, priority=100)]
    snapshot = build(full, pods, groups, [queue("q1")], "c1")
    # the extender picks low-1, where the priority plugin alone takes low-2 (checked)
    extender.routes["preemptable"] = lambda body: (200, {"status": 1, "victims": [
        t for t in body["evictees"] if t["Name"] == "low-1"]})
    plugin = "binpack" if _off else ln.EXTENDER
    config = tiers(("gang", {"Preemptable", "JobPipelined", "JobStarving"}),
                   ("priority", {"TaskOrder", "JobOrder", "Preemptable", "JobPipelined",
                                 "JobStarving"}), (plugin, {"Preemptable"}),
                   arguments={plugin: _args(extender.url,
                                            **{"extender.preemptableVerb": "preemptable"})})
    return run(snapshot, config, "preempt").evicted


def test_preemptable_victims_are_the_extenders_pick(extender: Extender) -> None:
    assert _preempt(extender) == ["c1/low-1"]


def test_each_case_fails_with_extender_off(extender: Extender,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(__name__ + "._off", True)
    assert _predicate(extender)["n2"] == OK
    assert _prioritize(extender) != {"n1": 0.0, "n2": 10.0, "n3": 20.0}
    extender.routes["prio"] = lambda body: (200, {"nodeScore": {"n3": 100.0}})
    assert _allocate(extender, {"extender.prioritizeVerb": "prio"},
                     {"NodeOrder"}).binds != {"c1/a": "n3", "c1/b": "n3"}
    extender.routes["ready"] = lambda body: (200, {"status": False})
    assert _allocate(extender, {"extender.jobReadyVerb": "ready"}, {"JobReady"}).binds != {}
    assert _preempt(extender) != ["c1/low-1"]
