"""A fault-injecting HTTPS proxy on loopback, between a client under test and kube-apiserver.

    with FaultProxy(plane, [Rule("429", share=0.2)], faults_for=15.0) as proxy:
        proxy.write_kubeconfig(tmp / "kubeconfig")   # point the controller at it

It terminates TLS with the plane's serving certificate (so the plane's CA and kubeconfig
client certificate work unchanged) and forwards each HTTP/1.1 request on its own upstream
connection with the plane's admin certificate, with `Connection: close` so the response ends
where the upstream connection does (watches included). Before forwarding, each rule that
matches a request's method and path rolls for it (its `share` probability, from a seeded
random source); the first that fires decides:

* ``"429"``, ``"500"``, ``"409"``, ``"403"``...: answer that status with a Kubernetes Status
  body, the request never reaches the server; a 429 carries `Retry-After` (the rule's
  `retry_after`, 1 s unless told) and APF's `X-Kubernetes-PF-FlowSchema-UID` /
  `-PriorityLevel-UID` headers, as the API server's throttling does; a rule's `retry_after`
  on a 5xx adds the header there too;
* ``"drop"``: close the connection without an answer (the request never reaches the server);
* ``"lose-reply"``: forward the request, wait for the whole answer, then close the connection
  without passing it on (the write happened, the client cannot know);
* ``"stall"``: forward, pass on the response head and then nothing more, holding the
  connection open (a watch that never ends and never delivers: a half-dead connection);
  with `after`, the response is passed on for that many seconds first, then nothing more (a
  watch that delivered, then died silently: a NAT entry or a middlebox that lost one side);
  with `after=math.inf`, until the test calls `silence()`.

A rule with `times` fires at most that many times (e.g. only the first watch stalls).

Faults fire only during the first `faults_for` seconds after start (bounded in time); every
request after that passes. `fired` counts what fired, by action; `requests` records every
request (its time, method, target and the action taken, None when it passed). At run time,
`set_rules` replaces the rules and starts a new fault window, and `cut()` closes every
connection in progress (a watch broken midway, as by a restart of a proxy in between).
Loopback only.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import random
import re
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.controlplane.harness import ControlPlane, write_kubeconfig

REASONS = {403: "Forbidden", 409: "Conflict", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable"}
STATUS_REASON = {403: "Forbidden", 409: "Conflict", 429: "TooManyRequests",
                 500: "InternalError", 503: "ServiceUnavailable"}
FLOW_SCHEMA_UID = "faultproxy-flowschema-uid"
PRIORITY_LEVEL_UID = "faultproxy-prioritylevel-uid"


@dataclass(frozen=True)
class Rule:
    """`action` on a `share` of the requests whose method is in `methods` (all when empty)
    and whose path (with query) matches the `path` regex (all when empty); at most `times`
    times (no bound when None); a stall goes silent `after` seconds (0: at once)."""

    action: str
    share: float = 1.0
    methods: frozenset[str] = field(default_factory=frozenset)
    path: str = ""
    times: int | None = None
    after: float = 0.0
    retry_after: int | None = None

    def matches(self, method: str, target: str) -> bool:
        if self.methods and method not in self.methods:
            return False
        return not self.path or re.search(self.path, target) is not None


class FaultProxy:
    def __init__(
        self, plane: ControlPlane, rules: list[Rule], *, faults_for: float = 15.0, seed: int = 0
    ) -> None:
        assert plane.server is not None, "control plane not started"
        self.rules = list(rules)
        self.faults_for = faults_for
        self.fired: collections.Counter[str] = collections.Counter()
        self.forwarded = 0
        self.silenced: list[float] = []  # time.monotonic() each stalled stream went silent
        self.requests: list[tuple[float, str, str, str | None]] = []
        """(time.monotonic(), method, target, action or None) of every request, in order."""
        self._live: set[asyncio.StreamWriter] = set()  # connections being served
        self._uses: collections.Counter[int] = collections.Counter()  # fired, by rule index
        self._silence = threading.Event()
        self._rng = random.Random(seed)
        self._plane = plane
        hostport = plane.server.removeprefix("https://")
        self._up_host, up_port = hostport.rsplit(":", 1)
        self._up_port = int(up_port)
        pki = plane.pki
        self._server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._server_ctx.load_cert_chain(str(pki["serving.crt"]), str(pki["serving.key"]))
        self._server_ctx.set_alpn_protocols(["http/1.1"])
        self._client_ctx = ssl.create_default_context(cafile=str(pki["ca.crt"]))
        self._client_ctx.load_cert_chain(str(pki["admin.crt"]), str(pki["admin.key"]))
        self._client_ctx.set_alpn_protocols(["http/1.1"])
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="faultproxy")
        self._server: asyncio.Server | None = None
        self._stopping: asyncio.Event | None = None
        self._started_at = 0.0
        self.port = 0

    # -- public ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def faulting(self) -> bool:
        return time.monotonic() - self._started_at < self.faults_for

    def start(self) -> FaultProxy:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._listen(), self._loop).result(10)
        self._started_at = time.monotonic()
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._stopping is not None and self._server is not None
            self._stopping.set()
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def set_rules(self, rules: list[Rule], faults_for: float) -> None:
        """Replace the rules (`times` counted afresh); they fire for `faults_for` s from now."""
        def swap() -> None:
            self.rules = list(rules)
            self._uses.clear()
            self.faults_for = faults_for
            self._started_at = time.monotonic()

        self._loop.call_soon_threadsafe(swap)

    def cut(self) -> int:
        """Close every connection in progress (clients see a reset midway); how many."""
        async def close_all() -> int:
            live = list(self._live)
            for writer in live:
                transport = writer.transport
                with contextlib.suppress(Exception):
                    transport.abort()
            return len(live)

        return asyncio.run_coroutine_threadsafe(close_all(), self._loop).result(10)

    def silence(self) -> None:
        """Every stalled stream still delivering (its `after` not yet reached) goes silent now."""
        self._silence.set()

    def write_kubeconfig(self, path: Path) -> Path:
        write_kubeconfig(path, self.url, self._plane.pki)
        return path

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- internals ------------------------------------------------------------------------

    async def _listen(self) -> None:
        self._stopping = asyncio.Event()
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", 0, ssl=self._server_ctx
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def _pick(self, method: str, target: str) -> Rule | None:
        if not self.faulting:
            return None
        for index, rule in enumerate(self.rules):  # each matching rule rolls its own die
            if rule.times is not None and self._uses[index] >= rule.times:
                continue
            if rule.matches(method, target) and self._rng.random() < rule.share:
                self._uses[index] += 1
                self.fired[rule.action] += 1
                return rule  # the first hit fires
        return None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._live.add(writer)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = [ln for ln in lines[1:] if ln]
                length = 0
                for ln in headers:
                    name, _, value = ln.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = await reader.readexactly(length) if length else b""
                rule = self._pick(method, target)
                action = rule.action if rule is not None else None
                self.requests.append((time.monotonic(), method, target, action))
                if rule is None or rule.action in ("lose-reply", "stall"):
                    await self._forward(method, target, headers, body, writer, rule)
                    return  # the upstream answer ended with its connection
                if action == "drop":
                    return
                assert rule is not None
                self._answer(writer, int(action), rule.retry_after)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, ValueError):
            return
        finally:
            self._live.discard(writer)
            with contextlib.suppress(Exception):
                writer.close()

    def _answer(self, writer: asyncio.StreamWriter, code: int, retry_after: int | None) -> None:
        body = json.dumps({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"injected by the fault proxy ({code})",
            "reason": STATUS_REASON.get(code, "InternalError"), "code": code,
        }).encode()
        extra = ""
        if code == 429:
            extra = (f"Retry-After: {1 if retry_after is None else retry_after}\r\n"
                     f"X-Kubernetes-PF-FlowSchema-UID: {FLOW_SCHEMA_UID}\r\n"
                     f"X-Kubernetes-PF-PriorityLevel-UID: {PRIORITY_LEVEL_UID}\r\n")
        elif retry_after is not None:
            extra = f"Retry-After: {retry_after}\r\n"
        writer.write(
            f"HTTP/1.1 {code} {REASONS.get(code, 'Error')}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}\r\n".encode() + body
        )

    async def _forward(
        self, method: str, target: str, headers: list[str], body: bytes,
        writer: asyncio.StreamWriter, rule: Rule | None,
    ) -> None:
        action = rule.action if rule is not None else None
        self.forwarded += 1
        up_reader, up_writer = await asyncio.open_connection(
            self._up_host, self._up_port, ssl=self._client_ctx
        )
        try:
            kept = [h for h in headers
                    if h.split(":", 1)[0].strip().lower() not in ("connection", "keep-alive")]
            up_writer.write(
                (f"{method} {target} HTTP/1.1\r\n" + "\r\n".join([*kept, "Connection: close"])
                 + "\r\n\r\n").encode("latin-1") + body
            )
            await up_writer.drain()
            if action == "lose-reply":
                while await up_reader.read(65536):
                    pass
                return
            if action == "stall":
                assert rule is not None and self._stopping is not None
                writer.write(await up_reader.readuntil(b"\r\n\r\n"))
                await writer.drain()
                silent_at = time.monotonic() + rule.after
                # deliver until `after`, or until silence() is called
                while not self._silence.is_set() and (left := silent_at - time.monotonic()) > 0:
                    try:
                        chunk = await asyncio.wait_for(up_reader.read(65536), min(left, 0.1))
                    except TimeoutError:
                        continue
                    if not chunk:
                        return  # the server ended it before it could go silent
                    writer.write(chunk)
                    await writer.drain()
                self.silenced.append(time.monotonic())
                await self._stopping.wait()
                return
            while chunk := await up_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                up_writer.close()


def counts(proxy: FaultProxy) -> dict[str, Any]:
    """What fired and how much passed, for a test's failure message."""
    return {"fired": dict(proxy.fired), "forwarded": proxy.forwarded}
