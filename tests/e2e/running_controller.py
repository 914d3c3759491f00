"""Run the real controller (kopf + Controller) in a background thread against the test plane."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import kopf

from koordqueue.cli.run import build_operator, configure_logging
from koordqueue.kube.controller import Controller
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
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 60.0) -> RunningController:
        # warnings and errors only: the controller thread outlives each test's output capture
        configure_logging("console", "warning")
        controller, registry = build_operator(self.settings)
        self.controller = controller
        ready = threading.Event()

        def run() -> None:
            try:
                asyncio.run(
                    kopf.operator(
                        registry=registry,
                        clusterwide=True,
                        standalone=True,
                        stop_flag=self._stop,
                        ready_flag=ready,
                    )
                )
            except BaseException as exc:  # surfaced by start()/stop()
                self._error = exc

        self._thread = threading.Thread(target=run, name="koordqueue-controller", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not controller.ready.is_set():
            if self._error is not None:
                raise RuntimeError(f"controller failed to start: {self._error!r}") from self._error
            if time.monotonic() > deadline:
                raise TimeoutError("controller did not finish its start-up resync")
            time.sleep(0.05)
        return self

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise RuntimeError("controller thread did not stop")

    def __enter__(self) -> RunningController:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
