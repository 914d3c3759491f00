"""Active/standby through a `coordination.k8s.io/v1` Lease, with client-go's rules and fencing.

Two replicas may run at once (a rolling update, a partitioned node whose pod keeps running),
and two admitting controllers would over-admit a quota. So only the holder of the Lease acts:

- Acquire: create the Lease, or take it over once its holder has not renewed for a whole
  `lease_duration` as observed on *our* clock (client-go compares the time we last saw the
  record change, never the holder's timestamps, so clock skew between nodes does not matter).
  Every write carries the resourceVersion read, so two candidates cannot both win.
- Renew every `retry_period`; a leader that has not renewed for `renew_deadline` steps down.
- Fencing: `may_write()` is true only until `renew_deadline` after the start of the last
  successful renew. Since `renew_deadline` < `lease_duration`, the old leader has stopped
  writing before anyone else can acquire. The API client asks it before every write and
  again on the connection, after connecting (TCP, TLS) and serialising, right before the
  request's one `sendall` (`KubeApi(fence=...)`, api.py): a write that waited or a process
  paused (SIGSTOP, a GC pause) before that last look is refused on waking, since the
  monotonic clock keeps running through a pause. Not zero: a pause landing between the last
  look and the send syscall (8 µs median, p99 under 20 µs to entering `sendall` on loopback;
  longer if the thread loses the GIL there) still lets that one write out on waking, and
  matters only if that pause outlasts `lease_duration` - `renew_deadline`. A stale write
  with a resourceVersion precondition (the conditional unit status patches, the Lease) is
  then refused by the server; Events and creates have no such guard.
- Release on a graceful stop: the holder is cleared, so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import structlog

from koordqueue.domain.names import SCHEDULER_NAME_ANNOTATION
from koordqueue.kube.api import ApiError, Kind, KubeApi, process_identity
from koordqueue.kube.settings import SchedulerSettings

log = structlog.get_logger(__name__)
LEASE: Final = Kind("coordination.k8s.io", "v1", "leases", "Lease")
CONTROLLER_LEASE: Final = "koord-queue"
SCHEDULER_LEASE: Final = "koord-queue-scheduler"


def default_identity() -> str:
    """Unique per process: the pod's hostname plus the pid (two processes on one host differ);
    the same identity the process's user agent names (api.user_agent)."""
    return process_identity()


