"""The API's typed errors and the retry rules every caller shares.

`ApiError` is a non-2xx answer with the server's Status message; `with_retries` and
`retry_transient` retry what client-go retries (429, 5xx, a lost connection), waiting out a
`Retry-After` longer than their own back-off step.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from typing import Final, TypeVar

from kubernetes.client.exceptions import ApiException

from koordqueue.domain.backoff import Backoff, retry

RETRY_AFTER: Final = "Retry-After"
FLOW_SCHEMA_UID: Final = "X-Kubernetes-PF-FlowSchema-UID"
PRIORITY_LEVEL_UID: Final = "X-Kubernetes-PF-PriorityLevel-UID"
"""API Priority and Fairness names the flow schema and priority level that classified a
request in these two headers of every answer; client-go quotes the flow schema's in the
reason of a 429's retry."""
RETRY_AFTER_CAP: Final = 30.0
"""Seconds: the longest `Retry-After` we wait out before one retry (the reflector's back-off
cap); the server's usual value is 1 s (APF and max-in-flight throttling)."""
FENCED: Final = -1
"""ApiError.status of a write refused locally: this process is not (or no longer) the leader."""
T = TypeVar("T")


class ApiError(Exception):
    """A non-2xx answer, with the server's Status message (what kubectl would print).

    `retry_after`: the seconds a 429 or 5xx answer's `Retry-After` header asked for (None
    without one), which every retry here waits at least (`wait_hint`), as client-go's
    request retry does; `flow_schema` / `priority_level`: APF's classification of a
    throttled request (its `X-Kubernetes-PF-*` headers), quoted in the message.
    """

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        method: str,
        path: str,
        *,
        retry_after: float | None = None,
        flow_schema: str = "",
        priority_level: str = "",
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.flow_schema = flow_schema
        self.priority_level = priority_level
        text = f"{method} {path}: {status} {reason}: {message}"
        if retry_after is not None:
            text += f" (retry after {retry_after:g} s"
            if status == 429:  # client-go's retry reason for APF throttling
                text += (f"; server-side throttling, FlowSchema UID {flow_schema!r},"
                         f" PriorityLevel UID {priority_level!r}")
            text += ")"
        super().__init__(text)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def retryable(self) -> bool:
        return self.status in (0, 429, 500, 502, 503, 504)

    @property
    def fenced(self) -> bool:
        return self.status == FENCED

    @property
    def wait_hint(self) -> float:
        """Seconds to wait at least before retrying: the server's `Retry-After`, capped."""
        return min(self.retry_after, RETRY_AFTER_CAP) if self.retry_after else 0.0


def retry_after(status: int, headers: Mapping[str, str] | None) -> float | None:
    """The `Retry-After` of a 429 or 5xx answer in whole seconds, None when absent or not a
    number (client-go's checkWait: only those statuses, only the seconds form)."""
    if headers is None or not (status == 429 or status >= 500):
        return None
    raw = headers.get(RETRY_AFTER)
    if raw is None:
        return None
    try:
        seconds = int(str(raw).strip())
    except ValueError:
        return None
    return float(seconds) if seconds >= 0 else None


def wait_hint(exc: BaseException) -> float:
    """The least wait before retrying after `exc`: its `Retry-After` (an ApiError, or the
    kubernetes client's ApiException a watch raises), else 0."""
    if isinstance(exc, ApiError):
        return exc.wait_hint
    if isinstance(exc, ApiException):
        seconds = retry_after(int(exc.status or 0), exc.headers)
        return min(seconds, RETRY_AFTER_CAP) if seconds else 0.0
    return 0.0


def api_error(  # noqa: PLR0917 (the answer's parts, in the order they come)
    status: int,
    reason: str,
    body: object,
    method: str,
    path: str,
    headers: Mapping[str, str] | None = None,
) -> ApiError:
    message = ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str) and body:
        try:
            message = str(json.loads(body).get("message") or body)
        except (ValueError, AttributeError):
            message = body
    return ApiError(
        status, reason, message, method, path,
        retry_after=retry_after(status, headers),
        flow_schema=str((headers or {}).get(FLOW_SCHEMA_UID) or ""),
        priority_level=str((headers or {}).get(PRIORITY_LEVEL_UID) or ""),
    )


def with_retries(
    call: Callable[[], T],
    attempts: int = 5,
    base_delay: float = 0.1,
    retry_conflicts: bool = True,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run `call`, retrying transient errors (and conflicts, whose caller re-reads) with backoff.

    A throttled or failing answer's `Retry-After` is waited out when longer than the back-off
    step, as client-go's request retry waits max(back-off, Retry-After): retrying a 429 after
    0.1 s only adds to the load the server is shedding.
    """
    for attempt in range(attempts):
        try:
            return call()
        except ApiError as exc:
            last = attempt == attempts - 1
            if last or not (exc.retryable or (retry_conflicts and exc.conflict)):
                raise
            sleep(max(Backoff(base_delay).delay(attempt), exc.wait_hint))
    raise AssertionError("unreachable")  # pragma: no cover


def retry_transient(
    call: Callable[[], T],
    schedule: Backoff,
    stopped: Callable[[float], bool],
    on_retry: Callable[[Exception, float], None],
) -> T:
    """`call` until it answers, retrying transient ApiErrors (429, 5xx, a lost connection)
    after `schedule`'s delays for as long as it takes, as client-go's reflector retries its
    list: the start-ups of the controller and the scheduler (kopf would retry a failed
    start-up only after 60 s). Other errors go up at once; so does the last one when
    `stopped(delay)` says the process is shutting down. A `Retry-After` longer than the
    schedule's step is waited out instead."""
    return retry(call, schedule, _transient, stopped, on_retry, at_least=wait_hint)


def _transient(exc: Exception) -> bool:
    return isinstance(exc, ApiError) and exc.retryable
