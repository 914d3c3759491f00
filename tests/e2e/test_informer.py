"""The Job/QueueUnit informer against the real API server: watches that the server ends are
resumed from the last resourceVersion, without a re-list and without losing an event."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from koordqueue.kube.api import Kind, KubeApi, load_api_client
from koordqueue.kube.informer import Informer
from tests.e2e import kq

CONFIG_MAP = Kind("", "v1", "configmaps", "ConfigMap")


def test_informer_resumes_server_ended_watches_without_relisting(
    kubeconfig: Path, kubectl: Any
) -> None:
    ns = kq.namespace(kubectl, kq.unique("informer"))
    api = KubeApi(load_api_client(str(kubeconfig)))
    lists: list[str] = []
    watches: list[str] = []
    seen: list[tuple[str | None, str, str]] = []
    lock = threading.Lock()

    def handler(event_type: str | None, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if meta.get("namespace") == ns:
            with lock:
                seen.append((event_type, meta["name"], (obj.get("data") or {}).get("v", "")))

    class Counting(Informer):
        def _list(self) -> str:
            version = super()._list()
            lists.append(version)
            return version

        def _watch_from(self, version: str) -> str:
            watches.append(version)
            return super()._watch_from(version)

    # the server ends each watch after 1 s, so the steps below span several watches
    informer = Counting(api, CONFIG_MAP, handler, workers=4, watch_timeout=1)
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "before", "namespace": ns},
            "data": {"v": "0"},
        }
    )
    informer.start()
    try:
        assert informer.synced.wait(30)
        kq.wait_for(lambda: (None, "before", "0") in seen, what="the listed ConfigMap")
        for step in range(1, 4):
            kubectl("create", "configmap", f"cm{step}", "-n", ns, f"--from-literal=v={step}")
            kubectl(
                "patch",
                "configmap",
                "before",
                "-n",
                ns,
                "--type=merge",
                "-p",
                f'{{"data": {{"v": "{step}"}}}}',
            )
            kq.wait_for(
                lambda s=step: len(watches) >= 2 * s + 1,
                timeout=20,
                what="the server to end the watch",
            )
        kubectl("delete", "configmap", "cm1", "-n", ns)
        kq.wait_for(lambda: ("DELETED", "cm1", "1") in seen, what="the deletion")
    finally:
        informer.stop()

    assert len(lists) == 1, "a server-ended watch must resume, not re-list"
    assert len(watches) >= 7
    assert [v for t, n, v in seen if n == "before"] == ["0", "1", "2", "3"]
    for step in range(1, 4):
        assert ("ADDED", f"cm{step}", str(step)) in seen
    # what an operator sees matches what the informer was told
    assert kq.get(kubectl, "configmap", "cm1", ns) is None
    assert kq.get(kubectl, "configmap", "cm3", ns)["data"] == {"v": "3"}
