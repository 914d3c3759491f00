"""The scheduler core run with a Volcano conf on a test control plane (one helper for the
modules whose fixture is "this conf, that API server")."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from koordqueue.kube.scheduler.runner import SchedulerRunner
from koordqueue.kube.settings import ControllerSettings


@contextmanager
def scheduler_with_conf(kubeconfig: Path, conf_dir: Path, conf: str) -> Iterator[SchedulerRunner]:
    """Write `conf` as conf_dir/volcano-scheduler.conf and run the scheduler on it."""
    path = conf_dir / "volcano-scheduler.conf"
    path.write_text(conf)
    settings = ControllerSettings(kubeconfig=str(kubeconfig), schedule_period=0.2,
                                  metrics_port=0, log_format="console",
                                  scheduler_conf=str(path))  # fmt: skip
    with SchedulerRunner(settings) as runner:
        yield runner
