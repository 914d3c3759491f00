"""deploy/ as an operator gets it: the image tag is the package version, the pod runs as the
image's non-root user on a read-only root filesystem, and the webhooks it registers are
served (port, Service, certificate) (issue 33 parts 1 and 2)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

from koordqueue import __version__
from tests.unit.cli.helpers import ROOT

DEPLOY = ROOT / "deploy"


def _docs(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text("utf-8")) if d]


def _one(name: str, kind: str) -> dict[str, Any]:
    (found,) = [d for d in _docs(name) if d["kind"] == kind]
    return found


def _pod() -> dict[str, Any]:
    spec: dict[str, Any] = _one("deployment.yaml", "Deployment")["spec"]["template"]["spec"]
    return spec


def _flag(container: dict[str, Any], name: str) -> str:
    (value,) = [a.split("=", 1)[1] for a in container["args"] if a.startswith(f"{name}=")]
    return value


def test_the_deployments_image_tag_is_the_package_version() -> None:
    (container,) = _pod()["containers"]
    assert container["image"] == f"koordqueue:{__version__}"
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text("utf-8"))
    assert "images" not in kustomization  # one tag in deploy/: overlays set their own


def test_build_image_tags_with_the_package_version(tmp_path: Path) -> None:
    """The script's engine is replaced by `true`: what it would build, not a build."""
    result = subprocess.run(
        ["sh", str(DEPLOY / "build-image.sh"), "registry.example/kq"],
        env={**os.environ, "ENGINE": "true"}, capture_output=True, text=True, check=True,
    )
    assert result.stdout.strip() == f"registry.example/kq:{__version__}"


def test_the_pod_runs_as_the_images_non_root_user_on_a_read_only_root() -> None:
    pod = _pod()
    (container,) = pod["containers"]
    user = re.search(r"^USER (\d+):(\d+)$", (DEPLOY / "Containerfile").read_text(), re.M)
    assert user is not None
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == int(user.group(1))
    assert pod["securityContext"]["runAsGroup"] == int(user.group(2))
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]  # the one writable place


def test_every_registered_webhook_is_served_by_the_deployment() -> None:
    pod = _pod()
    (container,) = pod["containers"]
    port = int(_flag(container, "--webhook-port"))
    assert {"name": "webhook", "containerPort": port} in container["ports"]
    service = _one("webhook.yaml", "Service")
    (service_port,) = service["spec"]["ports"]
    assert service_port["targetPort"] in (port, "webhook")
    deployment_labels = _one("deployment.yaml", "Deployment")["spec"]["template"]["metadata"]
    assert service["spec"]["selector"].items() <= deployment_labels["labels"].items()
    configs = [
        d for d in _docs("webhook.yaml")
        if d["kind"] in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    ]
    assert configs
    for config in configs:
        assert config["metadata"]["labels"]["app.kubernetes.io/name"] == "koordqueue"
        for hook in config["webhooks"]:
            ref = hook["clientConfig"]["service"]
            assert (ref["name"], ref["namespace"], ref["port"]) == (
                service["metadata"]["name"], "koord-queue", service_port["port"])


def test_the_certificate_cert_manager_makes_is_the_one_the_pod_mounts() -> None:
    pod = _pod()
    (container,) = pod["containers"]
    certificate = _one("cert-manager.yaml", "Certificate")
    secret = certificate["spec"]["secretName"]
    (volume,) = [v for v in pod["volumes"] if v.get("secret", {}).get("secretName") == secret]
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert _flag(container, "--webhook-cert") == f"{mount['mountPath']}/tls.crt"
    assert _flag(container, "--webhook-key") == f"{mount['mountPath']}/tls.key"
    service = _one("webhook.yaml", "Service")["metadata"]["name"]
    assert f"{service}.koord-queue.svc" in certificate["spec"]["dnsNames"]
    for config in _docs("webhook.yaml"):
        if config["kind"].endswith("WebhookConfiguration"):
            injected = config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
            assert injected == f"koord-queue/{certificate['metadata']['name']}"
    assert "secretName: koordqueue-webhook-tls" in (DEPLOY / "cert-manager.yaml").read_text()
    assert "create secret generic koordqueue-webhook-tls" in (
        DEPLOY / "webhook-cert.sh").read_text()


def test_the_quickstart_shows_the_example_files_it_applies() -> None:
    """docs/quickstart.md's YAML blocks are docs/examples/quickstart/ verbatim (the e2e test
    applies the files, so what a reader copies is what was tested)."""
    text = (ROOT / "docs" / "quickstart.md").read_text("utf-8")
    shown = re.findall(r"```yaml\n# (docs/examples/quickstart/[\w.-]+)\n(.*?)```", text, re.S)
    assert [path for path, _ in shown] == [
        f"docs/examples/quickstart/{name}.yaml"
        for name in ("quota", "research", "team-b", "job", "too-big")]
    for path, body in shown:
        assert (ROOT / path).read_text("utf-8") == body, path
        assert f"kubectl apply -f {path}" in text
