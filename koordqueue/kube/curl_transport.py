"""The API server's connection through libcurl (pycurl): the same requests as `Transport`,
at less than half its CPU.

Why: a controller's CPU per admission is mostly its four API calls per Job (create the unit,
patch its status, resume the Job, record the event), and most of a call's Python time was in
urllib3 and http.client around the socket: header objects, `email`-based response header
parsing, the pool's bookkeeping. libcurl does all of it in C; the Python left is setting a few
options and decoding the answer. Measured on the test control plane, one thread, 1,500
ConfigMap merge patches (bench/bench_transport.py): 499 us CPU per request through
`Transport` against 213 us here.

One libcurl handle per thread (`threading.local`): a handle keeps its own kept-alive
connection, as each of urllib3's pooled connections did for the thread that held it, and a
handle is never shared between threads (libcurl's rule).

The leader-election fence keeps its place (transport.py explains why it matters): libcurl
calls PREREQFUNCTION after the connection is open or reused (TCP, TLS) and right before the
request goes out; a refusal there aborts the transfer with nothing sent, raised as
`FencedError`. As with urllib3, an attempt whose connection cannot be made is tried again
(up to three times, each asking the fence again), and so is an idempotent verb's lost answer;
a create's or patch's lost answer is not (the callers' own retries decide). One difference:
libcurl itself sends a request again, on a fresh connection, when a kept-alive connection
closes before any byte of the answer (its rule for reused connections; the fence is asked
again). urllib3 raised there, and the callers re-sent the write themselves (with_retries), so
what reaches the server is the same; a write carrying a resourceVersion meets a conflict if
the first copy had landed, as before.

Used when the configuration is a direct connection (no proxy, no TLS server name override);
anything else keeps `Transport`.
"""

from __future__ import annotations

import io
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final

import pycurl
from kubernetes import client as k8s_client
from urllib3 import HTTPHeaderDict

from koordqueue.kube.transport import FencedError, add_token, client_headers

RETRIES: Final = 3
"""Failed attempts tried again, as urllib3.Retry(3) did: any verb whose connection could not
be made, and the idempotent verbs after any failure (a timeout, a dropped connection)."""
IDEMPOTENT: Final = frozenset({"GET", "PUT", "DELETE", "HEAD", "OPTIONS", "TRACE"})
"""urllib3's Retry.DEFAULT_ALLOWED_METHODS: sent twice, they do no harm."""
UNCONNECTED: Final = frozenset({
    pycurl.E_COULDNT_RESOLVE_HOST,
    pycurl.E_COULDNT_CONNECT,
    pycurl.E_SSL_CONNECT_ERROR,
})
"""libcurl's errors for a request that never left: safe to send again, whatever the verb."""
ACCEPT_ENCODING: Final = "Accept-Encoding"
"""A request header `prepare` hands to libcurl instead (CURLOPT_ACCEPT_ENCODING: it sends it
and decodes the answer)."""
UPLOAD_BUFFER: Final = 16 * 1024
"""Bytes of each handle's upload buffer: libcurl's minimum, against its 64 KiB default. A
controller holds a handle per API-calling thread (~110 with the 64 writers), and our request
bodies are a few KiB (a larger one goes out in several pieces): 3.4 MB less RSS per 64
handles with a TLS connection each (measured in isolation, libcurl 8.23, 53 KB a handle)."""


PEM_CERTIFICATE: Final = b"-----BEGIN CERTIFICATE-----"
PEM_END: Final = b"-----END CERTIFICATE-----"


def explicit_chain(pem: bytes) -> bytes | None:
    """A client certificate file's certificates as a PEM chain OpenSSL sends as it is (None:
    no certificate in it).

    A file of one certificate leaves OpenSSL to complete the chain from the trust store, and
    the cluster's CA, which signs the API server's certificate too (kubeadm's layout), is
    there: every handshake sent leaf and CA. The API server then verifies each request's
    certificate once through the CA presented as an intermediate and once directly, and
    again for its front-proxy authenticator (two to four ECDSA verifications a request
    where one will do; Go's clients send the leaf alone). Giving the leaf twice makes the
    chain explicit: nothing is added from the store, and the copy, which signs nothing, is
    never a candidate issuer. API server CPU per POST 0.90–0.97 -> 0.78 ms (3,000 Event
    creates from 8 threads, twice each, the test control plane; pprof: request
    authentication was 21 % of its CPU in a placement burst). A file that already holds a
    chain is sent as written."""
    blocks = []
    at = pem.find(PEM_CERTIFICATE)
    while at >= 0:
        end = pem.find(PEM_END, at)
        if end < 0:
            break
        blocks.append(pem[at:end + len(PEM_END)] + b"\n")
        at = pem.find(PEM_CERTIFICATE, end)
    if not blocks:
        return None
    return blocks[0] * 2 if len(blocks) == 1 else b"".join(blocks)


