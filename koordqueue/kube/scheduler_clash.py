"""Start-up checks that keep a second scheduler of one name from starting silently (issue 33).

`koordqueue run` embeds a scheduler, so `koordqueue schedule` beside it would place the same
pods twice. Two things tell: the ports (on one host the second process cannot bind 8080/8081:
one line naming the port and its flag instead of a raw OSError) and the leader-election
Leases (a holder writes the scheduler name it runs on its Lease, `SCHEDULER_NAME_ANNOTATION`:
a process that would run a scheduler of the same name under another Lease, or with election
off, refuses to start and names the holder). A process that competes for the same Lease is a
standby, not a clash. Without leader election nothing is written, so nothing can be seen:
docs/troubleshooting.md says so.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from koordqueue.domain.names import SCHEDULER_NAME_ANNOTATION
from koordqueue.kube.api import ApiError, ObjectApi
from koordqueue.kube.leader import CONTROLLER_LEASE, LEASE
from koordqueue.kube.settings import ProcessSettings, SchedulerSettings

PORT_FLAGS = (
    ("--metrics-port", "metrics_port"),
    ("--health-port", "health_port"),
    ("--webhook-port", "webhook_port"),
)


def busy_port(settings: ProcessSettings, host: str = "0.0.0.0") -> str | None:
    """'port N (--flag) is already in use ...' for the first port of ours another process
    holds, or None. Checked before connecting; the servers bind them moments later."""
    for flag, field in PORT_FLAGS:
        port = int(getattr(settings, field))
        if not port:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # as our servers do: a port left in TIME_WAIT is free, a listening one is not
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                return port_in_use(port, flag, exc)
    return None


def port_in_use(port: int, flag: str, exc: OSError) -> str:
    return (
        f"port {port} ({flag}) is already in use ({exc.strerror or exc}): another koordqueue "
        f"here? (`run` embeds the scheduler); pass another {flag}, or {flag}=0 to turn it off"
    )


def _held(lease: Mapping[str, Any], now: datetime) -> bool:
    spec = lease.get("spec") or {}
    if not spec.get("holderIdentity"):
        return False  # released
    renewed = str(spec.get("renewTime") or "")
    try:
        at = datetime.fromisoformat(renewed.replace("Z", "+00:00"))
    except ValueError:
        return True  # held, renewal unknown: assume alive
    return (now - at).total_seconds() < float(spec.get("leaseDurationSeconds") or 0)


def scheduler_clash(
    api: ObjectApi,
    settings: SchedulerSettings,
    namespace: str,
    own_lease: str | None,
    now: datetime | None = None,
) -> str | None:
    """Why this process must not run its scheduler, or None.

    `own_lease`: the Lease this process competes for (None: election off). Another unexpired
    Lease naming our scheduler is a clash; an unreadable Lease list is not (the start-up goes
    on: the check is a courtesy, not a lock).
    """
    try:
        leases = api.list_objects(LEASE, namespace)
    except ApiError:
        return None
    now = now or datetime.now(UTC)
    for lease in leases:
        metadata = lease.get("metadata") or {}
        notes = metadata.get("annotations") or {}
        if notes.get(SCHEDULER_NAME_ANNOTATION) != settings.scheduler_name:
            continue
        if metadata.get("name") == own_lease or not _held(lease, now):
            continue
        name = metadata.get("name")
        holder = (lease.get("spec") or {}).get("holderIdentity")
        who = "`koordqueue run`, which embeds it" if name == CONTROLLER_LEASE else "its leader"
        return (
            f"a scheduler named {settings.scheduler_name!r} is already running: Lease "
            f"{namespace}/{name} is held by {holder} ({who}); stop that one, or give this one "
            "another --scheduler-name"
        )
    return None
