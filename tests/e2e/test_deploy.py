"""deploy/ on the real API server: it applies cleanly, and its RBAC is enough and no more.

The controller is run with the ServiceAccount's own token, so every API call the controller
makes in this test is authorised by deploy/rbac.yaml alone.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.scheduler.gates.names import GATE_NAME, OPT_IN_ANNOTATION
from tests.e2e import deployed, kq
from tests.e2e.deployed import SA
from tests.e2e.running_controller import RunningController
from tests.e2e.test_scheduler_binding import make_node

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_webhooks_left(kubectl: Any) -> Iterator[None]:
    yield
    deployed.remove_webhooks(kubectl)
    # the shipped APIService names a Service no process here backs: gone, or every client's
    # discovery of the other tests would report the group unavailable
    deployed.remove_apiservices(kubectl)


def test_deploy_applies_with_kustomize(kubectl: Any) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    deployment = kq.get(kubectl, "deployment", "koordqueue-controller", "koord-queue")
    assert deployment is not None
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][0] == "run"
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == "koordqueue"
    assert kq.get(kubectl, "clusterrolebinding", "koordqueue-controller") is not None


def _install_crd(kubectl: Any, path: Path) -> None:
    """`kubectl auth can-i` needs the kind served to resolve `plural.group` (else it answers
    "no" whatever the rules say): a CRD deploy/ does not install is installed here."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    crd = yaml.safe_load(path.read_text())
    name = f"crd/{crd['metadata']['name']}"
    kubectl("wait", "--for=condition=Established", "--timeout=60s", name)
    plural = f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
    kq.wait_for(lambda: kubectl("get", plural, "-A", check=False).returncode == 0, what=plural)


def test_service_account_may_do_exactly_what_the_controller_needs(kubectl: Any) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    _install_crd(kubectl, ROOT / "tests/crds/integrations/workload.codeflare.dev_appwrappers.yaml")
    allowed = [
        ("watch", "elasticquotas.scheduling.sigs.k8s.io"),
        ("patch", "elasticquotas.scheduling.sigs.k8s.io/status"),
        ("patch", "queues.scheduling.x-k8s.io"),
        ("patch", "queues.scheduling.x-k8s.io/status"),
        ("create", "queueunits.scheduling.x-k8s.io"),
        ("patch", "queueunits.scheduling.x-k8s.io/status"),
        ("patch", "jobs.batch"),
        ("create", "events"),
        ("watch", "priorityclasses.scheduling.k8s.io"),
        ("patch", "podgroups.scheduling.volcano.sh"),
        ("patch", "appwrappers.workload.codeflare.dev"),
        ("watch", "tfjobs.kubeflow.org"),
        ("patch", "tfjobs.kubeflow.org/status"),
        ("patch", "rayjobs.ray.io"),
        ("watch", "rayclusters.ray.io"),
        ("patch", "sparkapplications.sparkoperator.k8s.io"),
        ("patch", "workflows.argoproj.io"),
        ("watch", "xgboostjobs.kubeflow.org"),
        ("patch", "paddlejobs.kubeflow.org/status"),
        ("patch", "jaxjobs.kubeflow.org"),
        ("watch", "hypernodes.topology.volcano.sh"),
        ("watch", "numatopologies.nodeinfo.volcano.sh"),
        ("patch", "trainjobs.trainer.kubeflow.org"),
        ("get", "clustertrainingruntimes.trainer.kubeflow.org"),
        ("get", "trainingruntimes.trainer.kubeflow.org"),
    ]
    refused = [
        ("update", "elasticquotas.scheduling.sigs.k8s.io"),
        ("delete", "jobs.batch"),
        ("create", "jobs.batch"),
        ("get", "secrets"),
        ("create", "pods"),
        ("create", "priorityclasses.scheduling.k8s.io"),
        ("create", "appwrappers.workload.codeflare.dev"),
        ("delete", "appwrappers.workload.codeflare.dev"),
        ("create", "tfjobs.kubeflow.org"),
        ("delete", "rayclusters.ray.io"),
        ("patch", "rayjobs.ray.io/status"),
        ("update", "sparkapplications.sparkoperator.k8s.io"),
        ("delete", "workflows.argoproj.io"),
        ("create", "xgboostjobs.kubeflow.org"),
        ("delete", "jaxjobs.kubeflow.org"),
        ("create", "hypernodes.topology.volcano.sh"),
        ("create", "numatopologies.nodeinfo.volcano.sh"),
        ("create", "trainjobs.trainer.kubeflow.org"),
        ("patch", "trainjobs.trainer.kubeflow.org/status"),
        ("list", "clustertrainingruntimes.trainer.kubeflow.org"),
        ("patch", "trainingruntimes.trainer.kubeflow.org"),
    ]
    def can_i(verb: str, resource: str) -> str:
        """The API server's RBAC answer for `plural.group[/subresource]`, asked with a
        SubjectAccessReview: `kubectl auth can-i` answers "no" for a kind whose CRD is not
        installed (discovery fails before RBAC is asked), and reads `plural/sub` as an
        object's name."""
        kind, _, sub = resource.partition("/")
        plural, _, group = kind.partition(".")
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": SA,
                "resourceAttributes": {
                    "verb": verb, "group": group, "resource": plural, "subresource": sub},
            },
        }
        answer = json.loads(
            kubectl("create", "-o", "json", "-f", "-", input=json.dumps(review)).stdout)
        return "yes" if answer["status"].get("allowed") else "no"

    for verb, resource in allowed:
        assert can_i(verb, resource) == "yes", (verb, resource)
    for verb in ("get", "create", "update"):  # leader election, in its own namespace only
        lease = ["leases.coordination.k8s.io", "--as", SA]
        assert kubectl("auth", "can-i", verb, *lease, "-n", "koord-queue").stdout.strip() == "yes"
        assert kubectl("auth", "can-i", verb, *lease, "-n", "default",
                       check=False).stdout.strip() == "no"
    for verb, resource in refused:
        assert can_i(verb, resource) == "no", (verb, resource)


