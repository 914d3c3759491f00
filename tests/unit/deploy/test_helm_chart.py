"""charts/koordqueue (issue 27 part 4) renders what deploy/ renders, so the two cannot drift.

`helm template` with default values is compared object by object (kind, name, namespace, and
every field but Helm's own labels; the Deployment's flags as a set) with `kubectl kustomize
deploy/` plus crds/, using the pinned helm (tests/controlplane/helm.py) and the control plane's
kubectl. A missing binary is built, never skipped (a BuildError fails the test).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordqueue import __version__
from koordqueue.domain.integrations import ALL, INTEGRATIONS, POD_PARENTS
from tests.controlplane import build, helm

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "koordqueue"
NAMESPACE = "koord-queue"
HELM_LABELS = ("app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart")
Key = tuple[str, str, str]


@pytest.fixture(scope="module")
def helm_bin() -> Path:
    return helm.ensure_helm(quiet=True)


@pytest.fixture(scope="module")
def kubectl_bin() -> Path:
    return build.ensure_binaries(quiet=True).kubectl


def run(*cmd: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, check=False,
                          timeout=60)


def docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def template(helm_bin: Path, *sets: str, ok: bool = True) -> list[dict[str, Any]]:
    args = [helm_bin, "template", "koordqueue", CHART, "--namespace", NAMESPACE,
            "--include-crds"]
    for s in sets:
        args += ["--set", s]
    out = run(*args)
    assert out.returncode == 0, out.stderr
    return docs(out.stdout)


def by_key(objects: list[dict[str, Any]]) -> dict[Key, dict[str, Any]]:
    out: dict[Key, dict[str, Any]] = {}
    for o in objects:
        key = (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace", ""))
        assert key not in out, f"{key} rendered twice"
        out[key] = o
    return out


def normalized(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` without Helm's own labels, the Deployment's args as a sorted list (a flag's place
    means nothing to `koordqueue run`; the sub-command stays first)."""
    obj = json.loads(json.dumps(obj))
    for meta in (obj["metadata"], obj.get("spec", {}).get("template", {}).get("metadata", {})):
        for label in HELM_LABELS:
            (meta.get("labels") or {}).pop(label, None)
    if obj["kind"] == "Deployment":
        for c in obj["spec"]["template"]["spec"]["containers"]:
            c["args"] = c["args"][:1] + sorted(c["args"][1:])
    return obj


def controller(objects: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {"deployment": deployment, "container": container, "args": container["args"]}


def test_helm_lint_passes(helm_bin: Path) -> None:
    out = run(helm_bin, "lint", "--strict", CHART)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 chart(s) failed" in out.stdout


def test_default_render_is_what_kustomize_renders_plus_the_crds(
    helm_bin: Path, kubectl_bin: Path
) -> None:
    """Every object of `kubectl kustomize deploy/`, deploy/dashboard-viewer.yaml and
    deploy/whatif-viewer.yaml (applied on their own there; a role without a binding grants
    nothing) and crds/ is rendered, equal but for Helm's labels, and nothing else: except the
    Namespace, made by `helm install --create-namespace` (namespace.create=true renders it,
    test below). Fails if a field of deploy/ changes without the chart (tried:
    deploy/deployment.yaml's --admission-period=1 -> 2)."""
    kustomized = run(kubectl_bin, "kustomize", ROOT / "deploy")
    assert kustomized.returncode == 0, kustomized.stderr
    want = by_key(docs(kustomized.stdout))
    for crd in sorted((ROOT / "crds").glob("*.yaml")):
        want.update(by_key(docs(crd.read_text("utf-8"))))
    for viewer in ("dashboard-viewer.yaml", "whatif-viewer.yaml"):
        want.update(by_key(docs((ROOT / "deploy" / viewer).read_text("utf-8"))))
    del want[("Namespace", NAMESPACE, "")]
    got = by_key(template(helm_bin))
    assert sorted(got) == sorted(want)
    for key, obj in want.items():
        assert normalized(got[key]) == normalized(obj), key


def test_the_charts_crds_are_the_repositorys_crds() -> None:
    """Helm installs the chart's crds/ before anything else. It is a link to crds/, not a
    copy: copies drifted with the first CRD change on main (queueunits' reclaimState)."""
    assert (CHART / "crds").is_symlink()
    assert (CHART / "crds").resolve() == (ROOT / "crds").resolve()


def test_the_chart_version_and_image_tag_are_the_package_version(helm_bin: Path) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text("utf-8"))
    assert chart["appVersion"] == chart["version"] == __version__
    assert controller(template(helm_bin))["container"]["image"] == f"koordqueue:{__version__}"


