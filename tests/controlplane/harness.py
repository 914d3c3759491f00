"""Run a real etcd + kube-apiserver on loopback for the end-to-end tests (envtest style).

    from tests.controlplane.harness import ControlPlane
    with ControlPlane() as cp:           # builds the binaries first if the cache is cold
        print(cp.kubeconfig, cp.server)
        cp.kubectl("get", "ns")

What :meth:`ControlPlane.start` does, in a fresh temp dir:

* PKI with the ``openssl`` CLI: a CA; a serving cert for 127.0.0.1/localhost (and the in-cluster
  names); an admin client cert (``O=system:masters``); a service-account key pair; the
  aggregation layer's front-proxy CA and the API server's proxy client cert (aggregated APIs);
* etcd on free loopback ports (``--unsafe-no-fsync``), waits for ``GET /health``;
* kube-apiserver (RBAC, ServiceAccount admission off, service-account issuer/keys, client CA,
  the front-proxy (requestheader) flags aggregated API servers authenticate it by),
  waits for ``GET /readyz``; writes an admin kubeconfig (``<dir>/kubeconfig``).

Children run in their own process groups (``start_new_session``) with a parent-death signal, and
every started plane is registered for teardown at exit and on SIGINT/SIGTERM, so nothing is left
running after a failing test or Ctrl-C.  :meth:`stop` terminates, then kills, each group.  Logs go
to ``<dir>/etcd.log`` and ``<dir>/kube-apiserver.log``; start-up failures quote their tail.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import build

FRONT_PROXY_CLIENT = "front-proxy-client"
"""CN of the API server's proxy client certificate (--requestheader-allowed-names)."""
KEEP_ENV = "KOORDQUEUE_CONTROLPLANE_KEEP"  # "1": keep the temp dir (certs, logs, data) after stop
LOG_TAIL_LINES = 40


class ControlPlaneError(RuntimeError):
    """etcd or kube-apiserver failed to start or become healthy."""


# --------------------------------------------------------------------------- process registry

_live: set[ControlPlane] = set()
_registry_lock = threading.RLock()  # re-entrant: the signal handler runs on the main thread
_state = {"handlers_installed": False}
_previous_handlers: dict[int, Any] = {}


def _stop_all() -> None:
    with _registry_lock:
        planes = list(_live)
    for plane in planes:
        with contextlib.suppress(Exception):
            plane.stop()


def _on_signal(signum: int, frame: Any) -> None:
    _stop_all()
    prev = _previous_handlers.get(signum, signal.SIG_DFL)
    if callable(prev):
        prev(signum, frame)  # e.g. SIGINT -> KeyboardInterrupt as usual
    elif prev == signal.SIG_IGN:
        return
    else:  # SIG_DFL: die by the same signal
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)


def _install_handlers() -> None:
    if _state["handlers_installed"]:
        return
    _state["handlers_installed"] = True
    atexit.register(_stop_all)
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread; atexit still applies
    for sig in (signal.SIGINT, signal.SIGTERM):
        prev = signal.getsignal(sig)
        if prev == signal.SIG_IGN:
            continue  # the process was told to ignore it (e.g. a background job): keep ignoring
        _previous_handlers[sig] = prev
        signal.signal(sig, _on_signal)


try:  # resolved once in the parent: the child must not dlopen() between fork and exec
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (OSError, AttributeError):  # pragma: no cover
    _prctl = None


def _set_parent_death_signal() -> None:
    """Child side, between fork and exec: die with SIGKILL when the parent dies (Linux).

    Belt and braces for a SIGKILLed test runner, which gets no chance to run atexit/handlers.
    """
    if _prctl is not None:
        _prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _tail(path: Path, n: int = LOG_TAIL_LINES) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(lines[-n:])


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie still "exists"; treat it as gone
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


# --------------------------------------------------------------------------- PKI


