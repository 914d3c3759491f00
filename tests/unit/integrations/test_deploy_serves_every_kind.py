"""deploy/ names every integration's kind: RBAC to watch and hold it, and the workload
webhook's rule to hold it at creation (issue 26; the webhook is issue 33's).

A kind added to INTEGRATIONS without them is served by `--integrations` but, as deployed,
either refused (403 on its watch) or never held at creation (it runs outside its quota with
only a Warning). Without the rules added for TFJob, RayJob, RayCluster, SparkApplication and
Workflow this test failed, naming them.
"""

from __future__ import annotations

from typing import Any

import yaml

from koordqueue.domain.integrations import INTEGRATIONS
from koordqueue.domain.integrations.pod import Pod
from koordqueue.domain.integrations.pod_parents import POD_PARENTS
from tests.unit.cli.helpers import ROOT

DEPLOY = ROOT / "deploy"
WORKLOAD_WEBHOOK = "koordqueue-workloads"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text("utf-8")) if d]


def _kinds() -> set[tuple[str, str]]:
    """(group, plural) of every integration's workload; Pod has its own webhook and rules."""
    return {
        (i.workload.group, i.workload.plural)
        for i in INTEGRATIONS.values()
        if not isinstance(i, Pod)
    }


def test_the_controller_may_watch_and_hold_every_kind() -> None:
    granted: set[tuple[str, str, str]] = set()
    for doc in _docs("rbac.yaml"):
        if doc["kind"] == "ClusterRole":
            for rule in doc["rules"]:
                granted |= {
                    (g, r, v)
                    for g in rule["apiGroups"]
                    for r in rule["resources"]
                    for v in rule["verbs"]
                }
    missing = {
        (group, plural, verb)
        for group, plural in _kinds()
        for verb in ("get", "list", "watch", "patch")
        if (group, plural, verb) not in granted
    }
    assert missing == set(), f"deploy/rbac.yaml: add these rows: {sorted(missing)}"


def test_the_workload_webhook_holds_every_kind_at_creation() -> None:
    (config,) = [
        d for d in _docs("webhook.yaml")
        if d["kind"] == "MutatingWebhookConfiguration"
        and d["metadata"]["name"] == WORKLOAD_WEBHOOK
    ]
    covered: set[tuple[str, str]] = set()
    for hook in config["webhooks"]:
        for rule in hook["rules"]:
            assert rule["operations"] == ["CREATE"], rule
            covered |= {(g, r) for g in rule["apiGroups"] for r in rule["resources"]}
    missing = _kinds() - covered
    assert missing == set(), f"deploy/webhook.yaml {WORKLOAD_WEBHOOK}: add rules: {missing}"


def test_the_pod_parent_webhook_marks_every_pod_parent() -> None:
    """Without the LeaderWorkerSet rule, a LeaderWorkerSet is never marked as deployed: its
    pods are not queued (this failed naming it before the rule was added)."""
    (config,) = [
        d for d in _docs("webhook.yaml")
        if d["kind"] == "MutatingWebhookConfiguration"
        and d["metadata"]["name"] == "koordqueue-pod-parents"
    ]
    covered = {
        (g, r, v)
        for hook in config["webhooks"]
        for rule in hook["rules"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["apiVersions"]
    }
    wanted = {
        (p.workload.group, p.workload.plural, p.workload.version) for p in POD_PARENTS.values()
    }
    assert wanted - covered == set()
