"""extender: Volcano's HTTP extender, so a scheduling decision can be delegated to a service
the cluster runs. Each `extender.<verb>Verb` argument names the path (under
`extender.urlPrefix`) the extender serves that verb at; a verb left out is not asked.

As in Volcano (pkg/scheduler/plugins/extender): every call is a JSON POST with a timeout
(`extender.httpTimeout`, a Go duration, 1s by default); a non-200 answer or a failed call
is an error; `extender.ignorable: true` makes an error mean "no opinion" (the node passes,
no score, the vote permits, nothing is overused), otherwise the error refuses (predicate:
the node, with the error as its reason; job ready: not ready; overused: overused;
enqueueable / preemptable / reclaimable: reject). A predicate answer with a non-empty
`status` refuses the node with that text. Victims come back as tasks; they are matched to
the candidates offered by UID. `extender.managedResources` (comma-separated, Volcano's
newer argument) limits the task-level verbs to tasks that request one of those resources.

Where koordqueue differs: prioritize scores arrive as a map node -> score and are added to
the session's scores unnormalised, as Volcano's batch node order adds them; predicate
refusals carry the plugin's name (`extender: ...`) for explain and events.
"""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import numpy as np

from koordqueue.domain.queue_items import parse_go_duration
from koordqueue.scheduler.api import JobInfo, NodeInfo, QueueInfo, TaskInfo
from koordqueue.scheduler.api import load_names as ln
from koordqueue.scheduler.framework.interface import Arguments, ExtensionPoint, Plugin, Vote
from koordqueue.scheduler.framework.placement import BoolArray, FloatArray, Scorer
from koordqueue.scheduler.framework.session import Session
from koordqueue.scheduler.interpod import plugin_enabled
from koordqueue.scheduler.plugins import extender_wire as wire

MAX_BODY = 10 * 1024 * 1024
"""Answers longer than this are refused, not read whole into memory."""


class ExtenderError(Exception):
    """A call that gave no usable answer; the message names the verb and URL."""


