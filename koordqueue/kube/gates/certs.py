"""A self-signed serving certificate for the webhook, made with the `openssl` CLI.

Why the CLI: no extra Python dependency in the image (kopf's own self-signing needs
`kopf[dev]`); production deployments should mount a certificate (e.g. cert-manager) instead.
"""

from __future__ import annotations

import ipaddress
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServingCert:
    certfile: Path
    keyfile: Path

    @property
    def ca_pem(self) -> bytes:
        """Self-signed: the certificate is its own CA (what goes into caBundle)."""
        return self.certfile.read_bytes()


def _san(host: str) -> str:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return f"DNS:{host}"
    return f"IP:{host}"


def self_signed(directory: Path, hosts: Sequence[str], days: int = 365) -> ServingCert:
    """Write cert.pem/key.pem valid for `hosts` (DNS names or IPs) into `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "tls.crt", directory / "tls.key"
    sans = ",".join(_san(h) for h in hosts)
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
         "-days", str(days), "-subj", f"/CN={hosts[0]}",
         "-addext", f"subjectAltName={sans}",
         "-addext", "basicConstraints=critical,CA:TRUE",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )
    key.chmod(0o600)
    return ServingCert(cert, key)