def test_image_and_replicas_values(helm_bin: Path) -> None:
    objects = template(helm_bin, "image.repository=registry.example/kq", "image.tag=v9",
                       "image.pullPolicy=Always", "replicas=3")
    c = controller(objects)
    assert c["container"]["image"] == "registry.example/kq:v9"
    assert c["container"]["imagePullPolicy"] == "Always"
    assert c["deployment"]["spec"]["replicas"] == 3


def test_flags_values_replace_add_and_remove_flags(helm_bin: Path) -> None:
    default = controller(template(helm_bin))["args"]
    args = controller(template(helm_bin, "flags.admission-period=5", "flags.api-writers=16",
                               "flags.log-format=null", "extraArgs={--verbose}"))["args"]
    assert "--admission-period=1" in default and "--log-format=json" in default
    assert "--admission-period=5" in args and "--admission-period=1" not in args
    assert "--api-writers=16" in args
    assert not [a for a in args if a.startswith("--log-format")]
    assert args[0] == "run" and args[-1] == "--verbose"
    assert f"--namespace={NAMESPACE}" in args


def test_a_flag_the_chart_sets_itself_is_refused(helm_bin: Path) -> None:
    out = run(helm_bin, "template", "koordqueue", CHART, "--set", "flags.webhook-port=1")
    assert out.returncode != 0
    assert "schema" in out.stderr, out.stderr


def test_integrations_value(helm_bin: Path) -> None:
    """Empty (default): no --integrations, so the controller's default (batch/job) as in
    deploy/; a list turns exactly those kinds on; an unknown kind is refused by the schema."""
    assert not [a for a in controller(template(helm_bin))["args"]
                if a.startswith("--integrations")]
    args = controller(template(helm_bin, "integrations={batch/job,pod,deployment}"))["args"]
    assert [a for a in args if a.startswith("--integrations")] == [
        "--integrations=batch/job,pod,deployment"]
    out = run(helm_bin, "template", "koordqueue", CHART, "--set", "integrations={batch/jobs}")
    assert out.returncode != 0 and "integrations" in out.stderr, out.stderr


def test_the_schemas_integration_names_are_the_controllers() -> None:
    schema = json.loads((CHART / "values.schema.json").read_text("utf-8"))
    names = schema["properties"]["integrations"]["items"]["enum"]
    assert sorted(names) == sorted([*INTEGRATIONS, *POD_PARENTS, ALL])


def test_optional_parts(helm_bin: Path) -> None:
    """visibility, the dashboard and what-if viewer roles and the PDB off drop their objects
    and flags; namespace, cert-manager and PodMonitor on add theirs (deploy/namespace.yaml,
    cert-manager.yaml, monitoring/podmonitor.yaml)."""
    default = by_key(template(helm_bin))
    off = by_key(template(helm_bin, "visibility.enabled=false", "dashboardViewer.enabled=false",
                          "whatifViewer.enabled=false", "podDisruptionBudget.enabled=false"))
    gone = set(default) - set(off)
    assert {k[0] for k in gone} == {"APIService", "Service", "ClusterRole", "ClusterRoleBinding",
                                    "PodDisruptionBudget"}
    assert ("Service", "koordqueue-visibility", NAMESPACE) in gone
    assert ("ClusterRole", "koordqueue-dashboard-viewer", "") in gone
    assert ("ClusterRole", "koordqueue-whatif-viewer", "") in gone
    assert not [a for a in controller(list(off.values()))["args"] if "visibility" in a]
    on = by_key(template(helm_bin, "namespace.create=true", "certManager.enabled=true",
                         "monitoring.podMonitor.enabled=true"))
    assert set(on) - set(default) == {
        ("Namespace", NAMESPACE, ""), ("Issuer", "koordqueue-selfsigned", NAMESPACE),
        ("Certificate", "koordqueue-webhook", NAMESPACE), ("PodMonitor", "koordqueue", NAMESPACE)}
    for kind, name, ns in set(on) - set(default):
        source = {"Namespace": "namespace.yaml", "PodMonitor": "monitoring/podmonitor.yaml"}.get(
            kind, "cert-manager.yaml")
        shipped = by_key(docs((ROOT / "deploy" / source).read_text("utf-8")))
        assert normalized(on[(kind, name, ns)]) == normalized(shipped[(kind, name, ns)])


