"""Build ``helm`` through the Go module proxy, pinned (versions.HELM_VERSION), cached.

Usage (from the repository root)::

    python -m tests.controlplane.helm                 # build if needed, print the binary path
    python -m tests.controlplane.helm --force         # rebuild even when the cache is valid
    python -m tests.controlplane.helm --print-cache-dir

``.ci/run`` calls it (``helm lint`` / ``helm template`` of charts/koordqueue in its lint
step); tests/unit/deploy/test_helm_chart.py and tests/e2e/test_helm.py call :func:`ensure_helm`
(or :func:`cached_helm`, to skip a test that must not trigger a Go build).

How: a wrapper module that requires ``helm.sh/helm/v4`` at the pinned tag (its go.mod has no
replace directives), ``go mod tidy``, ``go build helm.sh/helm/v4/cmd/helm`` with the version
stamped as the project's Makefile does, then ``helm version`` must report the pin.

Cache: ``$KOORDQUEUE_HELM_CACHE`` if set, else ``~/.cache/koordqueue/helm/<helm-key>/``
(:func:`versions.helm_key`): ``bin/helm``, ``stamp.json``, ``src/`` and ``logs/``. Same lock and
stamp discipline as :mod:`tests.controlplane.build`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

try:  # importable both as tests.controlplane.helm and as a plain script
    from . import build, peers, versions
except ImportError:  # pragma: no cover - `python tests/controlplane/helm.py`
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import build  # type: ignore[no-redef]
    import peers  # type: ignore[no-redef]
    import versions  # type: ignore[no-redef]

CACHE_ENV = "KOORDQUEUE_HELM_CACHE"
HELM_MODULE = "helm.sh/helm/v4"
HELM_COMMAND = f"{HELM_MODULE}/cmd/helm"
STAMP_NAME = "stamp.json"


def cache_dir() -> Path:
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path.home() / ".cache" / "koordqueue" / "helm" / versions.helm_key()


def cached_helm(root: Path | None = None) -> Path | None:
    """The cached binary if its stamp matches the pin and it is executable, else None."""
    root = root or cache_dir()
    try:
        stamp = json.loads((root / STAMP_NAME).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("versions") != versions.helm_as_dict():
        return None
    binary = root / "bin" / "helm"
    return binary if binary.is_file() and os.access(binary, os.X_OK) else None


def helm_ldflags() -> str:
    pkg = f"{HELM_MODULE}/internal/version"
    return f"-s -w -X {pkg}.version={versions.HELM_VERSION} -X {pkg}.gitTreeState=clean"


def build_helm(root: Path, *, quiet: bool = False) -> Path:
    go = build.find_go()
    src, logs, bin_dir = root / "src", root / "logs", root / "bin"
    logs.mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(parents=True, exist_ok=True)
    log = logs / f"build-{time.strftime('%Y%m%dT%H%M%S')}.log"
    env = build.go_env(go, root)
    started = time.monotonic()
    if not quiet:
        print(f"[helm-build] building helm {versions.HELM_VERSION} (log: {log})",
              file=sys.stderr, flush=True)
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(peers.wrapper_go_mod(
        versions.HELM_WRAPPER_MODULE, {HELM_MODULE: versions.HELM_VERSION}, {}))
    (src / "tools.go").write_text(peers.tools_go([HELM_COMMAND]))
    build._run([go, "mod", "tidy"], cwd=src, env=env, log=log)
    out = bin_dir / "helm.new"
    build._run(
        [go, "build", "-trimpath", "-ldflags", helm_ldflags(), "-o", str(out), HELM_COMMAND],
        cwd=src, env=env, log=log,
    )  # fmt: skip
    reported = build._run([str(out), "version", "--short"], cwd=root, env=env, log=log)
    if versions.HELM_VERSION not in reported:
        raise build.BuildError(f"helm version did not report {versions.HELM_VERSION}: {reported}")
    out.replace(bin_dir / "helm")
    go_version = subprocess.run(
        [go, "env", "GOVERSION"], cwd=root, env=env, capture_output=True, text=True, check=False
    ).stdout.strip()
    stamp = {
        "versions": versions.helm_as_dict(),
        "go": go_version,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "build_seconds": round(time.monotonic() - started, 1),
        "size": (bin_dir / "helm").stat().st_size,
    }
    tmp = root / (STAMP_NAME + ".tmp")
    tmp.write_text(json.dumps(stamp, indent=2) + "\n")
    tmp.replace(root / STAMP_NAME)
    if not quiet:
        print(f"[helm-build] built in {stamp['build_seconds']}s", file=sys.stderr, flush=True)
    return bin_dir / "helm"


def ensure_helm(*, force: bool = False, quiet: bool = False) -> Path:
    """The cached helm, built first when missing or stale (BuildError if it cannot be)."""
    root = cache_dir()
    if not force:
        hit = cached_helm(root)
        if hit is not None:
            return hit
    with build._locked(root):  # one builder at a time; others wait and reuse its result
        if not force:
            hit = cached_helm(root)
            if hit is not None:
                return hit
        (root / STAMP_NAME).unlink(missing_ok=True)
        return build_helm(root, quiet=quiet)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m tests.controlplane.helm",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("--force", action="store_true", help="rebuild even if the cache is valid")
    ap.add_argument("--print-cache-dir", action="store_true", help="print the cache dir and exit")
    args = ap.parse_args(argv)
    if args.print_cache_dir:
        print(cache_dir())
        return 0
    t0 = time.monotonic()
    try:
        binary = ensure_helm(force=args.force)
    except build.BuildError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1
    print(binary)
    print(f"# {time.monotonic() - t0:.3f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