def _micro_time(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """client-go's defaults: 15 s lease, 10 s renew deadline, 2 s retry period."""

    namespace: str
    name: str
    identity: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    scheduler_name: str = ""
    """The scheduler this process runs ("" none): written on the Lease as the annotation
    `SCHEDULER_NAME_ANNOTATION`, so that a second scheduler of that name can see it at
    start-up (kube/scheduler_clash.py)."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError(
                "leader election needs lease duration > renew deadline > retry period > 0, got "
                f"{self.lease_duration} / {self.renew_deadline} / {self.retry_period}"
            )


class LeaderElector:
    """One candidate's view of the Lease; `try_acquire_or_renew` is one round of client-go's."""

    def __init__(
        self,
        api: KubeApi,
        config: LeaseConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.config = config
        self.clock = clock
        self._clock = clock
        self._now = now
        self._lock = threading.Lock()
        self._observed: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None

    # --- state ----------------------------------------------------------------------------
    @property
    def holder(self) -> str:
        """The holder as last observed ("" when none or unknown)."""
        with self._lock:
            return str((self._observed or {}).get("holderIdentity") or "")

    def is_leader(self) -> bool:
        return self.holder == self.config.identity and self.may_write()

    def may_write(self) -> bool:
        """The fence: true only within `renew_deadline` of the last successful renew's start."""
        with self._lock:
            renewed = self._renewed_at
        return renewed is not None and self._clock() < renewed + self.config.renew_deadline

    def step_down(self) -> None:
        """Stop writing now (leadership lost or given up)."""
        with self._lock:
            self._renewed_at = None

    # --- one round --------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """Acquire or renew the Lease once; True when we hold it afterwards."""
        started = self._clock()
        cfg = self.config
        stamp = _micro_time(self._now())
        mine = {
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": max(1, round(cfg.lease_duration)),
            "acquireTime": stamp,
            "renewTime": stamp,
        }
        try:
            lease = self.api.get(LEASE, cfg.name, cfg.namespace)
            if lease is None:
                body = {
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": self._metadata({"name": cfg.name, "namespace": cfg.namespace}),
                    "spec": {**mine, "leaseTransitions": 0},
                }
                created = self.api.create(LEASE, body, cfg.namespace)
                self._observe(created.get("spec") or {}, started, renewed=True)
                return True
            spec = dict(lease.get("spec") or {})
            self._observe(spec, started, renewed=False)
            holder = str(spec.get("holderIdentity") or "")
            ours = holder == cfg.identity
            with self._lock:
                expires = self._observed_at + float(spec.get("leaseDurationSeconds") or 0)
            if holder and not ours and started < expires:
                return False  # held by someone else, and not yet expired on our clock
            transitions = int(spec.get("leaseTransitions") or 0)
            if ours:
                mine["acquireTime"] = spec.get("acquireTime") or stamp
            else:
                transitions += 1
            updated = self.api.request(
                "PUT", LEASE.path(cfg.namespace, cfg.name),
                body={
                    **lease,
                    "metadata": self._metadata(lease.get("metadata") or {}),
                    "spec": {**mine, "leaseTransitions": transitions},
                },
            )
        except ApiError as exc:
            if not exc.conflict:  # a conflict is the other candidate winning: no news
                log.warning("leader election: lease not acquired or renewed", error=str(exc))
            return False
        self._observe(updated.get("spec") or {}, started, renewed=True)
        if not ours:
            log.info("leader election: acquired the lease", lease=f"{cfg.namespace}/{cfg.name}",
                     identity=cfg.identity, previous=holder or None)
        return True

    def _metadata(self, metadata: dict[str, Any]) -> dict[str, Any]:
        """The Lease's metadata with our scheduler's name on it (when we run one)."""
        if not self.config.scheduler_name:
            return metadata
        notes = {
            **(metadata.get("annotations") or {}),
            SCHEDULER_NAME_ANNOTATION: self.config.scheduler_name,
        }
        return {**metadata, "annotations": notes}

    def _observe(self, spec: dict[str, Any], started: float, *, renewed: bool) -> None:
        with self._lock:
            if spec != self._observed:
                self._observed = dict(spec)
                self._observed_at = started
            if renewed:
                self._renewed_at = started

    def release(self) -> bool:
        """Give the Lease up (graceful stop) so a standby need not wait for it to expire."""
        cfg = self.config
        self.step_down()
        try:
            lease = self.api.get(LEASE, cfg.name, cfg.namespace)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != cfg.identity:
                return False
            spec = dict(lease.get("spec") or {})
            stamp = _micro_time(self._now())
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=stamp)
            self.api.request("PUT", LEASE.path(cfg.namespace, cfg.name),
                             body={**lease, "spec": spec})
        except ApiError as exc:
            log.warning("leader election: lease not released", error=str(exc))
            return False
        log.info("leader election: released the lease", lease=f"{cfg.namespace}/{cfg.name}")
        return True


