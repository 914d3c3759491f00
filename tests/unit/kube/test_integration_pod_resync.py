"""The pod integration's periodic resync lists only the pods a queue can hold, not every pod.

Pod.resync_selector: the quota label (a unit without it is never admitted) and no node yet
(spec.nodeName=, kube-scheduler's selector of unassigned pods; a gated pod is never bound).
A released pod that is bound is looked at through its unit; a finished one is not looked at
again. The in-memory API honours label and field selectors as the API server does, and
KubeApi sends the field selector as `fieldSelector`.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from koordqueue.domain import names
from koordqueue.domain.integrations import POD, PYTORCH_JOB
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.kube.api import QUEUE_UNIT, Kind, KubeApi
from koordqueue.kube.controller.integrations import kind_of
from tests.unit.kube.memory_api import MemoryApi, fields_match, labels_match
from tests.unit.kube.test_api_transport import Seen, served  # noqa: F401 - the fixture
from tests.unit.kube.test_integration_resync import (
    CountingApi,
    cpu_used,
    looks_of,
    make,
    next_period,
)

PODS = kind_of(POD)


class GetCountingApi(CountingApi):
    """CountingApi that also counts reads of single pods by name."""

    def __init__(self) -> None:
        super().__init__()
        self.pod_gets = 0

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if kind.plural == PODS.plural:
            self.pod_gets += 1
        return super().get(kind, name, namespace)


def _pod(
    api: MemoryApi, name: str, *, quota: str | None = "q", gated: bool = True, node: str = ""
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}
    if gated:
        spec["schedulingGates"] = [{"name": names.POD_ADMISSION_GATE}]
    if node:
        spec["nodeName"] = node
    labels = {QUOTA_NAME_LABEL: quota} if quota is not None else {}
    return api.create(
        PODS,
        {"metadata": {"name": name, "namespace": "default", "labels": labels}, "spec": spec},
        "default",
    )


def _resync_lists(api: CountingApi, since: int) -> list[tuple[Any, ...]]:
    """The cluster-wide pod lists made since `since` (a group's lists are per namespace)."""
    return [s for s in api.selectors[since:] if s[0] == PODS.plural and s[1] is None]


def test_the_pod_resync_asks_only_for_unbound_pods_that_name_a_quota() -> None:
    api = GetCountingApi()
    c, _, clock = make(api, "kubeflow.org/pytorchjob,pod")
    _pod(api, "queued")  # its ADDED event was lost
    _pod(api, "no-quota", quota=None)  # gated without a quota: its unit could never be admitted
    _pod(api, "web", quota="q", gated=False, node="n1")  # bound, never the queue's
    looks = looks_of(c, "Pod")
    since = len(api.selectors)
    next_period(c, clock)
    assert _resync_lists(api, since) == [("pods", None, QUOTA_NAME_LABEL, "spec.nodeName=")]
    assert looks == ["default/queued-pod-qu"]  # the server's answer held only that pod
    assert api.get(QUEUE_UNIT, "queued-pod-qu", "default") is not None
    assert api.get(QUEUE_UNIT, "no-quota-pod-qu", "default") is None


def test_other_kinds_are_still_listed_whole() -> None:
    api = CountingApi()
    c, _, clock = make(api, "kubeflow.org/pytorchjob,pod")
    since = len(api.selectors)
    next_period(c, clock)
    plural = kind_of(PYTORCH_JOB).plural
    assert [s for s in api.selectors[since:] if s[0] == plural] == [(plural, None, None, None)]


def test_a_released_pod_that_finished_unseen_gives_its_quota_back_through_its_unit() -> None:
    api = GetCountingApi()
    c, _, clock = make(api, "kubeflow.org/pytorchjob,pod")
    _pod(api, "solo")
    next_period(c, clock)  # the unit is made, admitted, the gate removed
    pod = api.get(PODS, "solo", "default")
    assert pod is not None and not pod["spec"].get("schedulingGates")
    assert cpu_used(c) == "1"
    # bound and finished, with no event reaching the controller: no longer in the list
    pod["spec"]["nodeName"] = "n1"
    pod["status"] = {"phase": "Succeeded"}
    gets = api.pod_gets
    next_period(c, clock)
    assert api.pod_gets > gets  # looked at through its unit
    unit = api.get(QUEUE_UNIT, "solo-pod-qu", "default")
    assert unit is not None and unit["status"]["phase"] == "Succeed"
    assert cpu_used(c) is None
    gets = api.pod_gets
    next_period(c, clock)
    assert api.pod_gets == gets  # finished: not looked at again each period


def test_memory_api_honours_label_selectors() -> None:
    labels = {"a": "1", "b": "2"}
    assert labels_match(None, labels) and labels_match("", labels)
    assert labels_match("a", labels) and not labels_match("c", labels)
    assert labels_match("!c", labels) and not labels_match("!a", labels)
    assert labels_match("a=1,b==2", labels) and not labels_match("a=1,b=3", labels)
    assert labels_match("a!=2", labels) and not labels_match("a!=1", labels)
    assert labels_match("a in (1, 3)", labels) and not labels_match("a in (3,4)", labels)
    assert labels_match("a notin (3,4),b", labels) and not labels_match("a notin (1)", labels)


def test_memory_api_honours_field_selectors() -> None:
    bound = {"metadata": {"name": "p"}, "spec": {"nodeName": "n1"}}
    unbound = {"metadata": {"name": "q"}, "spec": {}}
    assert fields_match("spec.nodeName=", unbound) and not fields_match("spec.nodeName=", bound)
    assert fields_match("spec.nodeName!=", bound) and not fields_match("spec.nodeName!=", unbound)
    assert fields_match("metadata.name==p,spec.nodeName=n1", bound)
    api = MemoryApi()
    _pod(api, "gated")
    _pod(api, "bound", gated=False, node="n1")
    _pod(api, "plain", quota=None)
    listed = api.list_objects(PODS, None, QUOTA_NAME_LABEL, "spec.nodeName=")
    assert [o["metadata"]["name"] for o in listed] == ["gated"]


def test_kube_api_sends_the_field_selector(served: tuple[KubeApi, Seen]) -> None:  # noqa: F811
    api, seen = served
    api.list_objects(PODS, None, QUOTA_NAME_LABEL, "spec.nodeName=")
    [request] = seen
    query = parse_qs(urlsplit(request["path"]).query, keep_blank_values=True)
    assert query["labelSelector"] == [QUOTA_NAME_LABEL]
    assert query["fieldSelector"] == ["spec.nodeName="]
