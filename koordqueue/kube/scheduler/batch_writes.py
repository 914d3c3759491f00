"""A batch of the scheduler's POSTs (binds, then their `Scheduled` events) sent together.

Why: each bind and each event was its own blocking request, four binds one after another per
pool thread, and the events one at a time from a single writer thread that fell behind a
burst of binds (its queue overflowed and dropped them). Here a batch goes out at once on
libcurl's multi interface from one pool thread (`curl_transport.send_all`): the requests are
in flight together, the thread waits once for all of them with the GIL released, and the
Python work per request is setting options and reading the answer.

The answers mean what `KubeApi.request`'s do: a 2xx answer is decoded, an error answer is
an `ApiError` (`api_error`), and an answer that says when to come back (429 / 5xx with
`Retry-After`) is sent again through `KubeApi.request`, which waits it out as for any other
request. The leader-election fence is asked before the batch and, per request, on the
connection right before its bytes leave (a refused request is `not_leader`). Clients that
are not a direct libcurl connection (a proxy, a test double) get the same results one
request at a time through `request`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import orjson

from koordqueue.kube.api import ApiError, KubeApi, loads
from koordqueue.kube.api_errors import api_error
from koordqueue.kube.curl_transport import Answer, CurlTransport, Request, send_all, usable
from koordqueue.kube.transport import FencedError, not_leader

HTTP2_ENV: Final = "KOORDQUEUE_BATCH_HTTP2"
"""Unset or 1: a batch's requests are multiplexed on one HTTP/2 connection per pool thread
(TLS; a cleartext server is spoken HTTP/1.1), as client-go's are. 0: each request in flight
has a kept-alive HTTP/1.1 connection of its own from the thread's multi handle.

Why HTTP/2: with HTTP/1.1 the first batches of a burst opened a TLS connection per bind (a
session of 67 binds: 67 handshakes at once, its binds 85-194 ms in flight against 20-30 ms
once warm), and those first pods set a 2,000-pod burst's p99: 0.22 / 0.23 / 0.12 s in three
runs, 0.12-0.13 with the connections opened beforehand, 0.17 / 0.13 / 0.14 over HTTP/2 at
less CPU per pod (0.67-0.75 against 0.77-0.81 ms). An HTTP/2 connection is one handshake per
pool thread, and a burst after an idle spell (libcurl closes connections idle 118 s) finds
the same. (On 2026-12-05, before the client certificate fix, one run had favoured HTTP/1.1.)"""

Post = tuple[str, Mapping[str, Any]]
"""(path, JSON body) of one POST."""


class Requester(Protocol):
    def request(self, method: str, path: str, body: object = None) -> dict[str, Any]: ...


class BatchWriter:
    """`post_all` for one API client; thread-safe (libcurl handles are per thread)."""

    def __init__(self, api: Requester, http2: bool | None = None) -> None:
        self.api = api
        self.http2 = os.environ.get(HTTP2_ENV, "1") != "0" if http2 is None else http2
        self.transport: CurlTransport | None = None
        if isinstance(api, KubeApi) and _direct(api):
            self.transport = CurlTransport(api.api_client, api.timeout, api.fence)

    def post_all(self, posts: Sequence[Post]) -> list[dict[str, Any] | ApiError]:
        """Each POST's decoded answer or its ApiError, in order."""
        transport = self.transport
        if transport is None or len(posts) < 2:
            return [self._one(path, body) for path, body in posts]
        fence = transport.fence
        if fence is not None and not fence():  # early, as KubeApi: nothing is prepared
            return [not_leader("POST", path) for path, _body in posts]
        headers = {**transport.headers, "Accept": "application/json",
                   "Content-Type": "application/json"}  # fmt: skip
        requests: list[Request] = [
            ("POST", path, orjson.dumps(body), dict(headers)) for path, body in posts
        ]
        answers = send_all(transport, requests, self.http2)
        return [self._read(path, body, answer)
                for (path, body), answer in zip(posts, answers, strict=True)]  # fmt: skip

    def _read(
        self, path: str, body: Mapping[str, Any], answer: Answer | Exception
    ) -> dict[str, Any] | ApiError:
        if isinstance(answer, FencedError):
            return not_leader("POST", path)
        if isinstance(answer, Exception):  # the connection failed: retryable, as KubeApi's
            return ApiError(0, type(answer).__name__, str(answer), "POST", path)
        raw = answer.data or b"{}"
        if 200 <= answer.status < 300:
            parsed: dict[str, Any] = loads(raw)
            return parsed
        error = api_error(answer.status, answer.reason, raw, "POST", path, answer.headers)
        if error.retry_after is not None:  # KubeApi.request waits it out and sends again
            return self._one(path, body)
        return error

    def _one(self, path: str, body: Mapping[str, Any]) -> dict[str, Any] | ApiError:
        try:
            return self.api.request("POST", path, body=body)
        except ApiError as exc:
            return exc


def _direct(api: KubeApi) -> bool:
    """A real client (urllib3's pool behind it) whose connection libcurl can make."""
    client = api.api_client
    return hasattr(getattr(client, "rest_client", None), "pool_manager") and usable(client)
