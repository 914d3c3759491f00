"""Run the real controller (kopf + Controller) in a background thread against the test plane."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from koordqueue.cli.logs import configure_logging
from koordqueue.kube.controller import Controller
from koordqueue.kube.kopf_support import OperatorThread
from koordqueue.kube.process import build_operator
from koordqueue.kube.settings import ControllerSettings


class RunningController:
    """`with RunningController(kubeconfig) as rc:` — started, resynced, admitting."""

    def __init__(self, kubeconfig: Path, **overrides: Any) -> None:
        base = ControllerSettings(
            kubeconfig=str(kubeconfig),
            admission_period=0.2,
            resync_period=30.0,
            metrics_port=0,
            log_format="console",
        )
        self.settings = replace(base, **overrides)
        self.controller: Controller | None = None
        self._thread: OperatorThread | None = None

    def start(self, timeout: float = 60.0) -> RunningController:
        # warnings and errors only: the controller thread outlives each test's output capture
        configure_logging("console", "warning")
        operator = build_operator(self.settings, controller=True, scheduler=False)
        assert operator.controller is not None
        self.controller = controller = operator.controller
        self._thread = OperatorThread(
            operator.registry, controller.ready.is_set, "koordqueue-controller"
        )
        self._thread.start(timeout)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        if self._thread is not None:
            self._thread.stop(timeout)

    def __enter__(self) -> RunningController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
