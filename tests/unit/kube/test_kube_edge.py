"""The Kubernetes edge's pure parts: paths, retries, drift detection, event aggregation, flags."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from koordqueue.cli.flags import FLAGS, add_flags, flags_reference_markdown, settings_from_args
from koordqueue.domain.queue_derivation import derive_queue
from koordqueue.kube.api import ELASTIC_QUOTA, EVENT, NODE, QUEUE_UNIT, ApiError, with_retries
from koordqueue.kube.events import EventRecorder
from koordqueue.kube.queue_sync import desired_manifest, queue_drifted
from koordqueue.kube.settings import ControllerSettings


def test_paths_for_namespaced_cluster_and_core_resources() -> None:
    assert QUEUE_UNIT.path("ns", "u", "status") == (
        "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ns/queueunits/u/status"
    )
    assert ELASTIC_QUOTA.path() == "/apis/scheduling.sigs.k8s.io/v1alpha1/elasticquotas"
    assert EVENT.path("default") == "/api/v1/namespaces/default/events"
    assert NODE.path("ignored", "n1") == "/api/v1/nodes/n1"


def test_retries_transient_errors_then_succeeds() -> None:
    calls: list[int] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise ApiError(503, "Unavailable", "etcd leader changed", "PATCH", "/x")
        return "ok"

    assert with_retries(flaky, sleep=lambda s: None) == "ok"
    assert len(calls) == 3


def test_does_not_retry_a_client_error() -> None:
    def invalid() -> None:
        raise ApiError(422, "Invalid", "spec.max.cpu: bad", "PATCH", "/x")

    with pytest.raises(ApiError, match=r"spec\.max\.cpu"):
        with_retries(invalid, sleep=lambda s: None)


def test_conflicts_are_retried_and_the_last_one_raised() -> None:
    attempts: list[int] = []

    def conflict() -> None:
        attempts.append(1)
        raise ApiError(409, "Conflict", "the object has been modified", "PATCH", "/x")

    with pytest.raises(ApiError):
        with_retries(conflict, attempts=4, sleep=lambda s: None)
    assert len(attempts) == 4


def quota_obj(**labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "q", "labels": labels, "annotations": {"koord-queue/max-depth": "3"}}
    }


def test_live_queue_matching_the_quota_has_not_drifted() -> None:
    desired = derive_queue(quota_obj())
    live = desired_manifest(desired)
    live["metadata"]["annotations"]["foreign/key"] = "kept"
    assert not queue_drifted(live, desired)


def test_hand_edited_policy_is_drift() -> None:
    desired = derive_queue(quota_obj(**{"koord-queue/queue-policy": "Block"}))
    live = desired_manifest(desired)
    live["spec"]["queuePolicy"] = "Priority"
    assert queue_drifted(live, desired)


class FakeApi:
    """Records calls; answers like the API server would for events."""

    def __init__(self) -> None:
        self.created: list[dict[str, Any]] = []
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def create(
        self, kind: Any, body: dict[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        self.created.append(body)
        return {**body, "metadata": {**body["metadata"], "name": f"ev{len(self.created)}"}}

    def merge_patch(
        self,
        kind: Any,
        name: str,
        patch: dict[str, Any],
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        self.patched.append((name, patch))
        return {}


def test_repeated_events_are_aggregated_into_one_with_a_count() -> None:
    api = FakeApi()
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    unit = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "QueueUnit",
        "metadata": {"name": "u", "namespace": "ns", "uid": "1"},
    }
    for _ in range(3):
        assert recorder.record(
            unit, "Warning", "FailedScheduling", "limited quotaName:q, limited resKey:cpu,"
        )
    assert len(api.created) == 1
    assert [p["count"] for _, p in api.patched] == [2, 3]
    event = api.created[0]
    assert event["involvedObject"]["uid"] == "1" and event["type"] == "Warning"
    assert event["source"]["component"] == "koord-queue"


def test_a_different_message_is_a_new_event() -> None:
    api = FakeApi()
    recorder = EventRecorder(api)  # type: ignore[arg-type]
    unit = {"kind": "QueueUnit", "metadata": {"name": "u", "namespace": "ns", "uid": "1"}}
    recorder.record(unit, "Warning", "FailedScheduling", "a")
    recorder.record(unit, "Warning", "FailedScheduling", "b")
    assert len(api.created) == 2


def test_event_api_failure_is_logged_not_raised() -> None:
    class Refusing(FakeApi):
        def create(
            self, kind: Any, body: dict[str, Any], namespace: str | None = None
        ) -> dict[str, Any]:
            raise ApiError(403, "Forbidden", "events is forbidden", "POST", "/api/v1/events")

    recorder = EventRecorder(Refusing())  # type: ignore[arg-type]
    assert recorder.record({"metadata": {"name": "u"}}, "Warning", "X", "y") is False


def test_flags_parse_into_settings_with_env_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOORDQUEUE_ADMISSION_PERIOD", "2.5")
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    args = parser.parse_args(["--oversellrate", "1.5", "--enableParentLimit", "true"])
    settings = settings_from_args(args, ControllerSettings)
    assert settings.oversell_rate == "1.5"
    assert settings.enable_parent_limit is True
    assert settings.admission_period == 2.5


def test_non_positive_period_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    with pytest.raises(SystemExit):
        parser.parse_args(["--admission-period", "0"])
    assert "must be > 0" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--job-workers", "--api-writers"])
@pytest.mark.parametrize("value", ["0", "-3", "2.5", "many"])
def test_worker_counts_must_be_positive_integers(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    with pytest.raises(SystemExit):
        parser.parse_args([flag, value])
    assert flag in capsys.readouterr().err


def test_api_writers_size_the_connection_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KOORDQUEUE_API_WRITERS", "100")
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    settings = settings_from_args(parser.parse_args([]), ControllerSettings)
    assert settings.api_writers == 100
    assert settings.api_connections > settings.api_writers


def test_configuration_reference_lists_every_flag() -> None:
    text = flags_reference_markdown()
    for flag in FLAGS:
        assert f"`{flag.name}`" in text and flag.env in text


@pytest.mark.parametrize(
    ("env", "value", "says"),
    [
        ("KOORDQUEUE_FEATURE_GATES", "MaximumExecutionTime=true",
         "needs QueueUnitActive enabled too"),
        ("KOORDQUEUE_ADMISSION_PERIOD", "-1", "must be > 0"),
    ],
)
def test_a_bad_environment_value_is_a_usage_error_naming_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: str, value: str,
    says: str,
) -> None:
    """It raised ArgumentTypeError out of add_flags (a traceback, exit 1) before."""
    monkeypatch.setenv(env, value)
    parser = argparse.ArgumentParser()
    add_flags(parser, ControllerSettings)
    with pytest.raises(SystemExit) as caught:
        parser.parse_args([])
    assert caught.value.code == 2
    assert says in capsys.readouterr().err
