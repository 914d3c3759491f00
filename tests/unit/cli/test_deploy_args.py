"""The shipped Deployment's arguments are flags the controller accepts (a typo would crash-loop)."""

from __future__ import annotations

from pathlib import Path

import yaml

from koordqueue.cli.flags import settings_from_args
from koordqueue.cli.main import build_parser

DEPLOYMENT = Path(__file__).resolve().parents[3] / "deploy" / "deployment.yaml"


def test_deployment_args_parse_into_the_documented_settings() -> None:
    docs = [d for d in yaml.safe_load_all(DEPLOYMENT.read_text(encoding="utf-8")) if d]
    deployment = next(d for d in docs if d.get("kind") == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])  # exits on an unknown flag
    settings = settings_from_args(args)
    assert args.command == "run"
    assert settings.namespace == "koord-queue"
    assert settings.job_workers == 64
    assert settings.admission_period == 1.0