def test_controller_runs_with_the_service_account_token(
    kubectl: Any, kubeconfig: Path, tmp_path: Path
) -> None:
    kubectl("apply", "-k", str(ROOT / "deploy"))
    sa_config = deployed.sa_kubeconfig(kubectl, kubeconfig, tmp_path / "sa.kubeconfig")
    ns = kq.namespace(kubectl, kq.unique("rbac"))
    quota = kq.unique("rbac")
    pc = kq.unique("rbac-pc")
    kubectl.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": pc},
            "value": 3,
        }
    )
    with RunningController(sa_config, leader_elect=True):
        lease = kq.get(kubectl, "lease", "koord-queue", "koord-queue")
        assert lease is not None and lease["spec"]["holderIdentity"]  # RBAC covers the Lease
        kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
        kq.wait_for(
            lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue"),
            what="queue",
        )
        kubectl.apply(kq.job("a", ns, quota, cpu="1", priority_class=pc))
        kubectl.apply(kq.job("b", ns, quota, cpu="1"))
        kq.wait_for(lambda: kq.phase(kubectl, ns, "a") == "Dequeued", what="a admitted")
        kq.wait_for(lambda: (kq.get(kubectl, "job", "a", ns) or {})["spec"].get("suspend") is False)
        unit = kq.get(kubectl, "queueunits.scheduling.x-k8s.io", "a", ns)
        assert unit is not None and unit["spec"]["priority"] == 3
        ev = kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "FailedScheduling"), what="event")
        assert ev[0]["message"] == f"limited quotaName:{quota}, limited resKey:cpu,"
        kubectl("delete", "job", "a", "-n", ns)
        kq.wait_for(
            lambda: kq.phase(kubectl, ns, "b") == "Dequeued", what="b admitted after a is gone"
        )
        kubectl("delete", "elasticquotas.scheduling.sigs.k8s.io", quota, "-n", "default")
        kq.wait_for(
            lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue") is None
        )
    # the token really is the service account's (not admin): it cannot read secrets
    who = json.loads(
        base64.urlsafe_b64decode(
            yaml.safe_load(sa_config.read_text())["users"][0]["user"]["token"].split(".")[1] + "=="
        )
    )
    assert who["sub"] == SA


