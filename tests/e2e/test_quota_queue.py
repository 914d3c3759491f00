"""SPEC 2.2 / 2.3 on the real API server: every ElasticQuota owns one Queue in koord-queue."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from koordqueue.domain.names import QUOTA_PARENT_LABEL
from tests.e2e import kq
from tests.e2e.running_controller import RunningController

Q = "queues.scheduling.x-k8s.io"
EQ = "elasticquotas.scheduling.sigs.k8s.io"


def _queue(kubectl: Any, name: str) -> dict[str, Any] | None:
    return kq.get(kubectl, Q, name, "koord-queue")


def test_quota_create_makes_queue_with_derived_fields(
    kubectl: Any, controller: RunningController
) -> None:
    name = kq.unique("derive")
    kubectl.apply(
        kq.quota(
            name,
            parent="org",
            policy="Block",
            annotations={
                "koord-queue/max-depth": "3",
                "other/x": "y",
                "koord-queue/queue-policy": "Intelligent",
            },
        )
    )
    queue = kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    assert queue["spec"] == {"priority": 1000, "queuePolicy": "Block"}
    assert queue["metadata"]["labels"][QUOTA_PARENT_LABEL] == "org"
    annotations = queue["metadata"].get("annotations", {})
    assert annotations.get("koord-queue/max-depth") == "3"
    assert "koord-queue/queue-policy" not in annotations
    assert "other/x" not in annotations
    listing = kubectl("get", Q, "-n", "koord-queue").stdout
    assert name in listing


def test_unknown_policy_label_falls_back_to_priority(
    kubectl: Any, controller: RunningController
) -> None:
    name = kq.unique("fallback")
    kubectl.apply(kq.quota(name, policy="Weird"))
    queue = kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    assert queue["spec"]["queuePolicy"] == "Priority"


def test_quota_delete_deletes_queue(kubectl: Any, controller: RunningController) -> None:
    name = kq.unique("gone")
    kubectl.apply(kq.quota(name))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue created")
    kubectl("delete", EQ, name, "-n", "default")
    kq.wait_for(lambda: _queue(kubectl, name) is None, what="queue deleted")


def _hand_edit_policy(kubectl: Any, queue: str, policy: str) -> None:
    """What an operator's `kubectl patch` of the Queue's spec.queuePolicy does."""
    patch = json.dumps({"spec": {"queuePolicy": policy}})
    kubectl("patch", Q, queue, "-n", "koord-queue", "--type=merge", "-p", patch)


def test_hand_edited_policy_is_reverted(kubectl: Any, controller: RunningController) -> None:
    name = kq.unique("revert")
    kubectl.apply(kq.quota(name, policy="Block"))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    _hand_edit_policy(kubectl, name, "Priority")
    kq.wait_for(
        lambda: (_queue(kubectl, name) or {}).get("spec", {}).get("queuePolicy") == "Block",
        what="policy reverted to Block",
    )


def test_foreign_annotation_on_queue_is_kept(kubectl: Any, controller: RunningController) -> None:
    name = kq.unique("foreign")
    kubectl.apply(kq.quota(name, annotations={"koord-queue/max-depth": "2"}))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    kubectl("annotate", Q, name, "-n", "koord-queue", "team.example.com/owner=alice")
    kubectl.apply(kq.quota(name, annotations={"koord-queue/max-depth": "5"}))

    def reconciled() -> dict[str, Any] | None:
        queue = _queue(kubectl, name) or {}
        ann = queue.get("metadata", {}).get("annotations", {})
        return queue if ann.get("koord-queue/max-depth") == "5" else None

    queue = kq.wait_for(reconciled, what="annotation synced")
    assert queue["metadata"]["annotations"]["team.example.com/owner"] == "alice"


def test_policy_label_change_reconciles(kubectl: Any, controller: RunningController) -> None:
    name = kq.unique("relabel")
    kubectl.apply(kq.quota(name, policy="Priority"))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    kubectl(
        "label", EQ, name, "-n", "default", "--overwrite", "koord-queue/queue-policy=Intelligent"
    )
    kq.wait_for(
        lambda: (_queue(kubectl, name) or {}).get("spec", {}).get("queuePolicy") == "Intelligent",
        what="policy Intelligent",
    )


def test_unregistered_policy_gets_add_queue_fail_event(
    kubectl: Any, controller: RunningController
) -> None:
    name = kq.unique("round")
    kubectl.apply(kq.quota(name, policy="Round"))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, "koord-queue", name, "AddQueueFail"),
        what="AddQueueFail event",
    )
    assert events[0]["type"] == "Warning"
    assert "Round" in events[0]["message"]
    # fixing the quota's label fixes the queue: it is served (a unit gets admitted)
    kubectl("label", EQ, name, "-n", "default", "--overwrite", "koord-queue/queue-policy=Priority")
    ns = kq.namespace(kubectl, kq.unique("ns-round"))
    kubectl.apply(kq.job("j1", ns, name))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "j1") == "Dequeued", what="unit admitted")


def test_queue_deleted_by_hand_is_recreated(kubectl: Any, controller: RunningController) -> None:
    name = kq.unique("recreate")
    kubectl.apply(kq.quota(name))
    first = kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    kubectl("delete", Q, name, "-n", "koord-queue")
    again = kq.wait_for(
        lambda: (
            (q := _queue(kubectl, name)) and q["metadata"]["uid"] != first["metadata"]["uid"] and q
        ),
        what="queue recreated",
    )
    assert again["spec"]["priority"] == 1000


def test_same_name_quotas_in_two_namespaces_share_one_queue(
    kubectl: Any, controller: RunningController
) -> None:
    """Names are cluster-wide (SPEC 2.1): one Queue, from the older copy, whatever the
    events; the DuplicateQuotaName event on the newer copy names the copy in force. (Before
    issue 33 the last reconciled copy won, and the copy in use flipped at each resync.)"""
    name = kq.unique("twin")
    ns_a = kq.namespace(kubectl, kq.unique("twin-a"))
    ns_b = kq.namespace(kubectl, kq.unique("twin-b"))
    kubectl.apply(kq.quota(name, namespace=ns_a, policy="Block"))
    kq.wait_for(lambda: (_queue(kubectl, name) or {}).get("spec", {}).get("queuePolicy") == "Block")
    kubectl.apply(kq.quota(name, namespace=ns_b, policy="Intelligent"))
    events = kq.wait_for(
        lambda: kq.events_for(kubectl, ns_b, name, "DuplicateQuotaName"), what="duplicate warning"
    )
    assert f"{ns_a}/{name} is in force" in events[0]["message"]
    queues = kubectl.json("get", Q, "-n", "koord-queue")["items"]
    assert sum(1 for q in queues if q["metadata"]["name"] == name) == 1
    assert (_queue(kubectl, name) or {})["spec"]["queuePolicy"] == "Block"
    # deleting the copy in force leaves the other in charge; the queue survives
    kubectl("delete", EQ, name, "-n", ns_a)
    kq.wait_for(
        lambda: (_queue(kubectl, name) or {}).get("spec", {}).get("queuePolicy")
        == "Intelligent",
        what="surviving quota re-applied",
    )


def test_startup_resync_fixes_queues_changed_while_down(kubectl: Any, kubeconfig: Path) -> None:
    name = kq.unique("resync")
    gone = kq.unique("orphan")
    with RunningController(kubeconfig):
        kubectl.apply(kq.quota(name, policy="Block"))
        kubectl.apply(kq.quota(gone))
        kq.wait_for(lambda: _queue(kubectl, name) and _queue(kubectl, gone), what="queues")
    # controller down: hand-edit one queue, delete the other quota
    _hand_edit_policy(kubectl, name, "Priority")
    kubectl("delete", EQ, gone, "-n", "default")
    assert _queue(kubectl, gone) is not None
    with RunningController(kubeconfig):
        assert (_queue(kubectl, name) or {})["spec"]["queuePolicy"] == "Block"
        kq.wait_for(lambda: _queue(kubectl, gone) is None, what="orphan queue deleted")


def test_operator_can_list_queues_by_short_name_and_category(
    kubectl: Any, controller: RunningController
) -> None:
    name = kq.unique("short")
    kubectl.apply(kq.quota(name))
    kq.wait_for(lambda: _queue(kubectl, name), what="queue")
    # `kubectl get queues` is Volcano's cluster-scoped Queue; ours answers to kq / the category
    assert name in kubectl("get", "kq", "-n", "koord-queue").stdout
    listing = kubectl("get", "koordqueue", "-A").stdout
    assert f"queue.scheduling.x-k8s.io/{name}" in listing
    assert f"elasticquota.scheduling.sigs.k8s.io/{name}" in listing
