"""The controller image builds and runs as deploy/ runs it (issue 33 part 1).

Needs a container engine (podman, or docker with a running daemon): skipped, with the reason,
where there is none. The container runs as the Deployment's securityContext says: the image's
non-root user, a read-only root filesystem, no capabilities, /tmp the one writable place.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from koordqueue import __version__

ROOT = Path(__file__).resolve().parents[2]


def _engine() -> str:
    """The first engine that answers, or skip naming why none does."""
    why = []
    for name in ("podman", "docker"):
        exe = shutil.which(name)
        if exe is None:
            why.append(f"{name}: not installed")
            continue
        probe = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60,
                               check=False)
        if probe.returncode == 0:
            return exe
        last = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
        why.append(f"{name}: installed, its engine does not answer ({last})")
    pytest.skip("no container engine to build the image: " + "; ".join(why))


def test_the_image_builds_and_runs_koordqueue_version_as_deploy_runs_it() -> None:
    engine = _engine()
    built = subprocess.run(
        ["sh", str(ROOT / "deploy" / "build-image.sh"), "koordqueue-e2e"],
        env={"ENGINE": engine, "PATH": str(Path(engine).parent) + ":/usr/bin:/bin"},
        capture_output=True, text=True, timeout=900, check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    image = built.stdout.strip()
    assert image == f"koordqueue-e2e:{__version__}"
    deployment = next(
        d for d in yaml.safe_load_all((ROOT / "deploy" / "deployment.yaml").read_text()) if d
        and d["kind"] == "Deployment"
    )
    user = deployment["spec"]["template"]["spec"]["securityContext"]["runAsUser"]
    try:
        ran = subprocess.run(
            [engine, "run", "--rm", "--read-only", "--tmpfs", "/tmp", "--cap-drop=ALL",
             "--security-opt=no-new-privileges", image, "version"],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == f"koordqueue {__version__}"
        who = subprocess.run(
            [engine, "run", "--rm", "--read-only", "--entrypoint", "id", image, "-u"],
            capture_output=True, text=True, timeout=120, check=True,
        )
        assert who.stdout.strip() == str(user)  # the image's own user is the Deployment's
    finally:
        subprocess.run([engine, "rmi", "-f", image], capture_output=True, check=False)
