"""deploy/ as shipped on the e2e plane: applied with kustomize, its webhook certificate made by
deploy/webhook-cert.sh (as cert-manager would), and koordqueue run as a process under the
ServiceAccount's own token with the Deployment's arguments; what it asked the API server is
read back from the audit log (conftest.AUDIT_POLICY).

The plane has no Service network, so the webhook configurations are repointed from the
koordqueue-webhook Service to the process on loopback (clientConfig.url, the caBundle the
script injected kept), as tests/e2e/test_gates_admission.py registers its own.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.e2e import kq

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SA = "system:serviceaccount:koord-queue:koordqueue"
SELECTOR = "app.kubernetes.io/name=koordqueue"
WEBHOOK_KINDS = ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
FORBIDDEN_MARKS = ("Forbidden", "APIForbiddenError", "forbidden")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sa_kubeconfig(kubectl: Any, admin_kubeconfig: Path, out: Path) -> Path:
    """A kubeconfig with a TokenRequest token of deploy/'s ServiceAccount (never admin)."""
    token = kubectl(
        "create", "token", "koordqueue", "-n", "koord-queue", "--duration=1h"
    ).stdout.strip()
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": cluster}],
        "users": [{"name": "koordqueue", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "koordqueue"}}],
        "current-context": "sa",
    }
    out.write_text(yaml.safe_dump(config))
    return out