# Grants the run below does not exercise, each with the code that calls it. Everything else
# deploy/rbac.yaml grants must show up in the audit log of the ServiceAccount's requests.
NOT_EXERCISED_HERE: dict[deployed.Triple, str] = {
    # server-side apply of a missing Queue is one PATCH request, authorised as create too
    ("scheduling.x-k8s.io", "queues", "create"): "kube/queue_sync.py apply (SSA creates)",
    # the other job integrations are off in deploy/ (--integrations); tests/e2e/
    # test_integrations.py runs them, integration_reconciler.py calls these verbs
    **{
        (group, resource, verb): "--integrations off in deploy/ (test_integrations.py)"
        for group, plural in (("kubeflow.org", "pytorchjobs"), ("kubeflow.org", "mpijobs"),
                              ("jobset.x-k8s.io", "jobsets"))
        for resource, verbs in ((plural, ("get", "list", "watch", "patch")),
                                (f"{plural}/status", ("patch",)))
        for verb in verbs
    },
    # node load for usage / rescheduling: read only when the scheduler conf's `metrics`
    # section is of type prometheus_adaptor or metrics_server, and the test control plane
    # serves neither API (kube/scheduler/node_metrics.py; test_node_metrics.py)
    ("custom.metrics.k8s.io", "nodes/node_cpu_usage_avg", "get"): "metrics type adaptor",
    ("custom.metrics.k8s.io", "nodes/node_memory_usage_avg", "get"): "metrics type adaptor",
    ("metrics.k8s.io", "nodes", "list"): "metrics type metrics_server",
    # Kueue's further kinds (issue 26): test_integrations_kueue.py runs them
    **{
        (group, plural, verb): "--integrations off in deploy/ (test_integrations_kueue.py)"
        for group, plural in (("workload.codeflare.dev", "appwrappers"),)
        for verb in ("get", "list", "watch", "patch")
    },
    # Kubeflow Trainer's TrainJob (issue 26): test_integrations_trainjob.py runs it
    **{
        (group, plural, verb): "--integrations off in deploy/ (test_integrations_trainjob.py)"
        for group, plural, verbs in (
            ("trainer.kubeflow.org", "trainjobs", ("get", "list", "watch", "patch")),
            ("trainer.kubeflow.org", "trainingruntimes", ("get",)),
            ("trainer.kubeflow.org", "clustertrainingruntimes", ("get",)),
        )
        for verb in verbs
    },
    # Koord-Queue's further kinds (issue 26): test_koord_queue_kinds.py runs them
    **{
        (group, plural, verb): "--integrations off in deploy/ (test_koord_queue_kinds.py)"
        for group, plural in (("kubeflow.org", "tfjobs"), ("ray.io", "rayjobs"),
                              ("ray.io", "rayclusters"),
                              ("sparkoperator.k8s.io", "sparkapplications"),
                              ("argoproj.io", "workflows"))
        for verb in ("get", "list", "watch", "patch")
    },
    ("kubeflow.org", "tfjobs/status", "patch"):
        "--integrations off in deploy/ (test_koord_queue_kinds.py)",
    # Kueue's training-operator kinds (issue 26): test_koord_queue_kinds.py runs them too
    **{
        (group, resource, verb): "--integrations off in deploy/ (test_koord_queue_kinds.py)"
        for group, plural in (("kubeflow.org", "xgboostjobs"), ("kubeflow.org", "paddlejobs"),
                              ("kubeflow.org", "jaxjobs"))
        for resource, verbs in ((plural, ("get", "list", "watch", "patch")),
                                (f"{plural}/status", ("patch",)))
        for verb in verbs
    },
    ("apiextensions.k8s.io", "customresourcedefinitions", "get"):
        "integration_reconciler.py: is an integration's CRD installed (integrations off)",
    ("", "pods", "delete"): "preemption evicts by delete; the pod integration deletes a "
                            "preempted pod (test_scheduler_binding.py, test_integrations.py)",
    ("", "pods", "get"): "kube/gates/manager.py re-reads a pod whose gate patch conflicted",
    ("scheduling.x-k8s.io", "queueunits", "get"): "controller/writes.py re-reads a unit on a "
                                                  "conflict",
    ("batch", "jobs", "get"): "controller/jobs.py re-reads a Job on a conflict",
    ("", "events", "patch"): "events.py counts a repeat of an event it already wrote",
    ("scheduling.volcano.sh", "podgroups", "patch"): "PodGroup status on Volcano's own CRD "
    "(no status subresource): kube/scheduler/podgroup_status.py (test_volcano_crds.py)",
}


