"""`koordqueue run --integrations all` (issue 26): every integration whose kind the cluster
serves is registered; each other one is skipped with one log line; a kind served at two
versions (MPIJob v2beta1 and Aliyun's v1alpha1) gets one reconciler, the first listed."""

from __future__ import annotations

import logging

import pytest
import structlog
from structlog.testing import capture_logs

from koordqueue.cli.flags import _integrations
from koordqueue.domain.integrations import INTEGRATIONS, MPI_JOB
from koordqueue.kube.controller import integrations as reconciler_module
from koordqueue.kube.controller.integrations import CRD, WorkloadReconciler
from tests.unit.kube.memory_api import MemoryApi
from tests.unit.kube.test_integration_wiring import install_crd, make

MISSING = "integration skipped: its CRD is not installed"
TWIN = "integration skipped: its kind is served by another version"


def test_the_flag_takes_all_as_every_name() -> None:
    assert _integrations("all") == ",".join(INTEGRATIONS)


def test_all_serves_the_installed_kinds_and_names_each_skipped_one_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = MemoryApi()
    install_crd(api, "tfjobs", "kubeflow.org", "v1")
    install_crd(api, "rayjobs", "ray.io", "v1")
    install_crd(api, "workflows", "argoproj.io", "v1alpha1")
    api.create(  # one CRD serving both MPIJob versions
        CRD,
        {
            "metadata": {"name": "mpijobs.kubeflow.org"},
            "spec": {
                "group": "kubeflow.org",
                "versions": [
                    {"name": "v2beta1", "served": True},
                    {"name": "v1alpha1", "served": True},
                ],
            },
        },
    )
    old_config = structlog.get_config()
    structlog.configure(
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        cache_logger_on_first_use=False,
    )
    monkeypatch.setattr(reconciler_module, "log", structlog.get_logger(reconciler_module.__name__))
    with capture_logs() as logs:
        c = make(api, ",".join(INTEGRATIONS))
    structlog.configure(**old_config)
    assert set(c.consumers) == {"Job", "Pod", "MPIJob", "TFJob", "RayJob", "Workflow"}
    served = c.consumers["MPIJob"]
    assert isinstance(served, WorkloadReconciler) and served.integration is MPI_JOB
    skipped = [e["integration"] for e in logs if e["event"] == MISSING]
    installed = {
        "batch/job",
        "pod",
        "kubeflow.org/mpijob",
        "kubeflow.org/mpijob-v1alpha1",  # a twin: logged as such, not as missing
        "kubeflow.org/tfjob",
        "ray.io/rayjob",
        "argoproj.io/workflow",
    }
    # every other kind is missing, each named once (the list grows as kinds are added)
    assert sorted(skipped) == sorted(set(INTEGRATIONS) - installed)
    assert {"kubeflow.org/pytorchjob", "ray.io/raycluster"} <= set(skipped)
    twins = [(e["integration"], e["served_by"]) for e in logs if e["event"] == TWIN]
    assert twins == [("kubeflow.org/mpijob-v1alpha1", "kubeflow.org/mpijob")]


def test_the_v1alpha1_crd_alone_serves_aliyuns_mpijob() -> None:
    api = MemoryApi()
    install_crd(api, "mpijobs", "kubeflow.org", "v1alpha1")
    c = make(api, ",".join(INTEGRATIONS))
    served = c.consumers["MPIJob"]
    assert isinstance(served, WorkloadReconciler)
    assert served.integration.name == "kubeflow.org/mpijob-v1alpha1"