def _openssl(*args: str, cwd: Path) -> None:
    exe = shutil.which("openssl")
    if not exe:
        raise ControlPlaneError(
            "the `openssl` CLI is needed to create the control plane's certificates"
        )
    proc = subprocess.run([exe, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def make_pki(d: Path) -> dict[str, Path]:
    """CA, serving cert, admin client cert (system:masters) and service-account key pair."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=koordqueue-e2e-ca",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=d,
    )
    sans = (
        "IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
        "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
    )
    _openssl(
        "req",
        "-x509",
        *ec,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-days",
        "365",
        "-keyout",
        "serving.key",
        "-out",
        "serving.crt",
        "-subj",
        "/CN=kube-apiserver",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "-addext",
        "extendedKeyUsage=serverAuth",
        "-addext",
        f"subjectAltName={sans}",
        cwd=d,
    )
    _openssl(
        "req",
        "-x509",
        *ec,
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-days",
        "365",
        "-keyout",
        "admin.key",
        "-out",
        "admin.crt",
        "-subj",
        "/O=system:masters/CN=koordqueue-admin",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "-addext",
        "extendedKeyUsage=clientAuth",
        cwd=d,
    )
    # the aggregation layer's front proxy: its own CA and the client certificate the API
    # server presents to aggregated API servers (--proxy-client-cert-file), as kubeadm does
    _openssl(
        "req", "-x509", *ec, "-keyout", "front-proxy-ca.key", "-out", "front-proxy-ca.crt",
        "-days", "3650", "-subj", "/CN=koordqueue-e2e-front-proxy-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
        cwd=d,
    )
    _openssl(
        "req", "-x509", *ec, "-CA", "front-proxy-ca.crt", "-CAkey", "front-proxy-ca.key",
        "-days", "365", "-keyout", "front-proxy-client.key", "-out", "front-proxy-client.crt",
        "-subj", f"/CN={FRONT_PROXY_CLIENT}",
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "keyUsage=critical,digitalSignature,keyEncipherment",
        "-addext", "extendedKeyUsage=clientAuth",
        cwd=d,
    )
    _openssl(
        "genpkey",
        "-algorithm",
        "EC",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-out",
        "sa.key",
        cwd=d,
    )
    _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=d)
    for key in d.glob("*.key"):
        key.chmod(0o600)
    return {
        n: d / n
        for n in (
            "ca.crt",
            "ca.key",
            "serving.crt",
            "serving.key",
            "admin.crt",
            "admin.key",
            "sa.key",
            "sa.pub",
            "front-proxy-ca.crt",
            "front-proxy-client.crt",
            "front-proxy-client.key",
        )
    }


def write_kubeconfig(path: Path, server: str, pki: dict[str, Path]) -> None:
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "koordqueue-e2e",
                "cluster": {"server": server, "certificate-authority-data": b64(pki["ca.crt"])},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": b64(pki["admin.crt"]),
                    "client-key-data": b64(pki["admin.key"]),
                },
            }
        ],
        "contexts": [
            {
                "name": "koordqueue-e2e",
                "context": {"cluster": "koordqueue-e2e", "user": "admin", "namespace": "default"},
            }
        ],
        "current-context": "koordqueue-e2e",
        "preferences": {},
    }
    path.write_text(json.dumps(cfg, indent=2) + "\n")  # JSON is valid YAML
    path.chmod(0o600)


# --------------------------------------------------------------------------- control plane


class ControlPlane:
    """etcd + kube-apiserver for one test session.  Use as a context manager or start()/stop()."""

    def __init__(
        self,
        binaries: build.Binaries | None = None,
        *,
        workdir: str | Path | None = None,
        startup_timeout: float = 120.0,
        extra_apiserver_flags: Sequence[str] = (),
    ):
        self._binaries = binaries
        self._workdir_arg = Path(workdir) if workdir else None
        self.startup_timeout = startup_timeout
        self.extra_apiserver_flags = list(extra_apiserver_flags)
        self.dir: Path | None = None
        self.kubeconfig: Path | None = None
        self.server: str | None = None
        self.etcd_url: str | None = None
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self._argv: dict[str, list[str]] = {}
        self.timings: dict[str, float] = {}
        self._owns_dir = False
        self._pki: dict[str, Path] = {}
        self._lock = threading.RLock()

    # -- public -------------------------------------------------------------------------------

    @property
    def binaries(self) -> build.Binaries:
        if self._binaries is None:
            self._binaries = build.ensure_binaries()
        return self._binaries

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs.values()]

    @property
    def startup_seconds(self) -> float | None:
        return self.timings.get("total_seconds")

    def start(self) -> ControlPlane:
        bins = self.binaries  # build (or fail loudly) before creating anything
        _install_handlers()
        with _registry_lock:
            _live.add(self)
        t0 = time.monotonic()
        try:
            if self._workdir_arg:
                self.dir = self._workdir_arg
                self.dir.mkdir(parents=True, exist_ok=True)
            else:
                self.dir = Path(tempfile.mkdtemp(prefix="koordqueue-cp-"))
                self._owns_dir = True
            self._pki = make_pki(self.dir / "pki")
            self.timings["pki_seconds"] = round(time.monotonic() - t0, 3)
            self._retry_on_port_clash("etcd", lambda: self._start_etcd(bins))
            self.timings["etcd_seconds"] = round(
                time.monotonic() - t0 - self.timings["pki_seconds"], 3
            )
            t1 = time.monotonic()
            self._retry_on_port_clash("kube-apiserver", lambda: self._start_apiserver(bins))
            self.timings["apiserver_seconds"] = round(time.monotonic() - t1, 3)
        except BaseException:
            self.stop(keep_dir=True)
            raise
        self.timings["total_seconds"] = round(time.monotonic() - t0, 3)
        return self

    def stop(self, *, keep_dir: bool | None = None, timeout: float = 10.0) -> None:
        """Terminate kube-apiserver then etcd (SIGTERM to the group, SIGKILL after `timeout`)."""
        with self._lock:
            for name in ("kube-apiserver", "etcd"):
                proc = self.procs.get(name)
                if proc is not None:
                    _terminate_group(proc, timeout)
            with _registry_lock:
                _live.discard(self)
            if keep_dir is None:
                keep_dir = os.environ.get(KEEP_ENV) == "1"
            if self._owns_dir and self.dir and not keep_dir:
                shutil.rmtree(self.dir, ignore_errors=True)

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver and start it again on the same port over the same etcd.

        Clients see their connections and watches dropped, then the same server (and
        kubeconfig) again: what a control-plane upgrade or crash looks like from outside.
        """
        with self._lock:
            _terminate_group(self.procs["kube-apiserver"], 10.0)
            time.sleep(down_seconds)
            self._spawn("kube-apiserver", self._argv["kube-apiserver"])
            self._wait_healthy(
                "kube-apiserver",
                f"{self.server}/readyz",
                self._admin_context(),
                lambda body: body.strip() == "ok",
            )

    def restart_etcd(self, down_seconds: float = 0.0) -> None:
        """Stop etcd and start it again on the same ports over the same data dir.

        kube-apiserver stays up and reconnects on its own: clients see writes fail (or time
        out) while etcd is down, and watches end or stall; no committed data is lost.
        """
        with self._lock:
            _terminate_group(self.procs["etcd"], 10.0)
            time.sleep(down_seconds)
            self._spawn("etcd", self._argv["etcd"])
            self._wait_healthy(
                "etcd",
                f"{self.etcd_url}/health",
                None,
                lambda body: json.loads(body).get("health") == "true",
            )

    @property
    def pki(self) -> dict[str, Path]:
        """The plane's certificates and keys by file name (ca.crt, serving.crt, admin.key...)."""
        return dict(self._pki)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop(keep_dir=True if exc[0] is not None else None)

    def log_tails(self, n: int = LOG_TAIL_LINES) -> str:
        return "\n".join(
            f"--- {name} ({path}) ---\n{_tail(path, n)}" for name, path in self.logs.items()
        )

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 60.0
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl against this plane (never a system kubectl)."""
        assert self.kubeconfig is not None, "control plane not started"
        cmd = [str(self.binaries.kubectl), f"--kubeconfig={self.kubeconfig}", *args]
        proc = subprocess.run(
            cmd, input=input, capture_output=True, text=True, timeout=timeout, check=False
        )
        if check and proc.returncode != 0:
            raise subprocess.CalledProcessError(proc.returncode, cmd, proc.stdout, proc.stderr)
        return proc

    # -- internals ----------------------------------------------------------------------------

    def _retry_on_port_clash(self, name: str, starter: Any, attempts: int = 3) -> None:
        """free_port() can race with another process taking the port: retry on new ports."""
        for attempt in range(1, attempts + 1):
            try:
                starter()
                return
            except ControlPlaneError:
                proc = self.procs.get(name)
                log = self.logs.get(name)
                clash = log is not None and "address already in use" in _tail(log, 200)
                if proc is not None:
                    _terminate_group(proc, 5.0)
                if not clash or attempt == attempts:
                    raise
                assert self.dir is not None
                if name == "etcd":
                    shutil.rmtree(self.dir / "etcd-data", ignore_errors=True)
                if log is not None:
                    log.rename(log.with_suffix(f".attempt{attempt}.log"))

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen[bytes]:
        assert self.dir is not None
        log = self.dir / f"{name}.log"
        self.logs[name] = log
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                argv,
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # only calls a prctl resolved before fork: no locks, safe with threads
                preexec_fn=_set_parent_death_signal,  # noqa: PLW1509
            )
        self.procs[name] = proc
        self._argv[name] = argv
        return proc

    def _wait_healthy(self, name: str, url: str, ctx: ssl.SSLContext | None, ok: Any) -> None:
        proc = self.procs[name]
        deadline = time.monotonic() + self.startup_timeout
        last = "no answer yet"
        while True:
            if proc.poll() is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {proc.returncode} during start-up\n"
                    f"command: {' '.join(self._argv[name])}\n"
                    f"--- {self.logs[name]} (tail) ---\n{_tail(self.logs[name])}"
                )
            try:
                with urllib.request.urlopen(url, timeout=2, context=ctx) as resp:
                    body = resp.read().decode(errors="replace")
                    if resp.status == 200 and ok(body):
                        # whoever answered, our process must still be running (not a foreign
                        # server that won a race for the port while ours failed to bind)
                        time.sleep(0.2)
                        if proc.poll() is None:
                            return
                        continue
                    last = f"HTTP {resp.status}: {body[:300]}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}: {exc.read().decode(errors='replace')[:500]}"
            except (OSError, ValueError) as exc:
                last = repr(exc)
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{name} not healthy at {url} after {self.startup_timeout:.0f}s "
                    f"(last: {last})\n"
                    f"--- {self.logs[name]} (tail) ---\n{_tail(self.logs[name])}"
                )
            time.sleep(0.1)

    def _start_etcd(self, bins: build.Binaries) -> None:
        assert self.dir is not None
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        peer_url = f"http://127.0.0.1:{peer}"
        self._spawn(
            "etcd",
            [
                str(bins.etcd),
                "--name=default",
                f"--data-dir={self.dir / 'etcd-data'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        self._wait_healthy(
            "etcd",
            f"{self.etcd_url}/health",
            None,
            lambda body: json.loads(body).get("health") == "true",
        )

    def _start_apiserver(self, bins: build.Binaries) -> None:
        assert self.dir is not None and self.etcd_url
        pki = self._pki
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        cert_dir = self.dir / "apiserver-certs"
        cert_dir.mkdir(exist_ok=True)
        self._spawn(
            "kube-apiserver",
            [
                str(bins.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--cert-dir={cert_dir}",
                f"--tls-cert-file={pki['serving.crt']}",
                f"--tls-private-key-file={pki['serving.key']}",
                f"--client-ca-file={pki['ca.crt']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",  # a loopback advertise address needs it
                f"--secure-port={port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--authorization-mode=RBAC",
                "--disable-admission-plugins=ServiceAccount",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki['sa.pub']}",
                f"--service-account-signing-key-file={pki['sa.key']}",
                # the aggregation layer (APIServices: the visibility API, e2e
                # test_visibility.py): the front proxy's CA and client certificate
                f"--requestheader-client-ca-file={pki['front-proxy-ca.crt']}",
                f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki['front-proxy-client.crt']}",
                f"--proxy-client-key-file={pki['front-proxy-client.key']}",
                *self.extra_apiserver_flags,
            ],
        )
        self._wait_healthy(
            "kube-apiserver",
            f"{self.server}/readyz",
            self._admin_context(),
            lambda body: body.strip() == "ok",
        )
        self.kubeconfig = self.dir / "kubeconfig"
        write_kubeconfig(self.kubeconfig, self.server, pki)


    def admin_context(self) -> ssl.SSLContext:
        """TLS as the admin user (for a test that reads an answer's headers itself)."""
        return self._admin_context()

    def _admin_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self._pki["ca.crt"]))
        ctx.load_cert_chain(str(self._pki["admin.crt"]), str(self._pki["admin.key"]))
        return ctx


def _terminate_group(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.returncode is not None:
        return  # already stopped and reaped by an earlier stop()
    pgid = proc.pid  # start_new_session: the child leads its own group
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        try:
            proc.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            continue
    # the leader is reaped; make sure no other member of its group survived
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> int:
    """`python -m tests.controlplane.harness`: start a plane, print its kubeconfig, await Ctrl-C."""
    cp = ControlPlane().start()
    print(f"kube-apiserver {cp.server} ready in {cp.startup_seconds:.2f}s ({cp.timings})")
    print(f"export KUBECONFIG={cp.kubeconfig}")
    print("pids: " + " ".join(map(str, cp.pids)))
    print(f"dir: {cp.dir}")
    sys.stdout.flush()
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        cp.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
