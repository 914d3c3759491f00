"""Unit tests of the helm build helpers (no Go, no network)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from tests.controlplane import helm, peers, versions


def test_helm_pin_has_its_own_cache_key() -> None:
    """Pinning helm never invalidates the control plane's or the peers' caches."""
    assert "helm" not in versions.as_dict() and "helm" not in versions.peers_as_dict()
    assert versions.HELM_VERSION in versions.helm_key()
    assert versions.helm_key() not in (versions.versions_key(), versions.peers_key())


def test_wrapper_requires_the_pinned_tag_and_builds_cmd_helm() -> None:
    gomod = peers.wrapper_go_mod(
        versions.HELM_WRAPPER_MODULE, {helm.HELM_MODULE: versions.HELM_VERSION}, {})
    assert f"require helm.sh/helm/v4 {versions.HELM_VERSION}\n" in gomod
    assert helm.HELM_COMMAND == "helm.sh/helm/v4/cmd/helm"
    assert f"internal/version.version={versions.HELM_VERSION}" in helm.helm_ldflags()


def _fake(root: Path, stamp_versions: dict[str, object]) -> Path:
    binary = root / "bin" / "helm"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (root / helm.STAMP_NAME).write_text(json.dumps({"versions": stamp_versions}))
    return binary


def test_a_stamp_of_the_pin_is_a_cache_hit(tmp_path: Path) -> None:
    binary = _fake(tmp_path, versions.helm_as_dict())
    assert helm.cached_helm(tmp_path) == binary


def test_a_stamp_of_another_version_is_a_miss(tmp_path: Path) -> None:
    _fake(tmp_path, {**versions.helm_as_dict(), "helm": "v4.0.0"})
    assert helm.cached_helm(tmp_path) is None
    assert helm.cached_helm(tmp_path / "nothing") is None