class ClientChain:
    """The client certificate file as `explicit_chain`, read again when the file changes
    (looked at no more than once a second): a rotated certificate reaches new connections,
    as when libcurl read the file itself."""

    def __init__(self, path: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self._clock = clock
        self._looked = -math.inf
        self._stamp: tuple[int, int] | None = None
        self._chain: bytes | None = None

    def current(self) -> bytes | None:
        """The chain to present (None: the file cannot be read; libcurl reads it and says so)."""
        now = self._clock()
        if now - self._looked < 1.0:
            return self._chain
        self._looked = now
        try:
            status = os.stat(self.path)
            stamp = (status.st_mtime_ns, status.st_size)
            if stamp != self._stamp:
                with open(self.path, "rb") as source:
                    chain = explicit_chain(source.read())
                if chain is not None:  # (none: caught mid-write; the last one stands)
                    self._chain, self._stamp = chain, stamp
        except OSError:
            return self._chain
        return self._chain


@dataclass(frozen=True, slots=True)
class Answer:
    """What KubeApi reads of a response: status, reason, body, headers."""

    status: int
    reason: str
    data: bytes
    headers: Mapping[str, str]


def usable(api_client: k8s_client.ApiClient) -> bool:
    """Whether libcurl can make this client's connection exactly as urllib3 would."""
    configuration = api_client.configuration
    host = str(configuration.host or "")
    if not host.startswith(("https://", "http://")):
        return False
    return not (configuration.proxy or getattr(configuration, "tls_server_name", None))


class CurlTransport:
    """Requests to one API server, one libcurl handle per calling thread."""

    def __init__(
        self,
        api_client: k8s_client.ApiClient,
        timeout: float,
        fence: Callable[[], bool] | None = None,
    ) -> None:
        configuration = api_client.configuration
        self.configuration = configuration
        self.host = str(configuration.host).rstrip("/")
        self.headers = client_headers(api_client)
        self.timeout_ms = max(1, int(timeout * 1000))
        self.fence = fence
        cert_file = configuration.cert_file
        tls = self.host.startswith("https://")
        self.client_chain = ClientChain(str(cert_file)) if cert_file and tls else None
        """The client certificate to present, made explicit (explicit_chain)."""
        self._local = threading.local()

    def _handle(self) -> _Handle:
        handle: _Handle | None = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._local.handle = _Handle(self)
        return handle

    def send(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> Answer:
        add_token(self.configuration, headers)
        fenced = self.fence is not None and method != "GET"
        handle = self._handle()
        for attempt in range(RETRIES + 1):
            try:
                return handle.perform(method, self.host + path, body, headers, fenced)
            except pycurl.error as exc:
                if handle.refused:
                    raise FencedError from None
                code = exc.args[0] if exc.args else 0
                again = code in UNCONNECTED or method in IDEMPOTENT
                if not again or attempt == RETRIES:
                    raise ConnectionError(f"{method} {path}: {_describe(exc)}") from None
        raise AssertionError("unreachable")  # pragma: no cover


Request = tuple[str, str, bytes | None, dict[str, str]]
"""(method, path with its query, body, headers) for `CurlTransport.send_all`."""


MAX_WAIT: Final = 0.1
"""Seconds a multi handle waits for its sockets when libcurl names no deadline (its advice)."""


class _Multi:
    """One thread's libcurl multi handle and the easy handles it reuses."""

    def __init__(self, transport: CurlTransport, http2: bool) -> None:
        self.multi = pycurl.CurlMulti()
        self.handles = [_Handle(transport, http2)]
        self.http2 = http2

    def handle(self, i: int, transport: CurlTransport) -> _Handle:
        while len(self.handles) <= i:
            self.handles.append(_Handle(transport, self.http2))
        return self.handles[i]

    def run(self) -> dict[int, tuple[int, str]]:
        """Drive every added transfer to its end; id(curl) -> (error code, message) of
        those that failed (select releases the GIL while waiting).

        The wait is what libcurl asks for (`timeout`), else 0.1 s, never a blind second:
        while libcurl works without a socket to watch (its fd set empty), select waits out
        its whole timeout, and a 1 s one held a batch that long."""
        multi, failed = self.multi, {}
        active = 1
        while active:
            ret, active = multi.perform()
            while ret == pycurl.E_CALL_MULTI_PERFORM:
                ret, active = multi.perform()
            while True:
                queued, _ok, errors = multi.info_read()
                for curl, code, message in errors:
                    failed[id(curl)] = (code, message)
                if not queued:
                    break
            if active:
                wait = multi.timeout()  # ms until libcurl wants to be called again; -1: none
                if wait != 0:
                    multi.select(MAX_WAIT if wait < 0 else min(wait / 1000, 1.0))
        return failed


def send_all(transport: CurlTransport, requests: list[Request], http2: bool = False,
             ) -> list[Answer | Exception]:
    """`requests` sent together on one multi handle of this thread, each answer (or the
    error of its transfer) in order. HTTP/1.1: one kept-alive connection per transfer in
    flight, from the multi's cache; `http2`: all multiplexed on one connection (TLS only).
    The fence is asked per write, as by `send`; a transfer that never left (a connection not
    made) and an idempotent one that failed are sent again through `send` (its retries)."""
    local = transport._local
    key = "multi2" if http2 else "multi1"
    runner: _Multi | None = getattr(local, key, None)
    if runner is None:
        runner = _Multi(transport, http2)
        setattr(local, key, runner)
    prepared: list[tuple[_Handle, io.BytesIO]] = []
    for i, (method, path, body, headers) in enumerate(requests):
        add_token(transport.configuration, headers)
        handle = runner.handle(i, transport)
        handle.refused = False
        out = handle.prepare(method, transport.host + path, body, headers,
                             transport.fence is not None and method != "GET")
        runner.multi.add_handle(handle.curl)
        prepared.append((handle, out))
    try:
        failed = runner.run()
    finally:
        for handle, _out in prepared:
            runner.multi.remove_handle(handle.curl)
    answers: list[Answer | Exception] = []
    for (method, path, body, headers), (handle, out) in zip(requests, prepared, strict=True):
        error = failed.get(id(handle.curl))
        if error is None:
            answers.append(handle.answer(out))
        elif handle.refused:
            answers.append(FencedError())
        elif error[0] in UNCONNECTED or method in IDEMPOTENT:
            try:
                answers.append(transport.send(method, path, body, headers))
            except Exception as exc:  # handed back, as the others are
                answers.append(exc)
        else:
            answers.append(ConnectionError(f"{method} {path}: curl error {error[0]}: "
                                           f"{error[1]}"))
    return answers


def _describe(exc: pycurl.error) -> str:
    code, message = (*exc.args, 0, "")[:2]
    return f"curl error {code}: {message}"


class _Handle:
    """One thread's libcurl handle with the options every request shares set once."""

    def __init__(self, transport: CurlTransport, http2: bool = False) -> None:
        self.transport = transport
        self.refused = False
        self._lines: list[bytes] = []
        self._chain: bytes | None = None
        """The client certificate chain this handle presents (ClientChain's, when read)."""
        curl = self.curl = pycurl.Curl()
        configuration = transport.configuration
        curl.setopt(pycurl.NOSIGNAL, 1)  # threads: no SIGALRM for timeouts
        if http2:  # one connection for all of a multi's transfers (HTTP/1.1 over plain TCP)
            curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_2TLS)
            curl.setopt(pycurl.PIPEWAIT, 1)
        else:
            curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        curl.setopt(pycurl.TIMEOUT_MS, transport.timeout_ms)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, transport.timeout_ms)
        curl.setopt(pycurl.TCP_NODELAY, 1)
        curl.setopt(pycurl.UPLOAD_BUFFERSIZE, UPLOAD_BUFFER)
        curl.setopt(pycurl.HEADERFUNCTION, self._lines.append)
        if transport.host.startswith("https://"):
            verify = bool(configuration.verify_ssl)
            curl.setopt(pycurl.SSL_VERIFYPEER, 1 if verify else 0)
            curl.setopt(pycurl.SSL_VERIFYHOST, 2 if verify else 0)
            if configuration.ssl_ca_cert:
                curl.setopt(pycurl.CAINFO, str(configuration.ssl_ca_cert))
            if configuration.cert_file:
                curl.setopt(pycurl.SSLCERTTYPE, "PEM")
                self._present(configuration.cert_file)
            if configuration.key_file:
                curl.setopt(pycurl.SSLKEY, str(configuration.key_file))
        if transport.fence is not None:
            curl.setopt(pycurl.PREREQFUNCTION, self._prereq)
        self._fenced = False

    def _present(self, cert_file: str) -> None:
        """The client certificate for the handle's next connections (explicit_chain)."""
        chain = self.transport.client_chain
        self._chain = None if chain is None else chain.current()
        if self._chain is None:
            self.curl.setopt(pycurl.SSLCERT, str(cert_file))  # unreadable: libcurl says why
        else:
            self.curl.setopt(pycurl.SSLCERT_BLOB, self._chain)

    def _prereq(self, *_: object) -> int:
        """libcurl's last call before the request's bytes leave (connection open or reused)."""
        fence = self.transport.fence
        if self._fenced and fence is not None and not fence():
            self.refused = True
            return int(pycurl.PREREQFUNC_ABORT)
        return int(pycurl.PREREQFUNC_OK)

    def perform(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], fenced: bool
    ) -> Answer:
        out = self.prepare(method, url, body, headers, fenced)
        self.curl.perform()
        return self.answer(out)

    def prepare(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], fenced: bool
    ) -> io.BytesIO:
        """Set the request's options; the answer's body is written to what this returns."""
        curl, lines = self.curl, self._lines
        lines.clear()
        chain = self.transport.client_chain
        if chain is not None and chain.current() is not self._chain:
            self._present(chain.path)  # the file changed: new connections present the new one
        self.refused = False
        self._fenced = fenced
        out = io.BytesIO()
        curl.setopt(pycurl.URL, url)
        if body is None:
            curl.setopt(pycurl.HTTPGET, 1)
            curl.setopt(pycurl.CUSTOMREQUEST, None if method == "GET" else method)
        else:
            curl.setopt(pycurl.POSTFIELDS, body)
            curl.setopt(pycurl.CUSTOMREQUEST, None if method == "POST" else method)
        # an Accept-Encoding asked for is libcurl's to send and to decode (none: none)
        curl.setopt(pycurl.ACCEPT_ENCODING, headers.get(ACCEPT_ENCODING))
        # "Expect:" off: no 100-continue round trip before a large body
        curl.setopt(pycurl.HTTPHEADER, [f"{k}: {v}" for k, v in headers.items()
                                        if k != ACCEPT_ENCODING] + ["Expect:"])
        curl.setopt(pycurl.WRITEDATA, out)
        return out

    def answer(self, out: io.BytesIO) -> Answer:
        """The finished transfer's answer."""
        lines = self._lines
        status = int(self.curl.getinfo(pycurl.RESPONSE_CODE))
        reason = _reason(lines)
        answer_headers: Mapping[str, str] = {} if 200 <= status < 300 else _headers(lines)
        return Answer(status, reason, out.getvalue(), answer_headers)


def _reason(lines: list[bytes]) -> str:
    """The reason phrase of the last status line ("HTTP/1.1 429 Too Many Requests")."""
    for line in reversed(lines):
        if line.startswith(b"HTTP/"):
            parts = line.decode("latin-1").strip().split(" ", 2)
            return parts[2] if len(parts) > 2 else ""
    return ""


def _headers(lines: list[bytes]) -> HTTPHeaderDict:
    """The final response's headers, case-insensitive (read only for an error's Retry-After
    and APF's flow schema)."""
    headers = HTTPHeaderDict()
    for raw in lines:
        line = raw.decode("latin-1").rstrip("\r\n")
        if line.startswith("HTTP/"):
            headers = HTTPHeaderDict()  # a 100 Continue's block is not the answer's
        elif ":" in line:
            name, _, value = line.partition(":")
            headers.add(name.strip(), value.strip())
    return headers