def post(url: str, body: object, timeout: float) -> Any:
    """POST `body` as JSON; the decoded answer. ExtenderError for anything else."""
    data = json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST",
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read(MAX_BODY + 1)
    except urllib.error.HTTPError as exc:
        raise ExtenderError(f"code {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise ExtenderError(str(getattr(exc, "reason", exc))) from exc
    if len(raw) > MAX_BODY:
        raise ExtenderError(f"answer larger than {MAX_BODY} bytes")
    if not raw.strip():
        return {}
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ExtenderError(f"answer is not JSON: {exc}") from exc


def _verbs(arguments: Arguments) -> dict[str, str]:
    out: dict[str, str] = {}
    for verb in ln.EXTENDER_VERBS:
        value = arguments.get(f"extender.{verb}Verb")
        if isinstance(value, str) and value.strip():
            out[verb] = value.strip()
    return out


def _managed(raw: object) -> frozenset[str]:
    items = raw.split(",") if isinstance(raw, str) else raw if isinstance(raw, list) else []
    return frozenset(str(i).strip() for i in items if str(i).strip())


class ExtenderPlugin(Plugin):
    """Asks an HTTP service the questions its conf names."""

    name = ln.EXTENDER
    post: ClassVar[Callable[[str, object, float], Any]] = staticmethod(post)

    def __init__(self, arguments: Arguments | None = None) -> None:
        super().__init__(arguments)
        args = self.arguments
        self.url_prefix = args.get_str(ln.EXTENDER_URL_PREFIX, "").rstrip("/")
        self.verbs = _verbs(args)
        self.ignorable = args.get_bool(ln.EXTENDER_IGNORABLE, False)
        self.managed = _managed(args.get(ln.EXTENDER_MANAGED_RESOURCES))
        self.timeout = ln.EXTENDER_DEFAULT_TIMEOUT
        raw = args.get(ln.EXTENDER_HTTP_TIMEOUT)
        if isinstance(raw, str) and raw.strip():
            with contextlib.suppress(ValueError):  # Volcano keeps the default
                self.timeout = parse_go_duration(raw) or ln.EXTENDER_DEFAULT_TIMEOUT

    # --- calls ----------------------------------------------------------------------------
    def call(self, verb: str, body: object) -> Any:
        """The extender's answer to `verb`; ExtenderError naming verb and URL on failure."""
        url = f"{self.url_prefix}/{self.verbs[verb]}"
        try:
            answer = type(self).post(url, body, self.timeout)
        except ExtenderError as exc:
            raise ExtenderError(ln.ERR_EXTENDER_CALL.format(verb=verb, url=url,
                                                            error=exc)) from exc
        if not isinstance(answer, dict):
            raise ExtenderError(ln.ERR_EXTENDER_CALL.format(
                verb=verb, url=url, error=f"expected a JSON object, got {answer!r:.80}"))
        return answer

    def interested(self, task: TaskInfo) -> bool:
        """Volcano's IsInterested: no managed resources, or the task requests one."""
        if not self.managed:
            return True
        return self.names_managed(task.resreq) or self.names_managed(task.init_resreq or ())

    def names_managed(self, resources: Iterable[str] | None) -> bool:
        """Volcano's hasResourcesInList: one of `resources` is managed (none managed: no).
        Its hasManagedResources asks this of each container's requests and limits; a task's
        request is their sum, with an extended resource's request defaulted from its limit
        by the API server."""
        return bool(resources) and not self.managed.isdisjoint(resources or ())

    # --- session --------------------------------------------------------------------------
    def on_session_open(self, session: Session) -> None:
        self.session = session
        if "onSessionOpen" in self.verbs:
            try:
                self.call("onSessionOpen", wire.session_open(
                    session.jobs, session.node_list, session.queues))
            except ExtenderError as exc:
                session.warnings.append(str(exc))
                if not self.ignorable:
                    return  # Volcano registers nothing when the open call failed
        self.reasons: dict[tuple[str, str], str] = {}
        if "predicate" in self.verbs and plugin_enabled(session, self.name,
                                                        ExtensionPoint.PREDICATE):
            session.placement.add_dynamic_predicate(self.predicate, self.explain)
        if "prioritize" in self.verbs and plugin_enabled(session, self.name,
                                                         ExtensionPoint.NODE_ORDER):
            session.placement.add_dynamic_score(self.scorer)
        if "preemptable" in self.verbs:
            session.add_preemptable_fn(self.name, lambda p, c: self._evictable("preemptable", p, c))
        if "reclaimable" in self.verbs:
            session.add_reclaimable_fn(self.name, lambda p, c: self._evictable("reclaimable", p, c))
        if "jobEnqueueable" in self.verbs:
            session.add_job_enqueueable_fn(self.name, self._enqueueable)
        if "queueOverused" in self.verbs:
            session.add_overused_fn(self.name, self._overused)
        if "jobReady" in self.verbs:
            session.add_job_ready_fn(self.name, self._ready)

    def on_session_close(self, session: Session) -> None:
        if "onSessionClose" in self.verbs:
            try:
                self.call("onSessionClose", {})
            except ExtenderError as exc:
                session.warnings.append(str(exc))

    # --- predicate and score --------------------------------------------------------------
    def _one(self, task: TaskInfo, node: NodeInfo) -> str | None:
        try:
            answer = self.call("predicate", {"task": wire.task(task), "node": wire.node(node)})
        except ExtenderError as exc:
            return None if self.ignorable else str(exc)
        message = answer.get("status")
        return f"{ln.EXTENDER}: {message}" if isinstance(message, str) and message else None

    def predicate(self, task: TaskInfo) -> BoolArray | None:
        if not self.interested(task):
            return None
        nodes = self.session.node_list
        passes = np.ones(len(nodes), dtype=np.bool_)
        for n in nodes:
            reason = self._one(task, n)
            if reason is not None:
                passes[n.index] = False
                self.reasons[(task.uid, n.name)] = reason
            else:
                self.reasons.pop((task.uid, n.name), None)
        return passes

    def explain(self, task: TaskInfo, node: NodeInfo) -> str | None:
        key = (task.uid, node.name)
        return self.reasons[key] if key in self.reasons else self._one(task, node)

    def scorer(self, task: TaskInfo) -> Scorer | None:
        if not self.interested(task):
            return None
        nodes = self.session.node_list
        try:
            answer = self.call("prioritize", {"task": wire.task(task),
                                              "nodes": [wire.node(n) for n in nodes]})
        except ExtenderError as exc:
            self.session.warnings.append(str(exc))
            return None
        scores = answer.get("nodeScore")
        if answer.get("errorMessage") or not isinstance(scores, dict):
            if answer.get("errorMessage"):
                self.session.warnings.append(f"{ln.EXTENDER}: {answer['errorMessage']}")
            return None
        out: FloatArray = np.zeros(len(nodes), dtype=np.float64)
        for n in nodes:
            value = scores.get(n.name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[n.index] = float(value)
        return lambda _eff: out

    # --- votes ----------------------------------------------------------------------------
    def _evictable(self, verb: str, evictor: TaskInfo,
                   evictees: list[TaskInfo]) -> list[TaskInfo] | None:
        if not self.interested(evictor):
            return None
        try:
            answer = self.call(verb, {"evictor": wire.task(evictor),
                                      "evictees": [wire.task(t) for t in evictees]})
        except ExtenderError as exc:
            self.session.warnings.append(str(exc))
            return None if self.ignorable else []
        status = answer.get("status")
        if status == Vote.REJECT.value:
            return []
        if status != Vote.PERMIT.value:
            return None  # Volcano: Abstain leaves the decision to the other plugins
        by_uid = {t.uid: t for t in evictees}
        victims = answer.get("victims") or []
        return [by_uid[v["UID"]] for v in victims
                if isinstance(v, dict) and v.get("UID") in by_uid]

    def _enqueueable(self, job: JobInfo) -> Vote:
        try:
            answer = self.call("jobEnqueueable", {"job": wire.job(job)})
        except ExtenderError as exc:
            self.session.warnings.append(str(exc))
            return Vote.PERMIT if self.ignorable else Vote.REJECT
        status = answer.get("status")
        return Vote(status) if status in (-1, 0, 1) else Vote.ABSTAIN

    def _overused(self, queue: QueueInfo) -> bool:
        try:
            answer = self.call("queueOverused", {"queue": wire.queue(queue)})
        except ExtenderError as exc:
            self.session.warnings.append(str(exc))
            return not self.ignorable
        return answer.get("overused") is True

    def _ready(self, job: JobInfo) -> bool:
        try:
            answer = self.call("jobReady", {"job": wire.job(job)})
        except ExtenderError as exc:
            self.session.warnings.append(str(exc))
            return self.ignorable
        return answer.get("status") is True
