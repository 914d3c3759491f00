"""The controller serving the visibility API, registered with an APIService (e2e helper).

In the test plane the APIService's Service is an ExternalName for 127.0.0.1, where the
controller listens (no kube-proxy on loopback); the API server's aggregator dials it with
its front-proxy client certificate (tests/controlplane/harness.py) and verifies our serving
certificate against the APIService's caBundle for `<service>.koord-queue.svc`.
"""

from __future__ import annotations

import base64
import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from koordqueue.domain import names
from tests.e2e import deployed, kq
from tests.e2e.running_controller import RunningController

BASE: Final = f"/apis/{names.VISIBILITY_GROUP}/{names.VISIBILITY_VERSION}"
APISERVICE: Final = f"{names.VISIBILITY_VERSION}.{names.VISIBILITY_GROUP}"
NS: Final = names.QUEUE_NAMESPACE


def _openssl(d: Path, *args: str) -> None:
    subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True)


def serving_cert(d: Path, service: str) -> tuple[Path, Path, bytes]:
    """A CA and a certificate for `<service>.koord-queue.svc` (the aggregator's ServerName)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
    _openssl(d, "req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt",
             "-subj", "/CN=visibility-e2e-ca", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign")
    _openssl(d, "req", "-x509", *ec, "-CA", "ca.crt", "-CAkey", "ca.key",
             "-keyout", "tls.key", "-out", "tls.crt", "-subj", f"/CN={service}.{NS}.svc",
             "-addext", f"subjectAltName=DNS:{service}.{NS}.svc",
             "-addext", "extendedKeyUsage=serverAuth")
    return d / "tls.crt", d / "tls.key", (d / "ca.crt").read_bytes()


def register(kubectl: Any, service: str, port: int, ca: bytes) -> None:
    """An ExternalName Service for 127.0.0.1 and the APIService naming it, `ca` its caBundle."""
    kubectl.apply({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": service, "namespace": NS},
                   "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}})
    kubectl.apply({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": APISERVICE},
        "spec": {"group": names.VISIBILITY_GROUP, "version": names.VISIBILITY_VERSION,
                 "groupPriorityMinimum": 100, "versionPriority": 100,
                 "caBundle": base64.b64encode(ca).decode(),
                 "service": {"name": service, "namespace": NS, "port": port}},
    })


@contextlib.contextmanager
def serving(kubectl: Any, kubeconfig: Path, tmp: Path) -> Iterator[RunningController]:
    """The controller running with --visibility-port, its APIService Available."""
    service = kq.unique("kq-visibility")
    cert, key, ca = serving_cert(tmp, service)
    port = deployed.free_port()
    rc = RunningController(kubeconfig, visibility_port=port, visibility_cert=str(cert),
                           visibility_key=str(key)).start()
    try:
        register(kubectl, service, port, ca)
        kubectl("wait", "--for=condition=Available", f"apiservice/{APISERVICE}",
                "--timeout=60s")
        yield rc
    finally:
        kubectl("delete", "apiservice", APISERVICE, "--ignore-not-found", check=False)
        kubectl("delete", "service", service, "-n", NS, "--ignore-not-found", check=False)
        rc.stop()


def queue_unit(name: str, ns: str, quota: str, cpu: str, priority: int = 0) -> dict[str, Any]:
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "QueueUnit",
            "metadata": {"name": name, "namespace": ns,
                         "labels": {names.QUOTA_NAME_LABEL: quota}},
            "spec": {"resource": {"cpu": cpu}, "priority": priority}}
