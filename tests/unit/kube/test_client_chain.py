"""The client certificate libcurl presents: the leaf (twice, an explicit chain), never the CA
OpenSSL would add from the trust store (curl_transport.explicit_chain). Against the test
control plane's API server each request with the CA presented cost two to four ECDSA
verifications instead of one (pprof of a placement burst: request authentication 21 % of the
server's CPU; 0.90–0.97 -> 0.78 ms of server CPU per POST)."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

from kubernetes import client as k8s_client

from koordqueue.kube.curl_transport import ClientChain, CurlTransport, explicit_chain
from tests.controlplane.harness import make_pki


def _der(pem_path: Path) -> bytes:
    out = subprocess.run(["openssl", "x509", "-in", str(pem_path), "-outform", "der"],
                         capture_output=True, check=True)
    return out.stdout


def _client_certificates(trace: str) -> list[bytes]:
    """The DER certificates of the client's TLS 1.3 Certificate message in `openssl s_server
    -msg` output (type 0x0b, request context, then 3-byte length, cert, 2-byte extensions)."""
    block = re.search(r"<<< TLS 1\.3, Handshake \[length [0-9a-f]+\], Certificate\n((?:    .*\n)+)",
                      trace)
    assert block is not None, trace[-2000:]
    data = bytes.fromhex("".join(block.group(1).split()))
    assert data[0] == 0x0B
    at = 4 + 1 + data[4]  # header, context length, context
    end = at + 3 + int.from_bytes(data[at:at + 3], "big")
    at += 3
    certs = []
    while at < end:
        size = int.from_bytes(data[at:at + 3], "big")
        certs.append(data[at + 3:at + 3 + size])
        at += 3 + size
        at += 2 + int.from_bytes(data[at:at + 2], "big")
    return certs


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_one_certificate_file_is_made_an_explicit_chain_of_the_leaf(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    leaf, ca = pki["admin.crt"].read_bytes(), pki["ca.crt"].read_bytes()
    chain = explicit_chain(leaf)
    assert chain is not None and chain.count(b"-----BEGIN CERTIFICATE-----") == 2
    assert chain.split(b"-----END CERTIFICATE-----")[0] in leaf
    assert explicit_chain(leaf + pki["admin.key"].read_bytes()) == chain  # the certificate only
    written = explicit_chain(leaf + ca)  # a chain the operator wrote is sent as written
    assert written is not None and written.count(b"-----BEGIN CERTIFICATE-----") == 2
    assert written != chain
    assert explicit_chain(b"") is None


def test_a_rotated_certificate_file_is_read_again_at_most_once_a_second(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    path = tmp_path / "client.crt"
    path.write_bytes(pki["admin.crt"].read_bytes())
    now = [100.0]
    chain = ClientChain(str(path), clock=lambda: now[0])
    first = chain.current()
    assert first == explicit_chain(pki["admin.crt"].read_bytes())
    path.write_bytes(pki["serving.crt"].read_bytes() + b"\n")  # rotated (another size)
    assert chain.current() is first  # looked at again only after a second
    now[0] += 1.5
    assert chain.current() == explicit_chain(pki["serving.crt"].read_bytes())
    path.write_bytes(b"")  # caught mid-write: the last chain stands
    now[0] += 1.5
    assert chain.current() == explicit_chain(pki["serving.crt"].read_bytes())
    path.unlink()
    now[0] += 1.5
    assert chain.current() == explicit_chain(pki["serving.crt"].read_bytes())


def test_libcurl_presents_the_leaf_and_not_the_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    port = _free_port()
    server = subprocess.Popen(
        [shutil.which("openssl") or "openssl", "s_server", "-accept", f"127.0.0.1:{port}",
         "-cert", str(pki["serving.crt"]), "-key", str(pki["serving.key"]),
         "-CAfile", str(pki["ca.crt"]), "-Verify", "3", "-msg", "-www"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        configuration = k8s_client.Configuration()
        configuration.host = f"https://127.0.0.1:{port}"
        configuration.ssl_ca_cert = str(pki["ca.crt"])
        configuration.cert_file = str(pki["admin.crt"])
        configuration.key_file = str(pki["admin.key"])
        transport = CurlTransport(k8s_client.ApiClient(configuration), timeout=10)
        deadline = time.monotonic() + 10
        while True:
            try:
                answer = transport.send("GET", "/", None, {})
                break
            except ConnectionError:
                assert time.monotonic() < deadline, "s_server did not answer"
                time.sleep(0.1)
        assert answer.status == 200
    finally:
        server.terminate()
        trace, _ = server.communicate(timeout=10)
    sent = _client_certificates(trace)
    leaf, ca = _der(pki["admin.crt"]), _der(pki["ca.crt"])
    assert sent == [leaf, leaf]
    assert ca not in sent
