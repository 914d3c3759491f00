"""A second scheduler of one name refuses to start, naming the port or the Lease (issue 33)."""

from __future__ import annotations

import socket
from datetime import UTC, datetime, timedelta
from typing import Any

from koordqueue.domain.names import SCHEDULER_NAME_ANNOTATION
from koordqueue.kube.api import ApiError, Kind
from koordqueue.kube.leader import LeaderElector, LeaseConfig
from koordqueue.kube.scheduler_clash import busy_port, scheduler_clash
from koordqueue.kube.settings import ControllerSettings
from tests.unit.kube.test_leader_election import Clock, LeaseServer

NOW = datetime(2026, 12, 3, 12, 0, 0, tzinfo=UTC)


def lease(name: str, scheduler: str | None, holder: str = "host_1",
          renewed: datetime = NOW, duration: int = 15) -> dict[str, Any]:
    notes = {SCHEDULER_NAME_ANNOTATION: scheduler} if scheduler else {}
    return {
        "metadata": {"name": name, "namespace": "koord-queue", "annotations": notes},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": duration,
                 "renewTime": renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }


class Leases:
    def __init__(self, *items: dict[str, Any], error: ApiError | None = None) -> None:
        self.items, self.error = list(items), error

    def list_objects(self, kind: Kind, namespace: str | None = None, **_: Any) -> Any:
        if self.error:
            raise self.error
        return self.items


def clash(api: Leases, own: str | None = None, name: str = "volcano") -> str | None:
    settings = ControllerSettings(scheduler_name=name)
    return scheduler_clash(api, settings, "koord-queue", own, NOW)  # type: ignore[arg-type]


def test_a_held_lease_of_run_naming_our_scheduler_refuses_with_the_holder() -> None:
    message = clash(Leases(lease("koord-queue", "volcano", renewed=NOW - timedelta(seconds=3))))
    assert message == (
        "a scheduler named 'volcano' is already running: Lease koord-queue/koord-queue is held "
        "by host_1 (`koordqueue run`, which embeds it); stop that one, or give this one "
        "another --scheduler-name"
    )


def test_our_own_lease_is_a_standby_not_a_clash() -> None:
    held = Leases(lease("koord-queue-scheduler", "volcano"))
    assert clash(held, own="koord-queue-scheduler") is None
    assert clash(held, own="koord-queue") is not None  # run beside a running `schedule`
    assert clash(held, own=None) is not None  # election off: no Lease of our own


def test_another_name_an_expired_or_released_lease_or_no_annotation_is_no_clash() -> None:
    assert clash(Leases(lease("koord-queue", "volcano-b"))) is None
    expired = NOW - timedelta(seconds=16)
    assert clash(Leases(lease("koord-queue", "volcano", renewed=expired))) is None
    assert clash(Leases(lease("koord-queue", "volcano", holder=""))) is None
    assert clash(Leases(lease("koord-queue", None))) is None  # a controller without scheduler


def test_an_unreadable_lease_list_does_not_block_start_up() -> None:
    assert clash(Leases(error=ApiError(403, "Forbidden", "no", "GET", "/"))) is None


def test_the_holder_writes_its_scheduler_name_on_the_lease() -> None:
    server = LeaseServer()
    config = LeaseConfig("ns", "lease", "a", scheduler_name="volcano")
    elector = LeaderElector(server, config, clock=Clock())  # type: ignore[arg-type]
    assert elector.try_acquire_or_renew()  # create
    assert server.lease is not None
    assert server.lease["metadata"]["annotations"] == {SCHEDULER_NAME_ANNOTATION: "volcano"}
    server.lease["metadata"]["annotations"] = {"other": "kept"}
    assert elector.try_acquire_or_renew()  # renew (update) puts it back, keeps others
    assert server.lease["metadata"]["annotations"] == {
        "other": "kept", SCHEDULER_NAME_ANNOTATION: "volcano"}


def test_a_listening_port_is_named_with_its_flag() -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        message = busy_port(ControllerSettings(metrics_port=0, health_port=port))
    assert message is not None
    assert message.startswith(f"port {port} (--health-port) is already in use")
    assert "--health-port=0 to turn it off" in message
    assert busy_port(ControllerSettings(metrics_port=0, health_port=0)) is None
