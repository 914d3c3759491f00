"""The shipped Deployment's arguments are flags the controller accepts (a typo would crash-loop)."""

from __future__ import annotations

from pathlib import Path

import yaml

from koordqueue.cli.flags import settings_from_args
from koordqueue.cli.main import build_parser
from koordqueue.kube.settings import ControllerSettings

DEPLOYMENT = Path(__file__).resolve().parents[3] / "deploy" / "deployment.yaml"


def test_deployment_args_parse_into_the_documented_settings() -> None:
    docs = [d for d in yaml.safe_load_all(DEPLOYMENT.read_text(encoding="utf-8")) if d]
    deployment = next(d for d in docs if d.get("kind") == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])  # exits on an unknown flag
    settings = settings_from_args(args, ControllerSettings)
    assert args.command == "run"
    assert settings.namespace == "koord-queue"
    # --job-workers is a no-op kept for old manifests: the shipped one does not pass it; the
    # concurrency of its API calls is --api-writers (not passed: its documented default, 64)
    assert not any(str(arg).startswith("--job-workers") for arg in container["args"])
    assert settings.api_writers == 64
    assert settings.resync_period == 60.0
    assert settings.admission_period == 1.0
    assert settings.leader_elect is True
    assert (
        settings.leader_elect_lease_duration,
        settings.leader_elect_renew_deadline,
        settings.leader_elect_retry_period,
    ) == (15.0, 10.0, 2.0)


def test_two_replicas_roll_without_downtime_and_a_pdb_keeps_one() -> None:
    docs = [d for d in yaml.safe_load_all(DEPLOYMENT.read_text(encoding="utf-8")) if d]
    deployment = next(d for d in docs if d.get("kind") == "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    pdb = next(d for d in docs if d.get("kind") == "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"] == deployment["spec"]["selector"]