class Leadership:
    """Runs the election in a thread; `leading` is set while this process may act.

    Without an elector (election off) the process always leads. `on_lost` runs once when a
    leader fails to renew in time: the fence has already closed; the caller should exit, as
    client-go's components do, so a fresh process becomes a clean standby.
    """

    def __init__(
        self, elector: LeaderElector | None = None, on_lost: Callable[[], None] | None = None
    ) -> None:
        self.elector = elector
        self.leading = threading.Event()
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if elector is None:
            self.leading.set()

    def may_write(self) -> bool:
        return self.elector is None or self.elector.may_write()

    def start(self) -> None:
        if self.elector is None or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="kq-leader-election", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)
        if self.elector is None:
            return
        if release and self.leading.is_set():
            self.elector.release()
        self.elector.step_down()
        self.leading.clear()

    def _run(self) -> None:
        assert self.elector is not None
        elector, cfg = self.elector, self.elector.config
        while not self._stop.is_set() and not elector.try_acquire_or_renew():
            self._stop.wait(cfg.retry_period)
        if self._stop.is_set():
            return
        self.leading.set()
        log.info("leader election: leading", identity=cfg.identity)
        while not self._stop.wait(cfg.retry_period):
            deadline = elector.clock() + cfg.renew_deadline
            renewed = False
            while not self._stop.is_set() and elector.clock() < deadline:
                if elector.try_acquire_or_renew():
                    renewed = True
                    break
                self._stop.wait(cfg.retry_period)
            if self._stop.is_set():
                return
            if not renewed:
                elector.step_down()
                self.leading.clear()
                log.error("leader election: lost the lease (not renewed within the deadline); "
                          "stopped writing", identity=cfg.identity)
                if self._on_lost is not None:
                    self._on_lost()
                return


async def wait_until_leading(leadership: Leadership) -> None:
    """Start the election (once) and return when this process leads; cancellable."""
    leadership.start()
    while not leadership.leading.is_set():
        await asyncio.to_thread(leadership.leading.wait, 1.0)


async def start_when_leading(
    leadership: Leadership,
    start: Callable[[], Awaitable[None]],
    tasks: dict[str, asyncio.Task[None]],
    key: str = "lead",
) -> None:
    """Run `start` now when this process leads (no election: before kopf's watches start);
    otherwise in a background task, `tasks[key]`, once the Lease is ours — kopf's start-up
    must not block, since its liveness endpoint starts only after it."""
    if leadership.leading.is_set():
        await start()
        return

    async def lead_then_start() -> None:
        log.info("standby: waiting for the leader election lease")
        await wait_until_leading(leadership)
        await start()

    tasks[key] = asyncio.create_task(lead_then_start())


def lease_config(
    settings: SchedulerSettings, default_name: str, *, runs_scheduler: bool = False
) -> LeaseConfig | None:
    """The Lease this process competes for, None with election off; ValueError on bad timings.

    `runs_scheduler`: the process runs the scheduler `--scheduler-name` (`schedule`, or `run`
    with its embedded one), which the Lease then names."""
    if not settings.leader_elect:
        return None
    return LeaseConfig(
        namespace=lease_namespace(settings),
        name=settings.leader_elect_resource_name or default_name,
        identity=default_identity(),
        lease_duration=settings.leader_elect_lease_duration,
        renew_deadline=settings.leader_elect_renew_deadline,
        retry_period=settings.leader_elect_retry_period,
        scheduler_name=settings.scheduler_name if runs_scheduler else "",
    )


def lease_namespace(settings: SchedulerSettings) -> str:
    return settings.leader_elect_resource_namespace or settings.namespace


def leadership_for(
    api_client: Any,
    settings: SchedulerSettings,
    default_name: str,
    on_lost: Callable[[], None] | None = None,
    *,
    runs_scheduler: bool = False,
) -> Leadership:
    """The process's Leadership from its settings (always leading when election is off).

    Raises ValueError on inconsistent timings. The election's own client is not fenced (it
    writes the Lease) and times out at half the renew deadline, so that one hung request
    cannot outlast the deadline.
    """
    config = lease_config(settings, default_name, runs_scheduler=runs_scheduler)
    if config is None:
        return Leadership()
    lease_api = KubeApi(api_client, timeout=max(0.5, config.renew_deadline / 2))
    return Leadership(LeaderElector(lease_api, config), on_lost)
