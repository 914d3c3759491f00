"""Unit tests of the control plane build helpers (no Go, no network)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest

from tests.controlplane import build, versions

GOMOD = """module k8s.io/kubernetes

go 1.26.0

require (
	k8s.io/api v0.0.0
	k8s.io/client-go v0.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/cri-streaming => ./staging/src/k8s.io/cri-streaming
	github.com/some/fork => github.com/other/fork v1.2.3
)

replace k8s.io/kms v0.0.0 => ./staging/src/k8s.io/kms
"""


def test_staging_replaces_are_read_from_the_tag_go_mod() -> None:
    assert build.parse_staging_replaces(GOMOD) == [
        "k8s.io/api",
        "k8s.io/client-go",
        "k8s.io/cri-streaming",
        "k8s.io/kms",
    ]


def test_wrapper_module_replaces_every_staging_module(tmp_path: Path) -> None:
    build.write_apiserver_module(tmp_path, ["k8s.io/api", "k8s.io/kms"])
    gomod = (tmp_path / "go.mod").read_text()
    assert f"require k8s.io/kubernetes {versions.KUBERNETES_VERSION}" in gomod
    assert f"\tk8s.io/api => k8s.io/api {versions.STAGING_VERSION}" in gomod
    assert f"\tk8s.io/kms => k8s.io/kms {versions.STAGING_VERSION}" in gomod
    assert '_ "k8s.io/kubernetes/cmd/kube-apiserver"' in (tmp_path / "tools.go").read_text()


def test_staging_version_matches_kubernetes_version() -> None:
    assert "v0." + versions.KUBERNETES_VERSION.split(".", 1)[1] == versions.STAGING_VERSION


def test_cache_dir_honours_env_and_keys_on_versions(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    assert build.cache_dir() == tmp_path.resolve()
    monkeypatch.delenv(build.CACHE_ENV)
    assert build.cache_dir().name == versions.versions_key()
    assert versions.KUBERNETES_VERSION in versions.versions_key()


def _fake_cache(root: Path, stamp_versions: dict[str, object]) -> None:
    (root / "bin").mkdir(parents=True)
    for name in build.BINARY_NAMES:
        p = root / "bin" / name
        p.write_text("#!/bin/sh\n")
        p.chmod(p.stat().st_mode | stat.S_IXUSR)
    (root / build.STAMP_NAME).write_text(json.dumps({"versions": stamp_versions}))


def test_cache_hit_needs_matching_stamp_and_all_binaries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(build.CACHE_ENV, str(tmp_path))
    _fake_cache(tmp_path, versions.as_dict())
    t0 = time.monotonic()
    bins = build.ensure_binaries()  # must not call go at all
    assert time.monotonic() - t0 < 0.5
    assert bins.kubectl == tmp_path / "bin" / "kubectl"

    os.unlink(tmp_path / "bin" / "etcd")
    assert build.cached_binaries(tmp_path) is None


def test_stale_stamp_is_a_miss(tmp_path: Path) -> None:
    _fake_cache(tmp_path, {**versions.as_dict(), "kubernetes": "v1.0.0"})
    assert build.cached_binaries(tmp_path) is None


def test_failed_step_names_command_and_stderr(tmp_path: Path) -> None:
    with pytest.raises(build.BuildError) as exc:
        build._run(["sh", "-c", "echo boom-detail >&2; exit 3"], cwd=tmp_path, env=dict(os.environ))
    msg = str(exc.value)
    assert "sh -c" in msg and "exit:    3" in msg and "boom-detail" in msg
