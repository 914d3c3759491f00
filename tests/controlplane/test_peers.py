"""Unit tests of the peer build helpers (no Go, no network)."""

from __future__ import annotations

import json
import stat
import time
from pathlib import Path

import pytest

from tests.controlplane import peers, versions


def test_peer_pins_stay_out_of_the_control_plane_cache_key() -> None:
    # Pinning a peer must not invalidate the kube-apiserver / etcd cache.
    assert set(versions.as_dict()) == {"kubernetes", "staging", "etcd", "recipe"}
    assert versions.peers_as_dict()["kueue"] == versions.KUEUE_VERSION
    assert versions.peers_key() != versions.versions_key()
    assert versions.KUEUE_VERSION in versions.peers_key()


def test_scheduler_wrapper_replaces_staging_modules_with_their_tags() -> None:
    gomod = peers.wrapper_go_mod(
        versions.SCHEDULER_WRAPPER_MODULE,
        {"k8s.io/kubernetes": versions.KUBERNETES_VERSION},
        {"k8s.io/api": versions.STAGING_VERSION, "k8s.io/kms": versions.STAGING_VERSION},
    )
    assert f"module {versions.SCHEDULER_WRAPPER_MODULE}\n" in gomod
    assert f"require k8s.io/kubernetes {versions.KUBERNETES_VERSION}\n" in gomod
    assert f"\tk8s.io/api => k8s.io/api {versions.STAGING_VERSION}\n" in gomod
    assert f"\tk8s.io/kms => k8s.io/kms {versions.STAGING_VERSION}\n" in gomod


def test_kueue_wrapper_has_no_replace_block() -> None:
    gomod = peers.wrapper_go_mod(
        versions.KUEUE_WRAPPER_MODULE, {peers.KUEUE_MODULE: versions.KUEUE_VERSION}, {}
    )
    assert f"require {peers.KUEUE_MODULE} {versions.KUEUE_VERSION}\n" in gomod
    assert "replace" not in gomod


def test_tools_file_blank_imports_each_command_behind_the_tools_tag() -> None:
    text = peers.tools_go(["k8s.io/kubernetes/cmd/kube-scheduler", "sigs.k8s.io/kueue/cmd/kueue"])
    assert text.startswith("//go:build tools\n")
    assert '\t_ "k8s.io/kubernetes/cmd/kube-scheduler"\n' in text
    assert '\t_ "sigs.k8s.io/kueue/cmd/kueue"\n' in text


def test_kueue_version_is_stamped_into_its_version_package() -> None:
    flags = peers.kueue_ldflags("2026-01-01T00:00:00Z")
    assert f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={versions.KUEUE_VERSION}" in flags


def _fake_peer(root: Path, name: str, stamp_versions: dict[str, object]) -> None:
    (root / "bin").mkdir(parents=True, exist_ok=True)
    binary = root / "bin" / name
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    if name == peers.KUEUE:
        (root / "crds" / peers.KUEUE).mkdir(parents=True)
        (root / "crds" / peers.KUEUE / "cq.yaml").write_text("kind: CustomResourceDefinition\n")
    (root / f"stamp-{name}.json").write_text(json.dumps({"versions": stamp_versions}))


def test_cache_hit_per_peer_needs_its_own_stamp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(peers.CACHE_ENV, str(tmp_path))
    _fake_peer(tmp_path, peers.KUBE_SCHEDULER, versions.peers_as_dict())
    t0 = time.monotonic()
    hit = peers.ensure_peer(peers.KUBE_SCHEDULER)  # must not call go at all
    assert time.monotonic() - t0 < 0.5
    assert hit.binary == tmp_path / "bin" / peers.KUBE_SCHEDULER
    assert hit.crds is None
    assert peers.cached_peer(peers.KUEUE, tmp_path) is None  # one peer never stands for another


def test_kueue_without_its_crds_is_a_miss(tmp_path: Path) -> None:
    _fake_peer(tmp_path, peers.KUEUE, versions.peers_as_dict())
    assert peers.cached_peer(peers.KUEUE, tmp_path) is not None
    (tmp_path / "crds" / peers.KUEUE / "cq.yaml").unlink()
    assert peers.cached_peer(peers.KUEUE, tmp_path) is None


def test_stale_peer_stamp_is_a_miss(tmp_path: Path) -> None:
    _fake_peer(tmp_path, peers.KUEUE, {**versions.peers_as_dict(), "kueue": "v0.1.0"})
    assert peers.cached_peer(peers.KUEUE, tmp_path) is None


def test_unknown_peer_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown peer"):
        peers.ensure_peer("volcano-scheduler")


def test_volcano_wrapper_repeats_versioned_replaces_only() -> None:
    gomod = {"Replace": [
        {"Old": {"Path": "k8s.io/api"}, "New": {"Path": "k8s.io/api", "Version": "v0.34.1"}},
        {"Old": {"Path": "volcano.sh/apis"}, "New": {"Path": "./staging/src/volcano.sh/apis"}},
    ]}
    assert peers.versioned_replaces(gomod) == {"k8s.io/api": "v0.34.1"}


def test_a_replace_to_another_module_is_refused() -> None:
    gomod = {"Replace": [{"Old": {"Path": "a.io/x"}, "New": {"Path": "b.io/x", "Version": "v1"}}]}
    with pytest.raises(peers.build.BuildError, match="cannot repeat"):
        peers.versioned_replaces(gomod)


def test_volcano_has_its_own_stamp_pins(tmp_path: Path) -> None:
    # bumping Volcano must not invalidate kube-scheduler or kueue (nor the cache directory)
    assert "volcano" not in versions.peers_as_dict()
    assert peers.stamp_versions(peers.VOLCANO) == versions.volcano_as_dict()
    (tmp_path / "bin").mkdir()
    binary = tmp_path / "bin" / peers.VOLCANO
    binary.write_text("#!/bin/sh\n")
    binary.chmod(binary.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "crds" / "volcano").mkdir(parents=True)
    (tmp_path / "crds" / "volcano" / "pg.yaml").write_text("kind: CustomResourceDefinition\n")
    stamp = tmp_path / f"stamp-{peers.VOLCANO}.json"
    stamp.write_text(json.dumps({"versions": versions.volcano_as_dict()}))
    hit = peers.cached_peer(peers.VOLCANO, tmp_path)
    assert hit is not None and hit.crds == tmp_path / "crds" / "volcano"
    stamp.write_text(json.dumps({"versions": versions.peers_as_dict()}))
    assert peers.cached_peer(peers.VOLCANO, tmp_path) is None