def test_another_namespace_is_used_everywhere(helm_bin: Path) -> None:
    out = run(helm_bin, "template", "kq", CHART, "--namespace", "queues")
    assert out.returncode == 0, out.stderr
    assert NAMESPACE not in out.stdout.replace("koord-queue.io", "").replace(
        "koord-queue/visibility", "")
    objects = docs(out.stdout)
    assert "--namespace=queues" in controller(objects)["args"]


Grant = tuple[str, str, str, str]  # apiGroup, resource, resourceName ("*": any), verb
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def grants(role: dict[str, Any]) -> set[Grant]:
    """A role's rules, one row per group x resource x name x verb (a rule's lists multiply)."""
    return {(group, resource, name, verb)
            for rule in role.get("rules") or []
            for group in rule.get("apiGroups", [""])
            for resource in rule.get("resources", [])
            for name in rule.get("resourceNames") or ["*"]
            for verb in rule["verbs"]}


def shipped_rbac() -> dict[Key, dict[str, Any]]:
    """Every Role, ClusterRole and binding in deploy/*.yaml and deploy/*/*.yaml, read from the
    files themselves (not through kustomization.yaml, so a file left out of it still counts),
    in the chart's namespace as kustomize puts them."""
    out: dict[Key, dict[str, Any]] = {}
    for path in sorted([*(ROOT / "deploy").glob("*.yaml"), *(ROOT / "deploy").glob("*/*.yaml")]):
        if path.name == "kustomization.yaml":
            continue
        for o in docs(path.read_text("utf-8")):
            if o.get("kind") in RBAC_KINDS:
                ns = NAMESPACE if o["kind"] in ("Role", "RoleBinding") else ""
                out[(o["kind"], o["metadata"]["name"], ns)] = o
    return out


def test_the_charts_rbac_grants_exactly_what_deploy_grants(helm_bin: Path) -> None:
    """Each role of deploy/ is rendered (all optional parts on) with the same name and the same
    grants, verb by verb and resource by resource, no more and no fewer; each binding binds the
    same role to the same subjects. The drift guard for privilege alone, readable when it fails
    (tried: 'delete' dropped from queueunits in the chart's rbac.yaml fails here, naming it)."""
    shipped = shipped_rbac()
    assert ("ClusterRole", "koordqueue-controller", "") in shipped
    assert ("ClusterRole", "koordqueue-dashboard-viewer", "") in shipped
    rendered = {k: o for k, o in by_key(template(
        helm_bin, "namespace.create=true", "certManager.enabled=true",
        "monitoring.podMonitor.enabled=true")).items() if k[0] in RBAC_KINDS}
    assert sorted(rendered) == sorted(shipped)
    for key, want in shipped.items():
        got = rendered[key]
        if key[0] in ("Role", "ClusterRole"):
            missing, extra = grants(want) - grants(got), grants(got) - grants(want)
            assert not missing and not extra, (key, f"missing {sorted(missing)}",
                                               f"extra {sorted(extra)}")
            assert (got["metadata"].get("labels") or {}).items() >= (
                want["metadata"].get("labels") or {}).items(), key  # aggregate-to-view etc.
        else:
            assert got["roleRef"] == want["roleRef"], key
            subjects = [{**s, "namespace": NAMESPACE} if s["kind"] == "ServiceAccount" else s
                        for s in want["subjects"]]
            assert got["subjects"] == subjects, key
