"""An Event write refused for a passing reason is tried again, as client-go's recorder does
(bench/soak.py: the fuzzer's QuotaCycle Event met one 500 from the api-500 fault and was never
written; the fuzzer waited for it until the end of the run). The first test fails without the
retry (checked with EVENT_ATTEMPTS = 1: one 500 and the Event is lost, record() is False)."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.api import ApiError
from koordqueue.kube.api_errors import FENCED
from koordqueue.kube.events import EVENT_ATTEMPTS, EventRecorder

QUOTA = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
         "metadata": {"name": "q", "namespace": "ns", "uid": "u"}}


class Refusing:
    """Refuses the first `refusals` writes with `status`, then takes them."""

    def __init__(self, refusals: int, status: int) -> None:
        self.refusals, self.status = refusals, status
        self.calls: list[str] = []

    def _maybe_refuse(self, what: str) -> None:
        self.calls.append(what)
        if self.refusals:
            self.refusals -= 1
            raise ApiError(self.status, "refused", "by the test", "POST", "/events")

    def create(self, kind: Any, body: dict[str, Any], namespace: str | None = None) -> Any:
        self._maybe_refuse("create")
        return {"metadata": {"name": body["metadata"]["name"]}}

    def merge_patch(self, *args: Any, **kwargs: Any) -> Any:
        self._maybe_refuse("patch")
        return {}


def test_an_event_refused_for_a_passing_reason_is_written_on_a_retry() -> None:
    for status in (500, 503, 429, 0):  # 0: the connection was lost
        api, slept = Refusing(2, status), []
        recorder = EventRecorder(api, sleep=slept.append)  # type: ignore[arg-type]
        assert recorder.record(QUOTA, "Warning", "QuotaCycle", "q is its own parent")
        assert api.calls == ["create"] * 3
        assert len(slept) == 2 and slept[1] > slept[0] > 0
        # a repeat bumps the count with a patch, retried the same way
        api.refusals = 1
        assert recorder.record(QUOTA, "Warning", "QuotaCycle", "q is its own parent")
        assert api.calls[3:] == ["patch", "patch"]


def test_a_refusal_that_a_retry_cannot_fix_is_not_retried() -> None:
    for status in (403, 422, FENCED):  # forbidden, invalid, not the leader any more
        api, slept = Refusing(1, status), []
        recorder = EventRecorder(api, sleep=slept.append)  # type: ignore[arg-type]
        assert not recorder.record(QUOTA, "Warning", "QuotaCycle", "q is its own parent")
        assert api.calls == ["create"] and slept == []


def test_the_retries_end() -> None:
    api, slept = Refusing(100, 500), []
    recorder = EventRecorder(api, sleep=slept.append)  # type: ignore[arg-type]
    assert not recorder.record(QUOTA, "Warning", "QuotaCycle", "q is its own parent")
    assert len(api.calls) == EVENT_ATTEMPTS and len(slept) == EVENT_ATTEMPTS - 1


def test_a_stopping_recorder_tries_each_event_once() -> None:
    """A controller stopping on SIGTERM flushes its Events within the grace period: the
    dropped-connections fault test took 10.4 s to exit while Events slept between retries."""
    api, slept = Refusing(refusals=10, status=500), []
    recorder = EventRecorder(api, sleep=slept.append)  # type: ignore[arg-type]
    recorder.stop_retrying()
    assert not recorder.record(QUOTA, "Warning", "QuotaCycle", "q is its own parent")
    assert api.calls == ["create"] and slept == []
