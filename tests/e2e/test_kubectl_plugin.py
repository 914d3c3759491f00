"""Issue 27 part 2: `kubectl koordqueue` found by kubectl on PATH, against the real API server.

The executable the package installs (`kubectl-koordqueue`, pyproject [project.scripts]) is
stood in for by a two-line script of the same name running this tree's module, so kubectl's
own plugin discovery runs it. A stopped queue admits nothing new while its admitted unit
stays admitted, the plugin shows the held unit first in line with its reason, and resume
lets it in.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue.domain import names
from tests.e2e import kq
from tests.e2e.running_controller import RunningController
from tests.e2e.visibility_served import queue_unit, serving

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("plugin")
    script = d / "kubectl-koordqueue"
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m koordqueue.cli.plugin "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return d


@pytest.fixture(scope="module")
def served(kubectl: Any, kubeconfig: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningController]:
    with serving(kubectl, kubeconfig, tmp_path_factory.mktemp("visibility")) as rc:
        yield rc


def koordqueue(kubectl: Any, plugin_path: Path, *args: str) -> str:
    """`kubectl koordqueue ARGS --kubeconfig K`, as an operator types it."""
    env = {**os.environ, "PATH": f"{plugin_path}:{Path(kubectl.binary).parent}:/usr/bin:/bin",
           "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [str(kubectl.binary), "koordqueue", *args, "--kubeconfig", str(kubectl.kubeconfig)],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_stop_queue_holds_new_units_and_the_plugin_shows_them(
    kubectl: Any, served: RunningController, plugin_path: Path
) -> None:
    ns = kq.namespace(kubectl, kq.unique("plug"))
    parent, quota = kq.unique("plug-org"), kq.unique("plug")
    kubectl.apply(kq.quota(parent, max_={"cpu": "4"},
                           labels={names.QUOTA_IS_PARENT_LABEL: "true"}))
    kubectl.apply(kq.quota(quota, max_={"cpu": "2"}, parent=parent))
    kubectl.apply(queue_unit("first", ns, quota, "1"))
    kq.wait_for(lambda: kq.phase(kubectl, ns, "first") == "Dequeued", what="first admitted")

    out = koordqueue(kubectl, plugin_path, "stop", "queue", quota)
    assert f"queue {quota} stopped" in out
    queue = kq.get(kubectl, "queues.scheduling.x-k8s.io", quota, names.QUEUE_NAMESPACE)
    assert queue is not None
    assert queue["metadata"]["annotations"][names.STOP_POLICY_ANNOTATION] == "Hold"
    kubectl.apply(queue_unit("second", ns, quota, "1"))  # fits, but the queue is held

    def held() -> list[dict[str, Any]] | None:
        doc = json.loads(koordqueue(kubectl, plugin_path, "list", "units", "-n", ns,
                                    "-o", "json"))
        items: list[dict[str, Any]] = doc["items"]
        return items if items and items[0]["reason"] == "QueueHeld" else None

    (item,) = kq.wait_for(held, what="second listed as held")
    assert (item["metadata"]["name"], item["positionInQueue"]) == ("second", 1)
    assert kq.phase(kubectl, ns, "second") != "Dequeued"
    assert kq.phase(kubectl, ns, "first") == "Dequeued"  # what runs stays

    table = koordqueue(kubectl, plugin_path, "list", "units", "-n", ns).splitlines()
    assert table[0].split()[:4] == ["NAMESPACE", "NAME", "QUOTA", "POSITION"]
    assert table[1].split()[:2] == [ns, "second"] and "QueueHeld" in table[1]
    tree = yaml.safe_load(koordqueue(kubectl, plugin_path, "list", "quotas", "-o", "yaml"))
    org = next(q for q in tree["items"] if q["name"] == parent)
    (child,) = org["children"]
    assert (child["name"], child["held"], child["max"]) == (quota, True, {"cpu": "2"})
    assert "koordqueue top" in koordqueue(kubectl, plugin_path, "top", "--iterations", "1",
                                          "-n", ns)
    explained = koordqueue(kubectl, plugin_path, "explain", "-n", ns, "second")
    assert "QueueHeld" in explained

    assert koordqueue(kubectl, plugin_path, "resume", "queue", quota).strip() == (
        f"queue {quota} resumed")
    kq.wait_for(lambda: kq.phase(kubectl, ns, "second") == "Dequeued", what="admitted after")