def deployment_args() -> list[str]:
    docs = yaml.safe_load_all((DEPLOY / "deployment.yaml").read_text("utf-8"))
    deployment = next(d for d in docs if d and d["kind"] == "Deployment")
    return [str(a) for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"]]


def with_flags(args: list[str], **flags: object) -> list[str]:
    """`args` with `--name=value` replaced or added for each flag (name_with_underscores)."""
    names = {f"--{k.replace('_', '-')}": v for k, v in flags.items()}
    kept = [a for a in args if a.split("=", 1)[0] not in names]
    return kept + [f"{k}={v}" for k, v in names.items()]


@dataclass
class Served:
    """deploy/ applied: where its webhook certificate is, and the loopback port it must use."""

    certfile: Path
    keyfile: Path
    ca_pem: bytes
    webhook_port: int


def apply_deploy(kubectl: Any, tmp: Path) -> Served:
    """`kubectl apply -k deploy/`, then deploy/webhook-cert.sh (CA, Secret, caBundle)."""
    kubectl("apply", "-k", str(DEPLOY))
    return make_webhook_cert(kubectl, tmp)


def make_webhook_cert(kubectl: Any, tmp: Path) -> Served:
    """deploy/webhook-cert.sh on what is installed (kustomize or the Helm chart); the webhook
    configurations repointed to a loopback port, failurePolicy Fail."""
    env = {
        **os.environ,
        "KUBECONFIG": str(kubectl.kubeconfig),
        "PATH": f"{Path(kubectl.binary).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
    }
    made = subprocess.run(
        ["sh", str(DEPLOY / "webhook-cert.sh"), "IP:127.0.0.1"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert made.returncode == 0, made.stderr
    secret = kubectl.json("get", "secret", "koordqueue-webhook-tls", "-n", "koord-queue")
    files = {}
    for key in ("tls.crt", "tls.key", "ca.crt"):
        files[key] = tmp / key
        files[key].write_bytes(base64.b64decode(secret["data"][key]))
    files["tls.key"].chmod(0o600)
    port = free_port()
    for kind in WEBHOOK_KINDS:
        for config in kubectl.json("get", kind, "-l", SELECTOR)["items"]:
            ops = []
            for i, hook in enumerate(config["webhooks"]):
                client = hook["clientConfig"]
                assert base64.b64decode(client["caBundle"]) == files["ca.crt"].read_bytes()
                url = f"https://127.0.0.1:{port}{client['service'].get('path', '')}"
                ops.append({"op": "replace", "path": f"/webhooks/{i}/clientConfig",
                            "value": {"url": url, "caBundle": client["caBundle"]}})
                # a dead webhook must fail the test, not be skipped (the shipped Ignore)
                ops.append({"op": "replace", "path": f"/webhooks/{i}/failurePolicy",
                            "value": "Fail"})
            kubectl("patch", kind, config["metadata"]["name"], "--type=json", "-p",
                    json.dumps(ops))
    return Served(files["tls.crt"], files["tls.key"], files["ca.crt"].read_bytes(), port)


def visibility_through_the_aggregator(kubectl: Any, port: int, ns: str) -> dict[str, Any]:
    """`pendingunits` of `ns` as `kubectl get --raw` answers it. The shipped APIService (its
    caBundle from webhook-cert.sh, whose certificate names the koordqueue-visibility Service)
    answered by the process: its Service made an ExternalName for 127.0.0.1 (no kube-proxy
    here). The controller reviews the caller's access with the ServiceAccount's token: the
    auth-delegator and authentication-reader bindings of deploy/visibility.yaml (or the
    chart's) are what it needs (a 403 would show in the audit log: the callers check it)."""
    kubectl("delete", "service", "koordqueue-visibility", "-n", "koord-queue")
    kubectl.apply({"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "koordqueue-visibility", "namespace": "koord-queue"},
                   "spec": {"type": "ExternalName", "externalName": "127.0.0.1"}})
    apiservice = "v1alpha1.visibility.koord-queue.io"
    kubectl("patch", "apiservice", apiservice, "--type=merge",
            "-p", json.dumps({"spec": {"service": {"port": port}}}))
    kubectl("wait", "--for=condition=Available", f"apiservice/{apiservice}", "--timeout=60s")
    body = json.loads(kubectl(
        "get", "--raw", f"/apis/visibility.koord-queue.io/v1alpha1/pendingunits?namespace={ns}"
    ).stdout)
    assert body["kind"] == "PendingUnitsSummary" and body["round"]["number"] > 0, body
    return body  # type: ignore[no-any-return]


def remove_apiservices(kubectl: Any) -> None:
    """deploy/visibility.yaml's APIService (its Service has no endpoint in the test plane),
    and its Service (test_deploy.py makes it an ExternalName, which a later apply of deploy/
    could not turn back into a ClusterIP Service)."""
    kubectl("delete", "apiservices", "-l", SELECTOR, "--ignore-not-found", check=False)
    kubectl("delete", "service", "koordqueue-visibility", "-n", "koord-queue",
            "--ignore-not-found", check=False)


def remove_webhooks(kubectl: Any) -> None:
    """The shipped webhooks select every namespace: never leave them to the other tests."""
    for kind in WEBHOOK_KINDS:
        kubectl("delete", kind, "-l", SELECTOR, "--ignore-not-found", check=False)


class Process:
    """`koordqueue <args>` as a process of its own; its stderr (the log) kept in a file."""

    def __init__(self, args: list[str], log: Path) -> None:
        self.args, self.log_path = args, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "koordqueue.cli.main", *self.args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
            )
        return self

    @property
    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_healthy(self, port: int, timeout: float = 60.0) -> None:
        def up() -> bool:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise AssertionError(f"koordqueue exited {self.proc.returncode}:\n{self.log}")
            url = f"http://127.0.0.1:{port}/healthz"
            try:
                with urllib.request.urlopen(url, timeout=2):
                    return True
            except urllib.error.HTTPError:  # 500: not ready yet
                return False
            except urllib.error.URLError as exc:
                if isinstance(exc.reason, TimeoutError):
                    raise AssertionError(f"/healthz did not answer within 2 s: {exc}") from exc
                return False  # not listening yet
            except TimeoutError as exc:  # a kubelet's probe would have failed
                raise AssertionError(f"/healthz did not answer within 2 s: {exc}") from exc

        kq.wait_for(up, timeout=timeout, what=f"koordqueue {self.args[0]} healthy")

    def wait(self, timeout: float = 60.0) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)

    def forbidden_lines(self) -> list[str]:
        return [line for line in self.log.splitlines()
                if any(mark in line for mark in FORBIDDEN_MARKS)]


@contextlib.contextmanager
def running(args: list[str], log: Path, health_port: int) -> Iterator[Process]:
    process = Process(args, log).start()
    try:
        process.wait_healthy(health_port)
        yield process
    finally:
        process.stop()


Triple = tuple[str, str, str]
"""(API group, resource[/subresource], verb) as RBAC rules and audit events name them."""


def granted() -> set[Triple]:
    """Every (group, resource, verb) deploy/rbac.yaml grants (no wildcards there)."""
    out: set[Triple] = set()
    for doc in yaml.safe_load_all((DEPLOY / "rbac.yaml").read_text("utf-8")):
        if not doc or doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), rule
                        out.add((group, resource, verb))
    return out


def audit_offset(audit_log: Path) -> int:
    """Where the audit log ends now: `audited(since=...)` then reads only what comes after."""
    return audit_log.stat().st_size if audit_log.exists() else 0


def audited(audit_log: Path, since: int = 0) -> tuple[set[Triple], list[dict[str, Any]]]:
    """What the ServiceAccount asked for (resource requests), and the requests refused 403,
    from byte `since` of the log on (a worker's control plane, and its log, outlives a test:
    test_namespace_startup's controller, with this same ServiceAccount, is refused on purpose)."""
    used: set[Triple] = set()
    refused: list[dict[str, Any]] = []
    deadline = time.monotonic() + 5
    while not audit_log.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    with audit_log.open("rb") as log:
        log.seek(since)
        text = log.read().decode()
    for line in text.splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != SA:
            continue
        if (event.get("responseStatus") or {}).get("code") == 403:
            refused.append(event)
        ref = event.get("objectRef")
        if not ref or not ref.get("resource"):
            continue  # discovery and other non-resource URLs
        resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
        used.add((ref.get("apiGroup", ""), resource, event["verb"]))
    return used, refused
