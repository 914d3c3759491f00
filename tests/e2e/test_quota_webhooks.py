"""Bad quotas refused at `kubectl apply`, labelled Jobs held at creation (issue 33 parts 4, 5, 7).

The controller runs in-process with `--webhook-port` and serves every webhook on that one port
over TLS (a self-signed certificate this test makes, which is its own CA, as
tests/e2e/test_pod_gate_webhook.py does). The real kube-apiserver calls it through a
ValidatingWebhookConfiguration for ElasticQuotas and a MutatingWebhookConfiguration for Jobs,
both limited to this module's namespaces and with failurePolicy Fail (a broken webhook must
fail the test, not be skipped). What an operator sees with kubectl: the denied applies and
their messages, the warnings kubectl prints, the conditions and events that
`kubectl describe elasticquota` shows, the Job stored suspended and then admitted.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from koordqueue.domain.names import QUOTA_IS_PARENT_LABEL, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.kube.gates.certs import self_signed
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.test_gates_admission import free_port

EQ = "elasticquotas.scheduling.sigs.k8s.io"
SCOPE_LABEL = "kq-quota-webhook-e2e"


@dataclass
class Plane:
    kubectl: Any
    scope: str
    validating: str
    mutating: str
    port: int
    ca: bytes

    def namespace(self) -> str:
        name = kq.unique("qwh")
        self.kubectl.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {SCOPE_LABEL: self.scope}},
            }
        )
        return name

    def register_validating(self) -> None:
        self.kubectl.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": self.validating},
                "webhooks": [
                    {
                        "name": "elasticquotas.koordqueue.io",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                        "timeoutSeconds": 5,
                        "rules": [
                            {
                                "apiGroups": ["scheduling.sigs.k8s.io"],
                                "apiVersions": ["v1alpha1"],
                                "resources": ["elasticquotas"],
                                "operations": ["CREATE", "UPDATE", "DELETE"],
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {SCOPE_LABEL: self.scope}},
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{self.port}/validate-elasticquotas",
                            "caBundle": base64.b64encode(self.ca).decode(),
                        },
                    }
                ],
            }
        )

    def unregister_validating(self) -> None:
        self.kubectl("delete", "validatingwebhookconfiguration", self.validating, check=False)


@pytest.fixture(scope="module")
def plane(
    kubectl: Any, kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plane]:
    scope = kq.unique("qwh")
    cert = self_signed(tmp_path_factory.mktemp("qwh-tls"), ["127.0.0.1"])
    port = free_port()
    p = Plane(kubectl, scope, f"kq-e2e-{scope}-v", f"kq-e2e-{scope}-m", port, cert.ca_pem)
    with RunningController(
        kubeconfig,
        webhook_port=port,
        webhook_cert=str(cert.certfile),
        webhook_key=str(cert.keyfile),
    ):
        p.register_validating()
        kubectl.apply(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": p.mutating},
                "webhooks": [
                    {
                        "name": "workloads.koordqueue.io",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Fail",
                        "timeoutSeconds": 5,
                        "rules": [
                            {
                                "apiGroups": ["batch"],
                                "apiVersions": ["v1"],
                                "resources": ["jobs"],
                                "operations": ["CREATE"],
                            }
                        ],
                        "namespaceSelector": {"matchLabels": {SCOPE_LABEL: scope}},
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/mutate-workloads",
                            "caBundle": base64.b64encode(cert.ca_pem).decode(),
                        },
                    }
                ],
            }
        )
        try:
            yield p
        finally:
            p.unregister_validating()
            kubectl("delete", "mutatingwebhookconfiguration", p.mutating, check=False)


def refused(kubectl: Any, manifest: dict[str, Any]) -> str:
    proc = kubectl.apply(manifest, check=False)
    assert proc.returncode != 0, f"applied: {proc.stdout}"
    return str(proc.stderr)


def condition(kubectl: Any, ns: str, name: str, kind: str) -> dict[str, Any] | None:
    obj = kq.get(kubectl, EQ, name, ns) or {}
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def test_the_crd_refuses_a_negative_or_unparseable_quantity_in_words(plane: Plane) -> None:
    ns = plane.namespace()
    quota = kq.quota(kq.unique("cel"), ns, max_={"cpu": "-1", "memory": "lots"})
    err = refused(plane.kubectl, quota)
    assert 'spec.max[cpu]: Invalid value: "-1": must not be negative' in err, err
    assert "spec.max[memory]" in err and "must be a Kubernetes quantity" in err, err
    assert "should match" not in err  # never a regular expression


def test_the_webhook_denies_every_problem_at_once_with_its_field(plane: Plane) -> None:
    ns = plane.namespace()
    name = kq.unique("minmax")
    err = refused(
        plane.kubectl, kq.quota(name, ns, max_={"cpu": "2"}, min_={"cpu": "3", "memory": "1Gi"})
    )
    denial = 'admission webhook "elasticquotas.koordqueue.io" denied the request: '
    assert f'{denial}ElasticQuota "{name}" is invalid' in err, err
    assert "* spec.min[cpu]: min 3 is above max 2" in err, err
    assert "* spec.min[memory]: memory has a min but no max" in err, err
    assert kq.get(plane.kubectl, EQ, name, ns) is None  # nothing was stored


def test_a_name_used_in_another_namespace_is_denied(plane: Plane) -> None:
    name = kq.unique("dup")
    first, second = plane.namespace(), plane.namespace()
    plane.kubectl.apply(kq.quota(name, first))
    err = refused(plane.kubectl, kq.quota(name, second))
    assert f"an ElasticQuota named {name} already exists in namespace {first}" in err, err
    assert "cluster-wide" in err


def test_a_parent_edge_closing_a_cycle_and_is_parent_off_under_children_are_denied(
    plane: Plane,
) -> None:
    ns = plane.namespace()
    top, child = kq.unique("top"), kq.unique("child")
    plane.kubectl.apply(kq.quota(top, ns, labels={QUOTA_IS_PARENT_LABEL: "true"}))
    plane.kubectl.apply(kq.quota(child, ns, parent=top))
    err = refused(
        plane.kubectl, kq.quota(top, ns, parent=child, labels={QUOTA_IS_PARENT_LABEL: "true"})
    )
    assert f"parent {child} closes a cycle ({top} -> {child} -> {top})" in err, err
    err = refused(plane.kubectl, kq.quota(top, ns))  # is-parent label dropped
    assert f"is-parent cannot be turned off while the quota has children ({child})" in err, err


def test_apply_order_problems_are_warnings_so_a_directory_applies_in_any_order(
    plane: Plane,
) -> None:
    ns = plane.namespace()
    parent, child = kq.unique("later"), kq.unique("early")
    proc = plane.kubectl.apply(
        kq.quota(child, ns, parent=parent, max_={"cpu": "2"}, min_={"cpu": "2"})
    )
    assert proc.returncode == 0
    assert (
        f"Warning: metadata.labels[{QUOTA_PARENT_LABEL}]: parent quota {parent} does not "
        "exist (yet)"
    ) in proc.stderr, proc.stderr
    proc = plane.kubectl.apply(
        kq.quota(parent, ns, max_={"cpu": "4"}, min_={"cpu": "1"}, policy="Round")
    )
    assert proc.returncode == 0
    for text in (
        f"has children ({child}) but not the label {QUOTA_IS_PARENT_LABEL}",
        "the children's min adds up to more than this quota's min: cpu 2 > 1",
        "queue policy 'Round' is not served",
    ):
        assert text in proc.stderr, proc.stderr
    # the child's parent is there now: Active (the condition the controller writes)
    kq.wait_for(
        lambda: (condition(plane.kubectl, ns, child, "Active") or {}).get("status") == "True",
        what="child active once its parent exists",
    )


def test_describe_elasticquota_says_why_a_quota_admits_nothing(plane: Plane) -> None:
    ns = plane.namespace()
    name = kq.unique("round")
    plane.kubectl.apply(kq.quota(name, ns, policy="Round"))  # allowed, with a warning
    active = kq.wait_for(
        lambda: (
            (c := condition(plane.kubectl, ns, name, "Active")) and c["status"] == "False" and c
        ),
        what="Active=False",
    )
    assert active["reason"] == "AddQueueFail"
    described = kq.wait_for(
        lambda: (
            (out := plane.kubectl("describe", EQ, name, "-n", ns).stdout)
            and "AddQueueFail" in out.split("Events:")[-1]
            and out
        ),
        what="event in describe",
    )
    events = described.split("Events:")[-1]
    assert "Warning" in events and "'Round'" in events
    conditions = described.split("Conditions:")[-1].split("Events:")[0]
    assert "Active" in conditions and "AddQueueFail" in conditions


def test_with_the_webhook_down_the_controller_refuses_the_edit_and_keeps_the_last_valid(
    plane: Plane, kubeconfig: Path
) -> None:
    ns = plane.namespace()
    top, child = kq.unique("keep-top"), kq.unique("keep-child")
    plane.kubectl.apply(
        kq.quota(
            top, ns, max_={"cpu": "4", "memory": "8Gi"}, labels={QUOTA_IS_PARENT_LABEL: "true"}
        )
    )
    plane.kubectl.apply(kq.quota(child, ns, parent=top, max_={"cpu": "4", "memory": "8Gi"}))
    plane.kubectl.apply(kq.job("held", ns, child, cpu="1", suspend=True))
    kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "held") == "Dequeued", what="admitted")
    plane.unregister_validating()  # the webhook is down (failurePolicy Ignore would do this)
    try:
        plane.kubectl.apply(
            kq.quota(top, ns, parent=child, labels={QUOTA_IS_PARENT_LABEL: "true"})
        )  # accepted
        valid = kq.wait_for(
            lambda: (
                (c := condition(plane.kubectl, ns, top, "Valid")) and c["status"] == "False" and c
            ),
            what="Valid=False",
        )
        assert valid["reason"] == "QuotaCycle"
        assert "the last valid definition stays in force" in valid["message"]
        events = kq.wait_for(
            lambda: kq.events_for(plane.kubectl, ns, top, "QuotaCycle"), what="QuotaCycle event"
        )
        assert events[0]["type"] == "Warning"
        # the old parent stays in force: a second Job fits the chain and is admitted, and the
        # admitted one was not undone
        plane.kubectl.apply(kq.job("next", ns, child, cpu="1", suspend=True))
        kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "next") == "Dequeued", what="next")
        assert kq.phase(plane.kubectl, ns, "held") == "Dequeued"
        described = plane.kubectl("describe", EQ, top, "-n", ns).stdout
        assert "QuotaCycle" in described
        # an invalid edit (min above max, min without max) is refused the same way
        plane.kubectl.apply(
            kq.quota(child, ns, parent=top, max_={"cpu": "1"}, min_={"cpu": "2", "gpu": "1"})
        )
        invalid = kq.wait_for(
            lambda: (
                (c := condition(plane.kubectl, ns, child, "Valid")) and c["status"] == "False" and c
            ),
            what="child Valid=False",
        )
        assert invalid["reason"] == "InvalidQuota"
        for text in ("spec.min[cpu]: min 2 is above max 1", "spec.min[gpu]: gpu has a min"):
            assert text in invalid["message"], invalid
        described = plane.kubectl("describe", EQ, child, "-n", ns).stdout
        assert "InvalidQuota" in described.split("Events:")[-1], described
        # the old max (4) is still the one in force: a third 1-cpu Job is admitted
        plane.kubectl.apply(kq.job("third", ns, child, cpu="1", suspend=True))
        kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "third") == "Dequeued", what="third")
        assert [kq.phase(plane.kubectl, ns, j) for j in ("held", "next")] == ["Dequeued"] * 2
    finally:
        plane.register_validating()


def test_a_labelled_job_created_running_is_stored_suspended_and_then_admitted(
    plane: Plane,
) -> None:
    ns = plane.namespace()
    quota = kq.unique("held")
    plane.kubectl.apply(kq.quota(quota, ns))
    manifest = kq.job("train", ns, quota, suspend=False)
    created = json.loads(
        plane.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(manifest)).stdout
    )
    assert created["spec"]["suspend"] is True  # held by the webhook at creation
    kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "train") == "Dequeued", what="admitted")
    kq.wait_for(
        lambda: (
            (kq.get(plane.kubectl, "job", "train", ns) or {}).get("spec", {}).get("suspend")
            is False
        ),
        what="resumed",
    )
    events = kq.wait_for(
        lambda: kq.events_for(plane.kubectl, ns, "train", "Admitted"), what="Admitted event"
    )
    assert quota in events[0]["message"]


def test_a_job_labelled_after_it_was_made_reaches_its_unit(plane: Plane) -> None:
    ns = plane.namespace()
    quota = kq.unique("late")
    plane.kubectl.apply(kq.quota(quota, ns))
    plane.kubectl.apply(kq.job("late", ns, None, suspend=True))  # no quota label yet
    kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "late") == "Enqueued", what="unit")
    plane.kubectl("label", "job", "late", "-n", ns, f"{QUOTA_NAME_LABEL}={quota}")
    kq.wait_for(lambda: kq.phase(plane.kubectl, ns, "late") == "Dequeued", what="admitted")
    unit = kq.get(plane.kubectl, "queueunits.scheduling.x-k8s.io", "late", ns) or {}
    assert unit["metadata"]["labels"][QUOTA_NAME_LABEL] == quota


def test_without_the_webhook_a_labelled_job_created_running_gets_a_warning(
    plane: Plane,
) -> None:
    ns = kq.namespace(plane.kubectl, kq.unique("nowebhook"))  # outside the webhook's scope
    quota = kq.unique("free")
    plane.kubectl.apply(kq.quota(quota, ns))
    plane.kubectl.apply(kq.job("free", ns, quota, suspend=False))
    events = kq.wait_for(
        lambda: kq.events_for(plane.kubectl, ns, "free", "RunsOutsideQuota"), what="warning"
    )
    assert events[0]["type"] == "Warning"
    assert (
        f"names quota {quota} but was created running: it runs outside quota"
        in (events[0]["message"])
    )
    assert kq.get(plane.kubectl, "queueunits.scheduling.x-k8s.io", "free", ns) is None
