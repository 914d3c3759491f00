"""Issue 27 part 1: the visibility API through the real kube-apiserver's aggregation layer.

The controller serves `visibility.koord-queue.io` over HTTPS; an APIService registers it
(caBundle: the CA of the controller's certificate, whose name is the Service's); the API
server proxies `kubectl get --raw` to it with its front-proxy client certificate and the
caller's identity in headers, which the controller trusts only on that connection and
authorizes with SubjectAccessReviews. In the test plane the Service is an ExternalName for
127.0.0.1, where the controller listens (no kube-proxy on loopback).
"""

from __future__ import annotations

import gzip
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from koordqueue.domain import names
from koordqueue.domain.pending import pending_units
from koordqueue.kube.api import KubeApi, load_api_client
from tests.controlplane.harness import ControlPlane
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.visibility_served import BASE, queue_unit, serving

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def aggregated(kubectl: Any, kubeconfig: Path,
               tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningController]:
    with serving(kubectl, kubeconfig, tmp_path_factory.mktemp("visibility")) as rc:
        yield rc


def _raw(kubectl: Any, path: str, *args: str) -> Any:
    return json.loads(kubectl("get", "--raw", path, *args).stdout)


def test_pending_units_through_the_api_server_in_the_controllers_round_order(
    kubectl: Any, aggregated: RunningController
) -> None:
    ns = kq.namespace(kubectl, kq.unique("vis"))
    parent, quota = kq.unique("vis-parent"), kq.unique("vis")
    kubectl.apply(kq.quota(parent, max_={"cpu": "1"}, labels={
        names.QUOTA_IS_PARENT_LABEL: "true"}))
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}, parent=parent))
    kubectl.apply(queue_unit("runs", ns, quota, "1", 0))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "runs") == "Dequeued", what="first admitted")
    for name, priority in (("low", 1), ("high", 7), ("mid", 4)):
        kubectl.apply(queue_unit(name, ns, quota, "1", priority))

    def answer() -> dict[str, Any] | None:
        body: dict[str, Any] = _raw(kubectl, f"{BASE}/queues/{quota}/queueunits")
        return body if len(body["items"]) == 3 and all(i["message"] for i in body["items"]) \
            else None

    body = kq.wait_for(answer, what="three pending units served")
    rows = [(i["metadata"]["name"], i["positionInQueue"], i["reason"]) for i in body["items"]]
    assert rows == [("high", 1, "QuotaExceeded"), ("mid", 2, "QuotaExceeded"),
                    ("low", 3, "QuotaExceeded")]
    assert body["items"][0]["request"] == {"cpu": "1"} and body["items"][0]["priority"] == 7
    assert body["items"][0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"

    # the controller's own round (the same record the API read) says the same
    controller = aggregated.controller
    assert controller is not None

    def same_as_the_round() -> bool:
        last = controller.state.published.last()
        assert last is not None
        ours = [(p.unit.name, p.position_in_queue, p.reason.value)
                for p in pending_units(last.result) if p.queue == quota]
        served = _raw(kubectl, f"{BASE}/queues/{quota}/queueunits")
        theirs = [(i["metadata"]["name"], i["positionInQueue"], i["reason"])
                  for i in served["items"]]
        return ours == theirs == rows

    kq.wait_for(same_as_the_round, what="the API's answer equals the controller's round")

    # the parent quota counts its child's units; options page and filter them
    in_parent = _raw(kubectl, f"{BASE}/elasticquotas/{parent}/queueunits")
    assert [(i["metadata"]["name"], i["positionInQuota"]) for i in in_parent["items"]] == [
        ("high", 1), ("mid", 2), ("low", 3)]
    page = _raw(kubectl, f"{BASE}/pendingunits?namespace={ns}&offset=1&limit=1")
    assert (page["total"], [i["metadata"]["name"] for i in page["items"]]) == (3, ["mid"])
    assert _raw(kubectl, f"{BASE}/pendingunits?namespace={ns}&phase=Running")["items"] == []


def test_callers_need_the_viewer_role(kubectl: Any, aggregated: RunningController) -> None:
    """No role, 403 (the API server authorizes before it proxies; the controller authorizes
    the identity the aggregator hands it again, by SubjectAccessReview: unit tests cover its
    own refusal); deploy/'s viewer ClusterRole bound, allowed through both."""
    user = kq.unique("viewer")
    denied = kubectl("get", "--raw", f"{BASE}/pendingunits", "--as", user, check=False)
    assert denied.returncode != 0
    assert f'User "{user}" cannot list resource "pendingunits"' in denied.stderr
    docs = yaml.safe_load_all((ROOT / "deploy" / "visibility.yaml").read_text())
    role = next(d for d in docs if d["metadata"]["name"] == "koordqueue-visibility-viewer")
    kubectl.apply(role)
    binding = kq.unique("viewer-binding")
    kubectl("create", "clusterrolebinding", binding,
            f"--clusterrole={role['metadata']['name']}", f"--user={user}")
    try:
        kq.wait_for(
            lambda: kubectl("get", "--raw", f"{BASE}/pendingunits?limit=1", "--as", user,
                            check=False).returncode == 0,
            timeout=20.0, what="viewer allowed",
        )
    finally:
        kubectl("delete", "clusterrolebinding", binding, "--ignore-not-found", check=False)


def test_a_long_answer_goes_gzipped_to_a_client_that_asks_and_reads_the_same(
    kubectl: Any, aggregated: RunningController, control_plane: ControlPlane, kubeconfig: Path
) -> None:
    """60 pending units (~20 KB of JSON): through the aggregator, a client sending
    Accept-Encoding: gzip (as kubectl and client-go do) gets them gzip-encoded, and kubectl,
    KubeApi (libcurl) and a plain gunzip all read the same items."""
    ns = kq.namespace(kubectl, kq.unique("vis-gz"))
    quota = kq.unique("vis-gz")
    kubectl.apply(kq.quota(quota, max_={"cpu": "0"}))
    kubectl.apply({"apiVersion": "v1", "kind": "List", "items": [
        queue_unit(f"u{i:02d}", ns, quota, "1", i % 5) for i in range(60)]})
    path = f"{BASE}/queues/{quota}/queueunits"
    kq.wait_for(lambda: len(_raw(kubectl, path)["items"]) == 60, what="60 pending units")
    split = urlsplit(control_plane.server)
    conn = http.client.HTTPSConnection(split.hostname, split.port,
                                       context=control_plane.admin_context())
    conn.request("GET", path, headers={"Accept-Encoding": "gzip"})
    response = conn.getresponse()
    raw = response.read()
    conn.close()
    assert response.status == 200, raw[:300]
    assert response.getheader("Content-Encoding") == "gzip"
    decoded = json.loads(gzip.decompress(raw))
    assert len(raw) * 5 < len(json.dumps(decoded))  # (JSON of 60 alike units: ~10x smaller)
    items = decoded["items"]
    assert [i["positionInQueue"] for i in items] == list(range(1, 61))
    assert [i["priority"] for i in items] == sorted((i % 5 for i in range(60)), reverse=True)
    names_in = [i["metadata"]["name"] for i in items]
    assert [i["metadata"]["name"] for i in _raw(kubectl, path)["items"]] == names_in
    api = KubeApi(load_api_client(str(kubeconfig)))
    assert [i["metadata"]["name"] for i in api.request("GET", path, gzip=True)["items"]] \
        == names_in