def test_deploy_as_shipped_serves_its_webhook_and_needs_no_more_rbac_than_it_grants(
    kubectl: Any, kubeconfig: Path, audit_log: Path, tmp_path: Path
) -> None:
    """Issue 33 part 2. deploy/ applied with kustomize, its certificate made by
    deploy/webhook-cert.sh; `koordqueue run` with the Deployment's own arguments and
    `koordqueue schedule` (another scheduler name), both as processes with the
    ServiceAccount's token: a quota, Jobs admitted and released, pods gated by the served
    webhook, un-gated, bound by either scheduler, one unschedulable, a PodGroup, a Job's
    label added later reaching its unit (queueunits patch: missing before), the visibility
    API through the shipped APIService. Then no
    403 in their logs or in the audit log, and every verb deploy/ grants was asked for
    (or is listed above with the code that calls it). With the old ClusterRole (CRDs: get
    and list only) kopf's CRD watch was refused: `Forbidden` lines in the log and 403s in
    the audit log made this test fail."""
    audit_start = deployed.audit_offset(audit_log)  # (what this test's processes asked)
    served = deployed.apply_deploy(kubectl, tmp_path)
    sa_config = deployed.sa_kubeconfig(kubectl, kubeconfig, tmp_path / "sa.kubeconfig")
    # the scheduler creates its default queue when missing: let it
    kubectl("delete", "queues.scheduling.volcano.sh", "default", "--ignore-not-found")
    health, schedule_health = deployed.free_port(), deployed.free_port()
    visibility_port = deployed.free_port()
    run_args = deployed.with_flags(
        deployed.deployment_args(),
        kubeconfig=sa_config, metrics_port=deployed.free_port(), health_port=health,
        webhook_port=served.webhook_port, webhook_cert=served.certfile,
        webhook_key=served.keyfile, visibility_port=visibility_port,
        visibility_cert=served.certfile, visibility_key=served.keyfile,
        log_format="console", admission_period=0.2,
        schedule_period=0.2,
        # the opt-in the Deployment's comment describes: the webhook then gates pods
        feature_gates="SchedulingGatesQueueAdmission=true",
    )
    other = kq.unique("rbac-sched")
    schedule_args = [
        "schedule", f"--kubeconfig={sa_config}", f"--scheduler-name={other}",
        "--leader-elect=true", f"--metrics-port={deployed.free_port()}",
        f"--health-port={schedule_health}", "--log-format=console", "--schedule-period=0.2",
    ]
    node = kq.unique("rbac-node")
    here = {"kq-rbac-node": node}
    ns = kq.namespace(kubectl, kq.unique("rbac"))
    quota, pc = kq.unique("rbac"), kq.unique("rbac-pc")
    kubectl.apply({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": pc}, "value": 3})
    make_node(kubectl, node, "4", labels=here)
    try:
        with deployed.running(run_args, tmp_path / "run.log", health) as run, \
                deployed.running(schedule_args, tmp_path / "schedule.log", schedule_health) \
                as schedule:
            assert kq.wait_for(
                lambda: kq.get(kubectl, "queues.scheduling.volcano.sh", "default"),
                what="default scheduler queue created",
            )
            _admit_and_release(kubectl, ns, quota, pc)
            deployed.visibility_through_the_aggregator(kubectl, visibility_port, ns)
            _schedule(kubectl, ns, here, other)
            kubectl("delete", "elasticquotas.scheduling.sigs.k8s.io", quota, "-n", "default")
            kq.wait_for(
                lambda: kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, "koord-queue")
                is None, what="queue deleted with its quota",
            )
    finally:
        kubectl("delete", "node", node, "--ignore-not-found")
    assert run.forbidden_lines() == [], run.log[-3000:]
    assert schedule.forbidden_lines() == [], schedule.log[-3000:]
    used, refused = deployed.audited(audit_log, since=audit_start)
    assert refused == [], [(e["verb"], e.get("objectRef")) for e in refused]
    granted = deployed.granted()
    assert set(NOT_EXERCISED_HERE) <= granted, set(NOT_EXERCISED_HERE) - granted
    never_used = granted - used - set(NOT_EXERCISED_HERE)
    assert never_used == set(), f"deploy/rbac.yaml grants what nothing asked for: {never_used}"


def _admit_and_release(kubectl: Any, ns: str, quota: str, pc: str) -> None:
    kubectl.apply(kq.quota(quota, max_={"cpu": "1"}))
    kubectl.apply(kq.job("a", ns, quota, cpu="1", priority_class=pc))
    kubectl.apply(kq.job("b", ns, quota, cpu="1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "a") == "Dequeued", what="a admitted")
    kq.wait_for(lambda: (kq.get(kubectl, "job", "a", ns) or {})["spec"].get("suspend") is False,
                what="a resumed")
    kq.wait_for(lambda: kq.events_for(kubectl, ns, "b", "FailedScheduling"), what="b held")
    kubectl("delete", "job", "a", "-n", ns)
    kq.wait_for(lambda: kq.phase(kubectl, ns, "b") == "Dequeued", what="b admitted after a")
    kq.wait_for(lambda: kq.get(kubectl, "queueunits.scheduling.x-k8s.io", "a", ns) is None,
                what="a's unit deleted with it")
    # a Job made held without the quota label, labelled later: the label reaches its unit
    kubectl.apply(kq.job("c", ns, None, cpu="1"))
    kq.wait_for(lambda: kq.get(kubectl, "queueunits.scheduling.x-k8s.io", "c", ns),
                what="c's unit")
    kubectl("label", "job", "c", "-n", ns, f"{QUOTA_NAME_LABEL}={quota}")
    kq.wait_for(lambda: ((kq.get(kubectl, "queueunits.scheduling.x-k8s.io", "c", ns) or {})
                         ["metadata"].get("labels") or {}).get(QUOTA_NAME_LABEL) == quota,
                what="c's label on its unit")


def _schedule(kubectl: Any, ns: str, here: dict[str, str], other: str) -> None:
    def pod(name: str, cpu: str, scheduler: str = "volcano", **notes: str) -> dict[str, Any]:
        created: dict[str, Any] = json.loads(kubectl(
            "create", "-o", "json", "-f", "-", input=json.dumps({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": ns, "annotations": notes},
                "spec": {"schedulerName": scheduler, "nodeSelector": here, "containers": [
                    {"name": "main", "image": "busybox",
                     "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
            })).stdout)
        return created

    gated = pod("gated", "1", **{OPT_IN_ANNOTATION: "true"})
    assert [g["name"] for g in gated["spec"].get("schedulingGates", [])] == [GATE_NAME]
    kubectl.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                    "metadata": {"name": "pg", "namespace": ns},
                    "spec": {"minMember": 1, "queue": "default"}})
    pod("member", "1", **{"scheduling.k8s.io/group-name": "pg"})
    pod("theirs", "1", scheduler=other)
    pod("huge", "64")

    def node_of(name: str) -> str | None:
        return (kq.get(kubectl, "pod", name, ns) or {}).get("spec", {}).get("nodeName")

    for name in ("gated", "member", "theirs"):
        kq.wait_for(lambda n=name: node_of(n), what=f"pod {name} bound")

    def unschedulable() -> bool:
        conditions = ((kq.get(kubectl, "pod", "huge", ns) or {}).get("status") or {}).get(
            "conditions") or []
        return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                   for c in conditions)

    kq.wait_for(unschedulable, what="huge pod marked unschedulable")
    kq.wait_for(lambda: ((kq.get(kubectl, "podgroups.scheduling.volcano.sh", "pg", ns) or {})
                         .get("status") or {}).get("phase"), what="PodGroup phase written")
