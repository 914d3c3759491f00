"""`kubectl koordqueue`: commands, flags and outputs, against a recorded cluster."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.cli import plugin
from koordqueue.domain import names

ROOT = Path(__file__).resolve().parents[3]


def quota(name: str, parent: str | None = None, max_cpu: str = "4") -> dict[str, Any]:
    labels = {names.QUOTA_PARENT_LABEL: parent} if parent else {}
    return {"metadata": {"name": name, "namespace": "default", "labels": labels},
            "spec": {"max": {"cpu": max_cpu}, "min": {"cpu": "1"}}}


def queue(name: str, used: int, self_used: int, held: bool = False) -> dict[str, Any]:
    annotations = {
        names.QUEUE_USED_ANNOTATION: json.dumps({"cpu": used}),
        names.QUEUE_SELF_USED_ANNOTATION: json.dumps({"cpu": self_used}),
        names.QUEUE_CHILDREN_USED_ANNOTATION: json.dumps({"cpu": used - self_used}),
    }
    if held:
        annotations[names.STOP_POLICY_ANNOTATION] = names.STOP_POLICY_HOLD
    return {"metadata": {"name": name, "annotations": annotations}}


ITEM = {"metadata": {"name": "train", "namespace": "team"}, "quotaName": "leaf",
        "queueName": "leaf", "priority": 5, "request": {"cpu": "2"}, "phase": "Enqueued",
        "position": 1, "positionInQueue": 1, "positionInQuota": 1, "reason": "QuotaExceeded",
        "message": "limited quotaName:leaf, limited resKey:cpu,"}


class FakeCluster:
    def __init__(self, *_: Any) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def list_all(self, what: str) -> list[dict[str, Any]]:
        if what == "quotas":
            return [quota("org"), quota("leaf", "org", "2")]
        return [queue("org", 3, 1), queue("leaf", 2, 2, held=True)]

    def visibility(self, path: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self.calls.append(("GET", path, params))
        if path == names.VISIBILITY_QUOTAS:
            return {"items": [{"metadata": {"name": "org"}, "pending": 1},
                              {"metadata": {"name": "leaf"}, "pending": 1}]}
        return {"items": [ITEM]}

    def call(self, method: str, path: str, body: object = None, query: Any = (),
             content_type: str = "") -> dict[str, Any]:
        self.calls.append((method, path, (body, list(query), content_type)))
        return {}

    def current_namespace(self) -> str:
        return "team"


@pytest.fixture
def cluster(monkeypatch: pytest.MonkeyPatch) -> FakeCluster:
    fake = FakeCluster()
    monkeypatch.setattr(plugin, "Cluster", lambda *_: fake)
    return fake


def test_list_quotas_prints_the_tree_with_usage_self_and_children(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plugin.main(["list", "quotas"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "NAMESPACE", "MIN", "MAX", "USED", "SELF", "CHILDREN",
                                "PENDING", "STOP"]
    assert lines[1].split() == ["org", "default", "cpu=1", "cpu=4", "cpu=3", "cpu=1", "cpu=2",
                                "1"]
    assert lines[2].startswith("  leaf") and lines[2].split()[-1] == "Hold"


def test_list_units_asks_the_visibility_api_with_the_filters(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plugin.main(["list", "units", "--phase", "Enqueued"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:9] == ["team", "train", "leaf", "1", "1", "1", "5", "cpu=2",
                                  "Enqueued"]
    assert cluster.calls[-1] == ("GET", names.VISIBILITY_PENDING,
                                 {"namespace": "team", "phase": "Enqueued", "limit": 1000})
    plugin.main(["list", "units", "-A", "--quota", "org", "-o", "yaml"])
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["items"][0]["positionInQuota"] == 1
    assert cluster.calls[-1][1] == f"{names.VISIBILITY_QUOTAS}/org/queueunits"
    assert cluster.calls[-1][2]["namespace"] == ""
    plugin.main(["list", "units", "-n", "other", "-o", "json"])
    assert json.loads(capsys.readouterr().out)["items"][0]["metadata"]["name"] == "train"
    assert cluster.calls[-1][2]["namespace"] == "other"


def test_stop_and_resume_set_and_remove_the_hold_annotation(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert plugin.main(["stop", "queue", "leaf"]) == 0
    method, path, (body, query, content_type) = cluster.calls[-1]
    assert (method, path) == ("PATCH",
                              "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/koord-queue/queues/leaf")
    assert body == {"metadata": {"annotations": {names.STOP_POLICY_ANNOTATION: "Hold"}}}
    assert content_type == "application/merge-patch+json"
    assert query == [("fieldManager", "kubectl-koordqueue")]
    assert "stopped" in capsys.readouterr().out
    plugin.main(["resume", "queue", "leaf"])
    assert cluster.calls[-1][2][0] == {
        "metadata": {"annotations": {names.STOP_POLICY_ANNOTATION: None}}}


def test_top_refreshes_until_its_iterations(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr(plugin.time, "sleep", slept.append)
    assert plugin.main(["top", "--iterations", "3", "--interval", "0.5", "-A"]) == 0
    out = capsys.readouterr().out
    assert out.count("koordqueue top") == 3 and slept == [0.5, 0.5]
    assert "train" in out and "cpu=3" in out


def test_a_visibility_api_that_does_not_answer_is_one_line(
    cluster: FakeCluster, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any, **__: Any) -> dict[str, Any]:
        raise plugin.PluginError("the visibility API did not answer (503)")

    monkeypatch.setattr(cluster, "visibility", refuse)
    assert plugin.main(["list", "units"]) == 1
    assert capsys.readouterr().err == (
        "kubectl koordqueue: error: the visibility API did not answer (503)\n")


def test_the_package_installs_the_kubectl_plugin_executable() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["kubectl-koordqueue"] == "koordqueue.cli.plugin:main"
