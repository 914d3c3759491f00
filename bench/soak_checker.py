"""The soak's invariants, checked continuously from what a separate watcher sees (issue 30).

Pure: `bench/soak.py` feeds it watch events (QueueUnits, ElasticQuotas, Queues, Pods,
Nodes) and the API server's audit events, each with the time it saw them, and calls `tick`
every second; the checker keeps what it needs and records each `Violation` once. Nothing here
talks to the API, so tests/unit/bench/test_soak_checker.py drives every rule with made-up
events.

The rules, and what each allows for:

- `admitted-twice`: a unit admitted again after it finished (Succeed, Failed), or two units
  of one workload admitted at once. A unit re-admitted after the controller released it
  (Enqueued, TimeoutBackoff, Preempted, SchedFailed) is not counted.
- `quota-over-max`: at the instant a unit is admitted, some quota of its chain holds more than
  max x oversell of a resource its max names (the subtree's admitted units, recounted). The
  watches of units and quotas are not ordered with each other, and a controller acts on
  what its own watches have shown it; so the admission is checked against every quota tree
  seen within `quota_window` seconds before it (a max lowered or a quota re-parented just
  then) and is a violation only if it breaks all of them. A max lowered below what is
  already admitted is not a violation by itself (nothing is preempted); the next admission
  into that subtree would be.
- `usage-annotation`: a Queue's `alibabacloud.com/queue-used` differs from the recount once
  the quota's usage and tree have not changed, and no fault has been injected, for
  `settle` seconds (the controller rewrites it every 5 s when it changed).
- `fits-not-admitted`: a waiting unit that fits its whole chain (recount) has been waiting
  and fitting for more than `bound` seconds after the last fault (Priority policy: a misfit
  never holds a later unit).
- `pod-bound-twice`: a pod's node changed, or the audit log shows two successful bindings of
  one pod.
- `pod-over-node`: at the instant a pod is bound, the requests of the node's pods that have
  not finished exceed the node's allocatable (cpu, memory, pods).
- `write-not-leader`: the audit log shows a write by a koordqueue replica (its user agent
  names its identity) received while the Lease of its role was held by someone else
  (holders from the Lease writes' own audit responses). Lease writes themselves and the
  controller's start-up namespace create (any replica may, unfenced) are not counted.
- `rss-growth`: a replica's RSS grows faster than `rss_limit_mb_per_hour` over the second
  half of its life (`rss_slope`).
- `bad-input-unanswered`, `good-input-unserved`: reported by bench/soak_fuzz.py (`report`):
  a malformed object without the answer the controller owes it, or a good one not served.
  Its objects are fed to none of the rules above (soak_fuzz.ignored).
- `replica-crashed`: reported by bench/soak.py: a replica's process ended other than by the
  fault schedule's kill -9, a lost Lease then a clean stop, or a clean stop on the soak's
  SIGTERM at its end (bench/soak_replicas.exit_cause).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from koordqueue.domain.names import QUEUE_USED_ANNOTATION, QUOTA_NAME_LABEL, QUOTA_PARENT_LABEL
from koordqueue.domain.quantity import ceil_div, parse_nanos
from koordqueue.domain.queue_unit import ADMITTED_PHASES, FINISHED_PHASES

NANO: Final = 1_000_000_000
ADMITTED: Final = frozenset(str(p) for p in ADMITTED_PHASES)
FINISHED: Final = frozenset(str(p) for p in FINISHED_PHASES)
INVARIANTS: Final = (
    "admitted-twice", "quota-over-max", "usage-annotation", "fits-not-admitted",
    "pod-bound-twice", "pod-over-node", "write-not-leader", "rss-growth",
    "bad-input-unanswered", "good-input-unserved", "replica-crashed",
)
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
AGENT: Final = re.compile(r"^koordqueue/\S+ \((?P<identity>[^)]+)\)")
NOT_FENCED: Final = frozenset({("namespaces", "create")})
"""(resource, verb) of writes any replica makes at start-up by design (issue 33's namespace)."""

Nanos = dict[str, int]


@dataclass(frozen=True)
class Violation:
    kind: str
    at: float
    detail: str


@dataclass(frozen=True)
class Quota:
    max: Nanos
    parent: str


@dataclass(frozen=True)
class Takeover:
    lease: str
    previous: str
    holder: str
    at: float
    gap: float
    """Seconds from the previous holder's last write of the Lease (renew or release) to this
    acquisition: the time without a leader that renews."""


def nanos_of(resources: Mapping[str, Any] | None) -> Nanos:
    out: Nanos = {}
    for name, value in (resources or {}).items():
        try:
            out[str(name)] = parse_nanos(value)
        except ValueError:
            continue
    return out


def pod_requests(pod: Mapping[str, Any]) -> Nanos:
    total: Nanos = defaultdict(int)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for name, amount in nanos_of((container.get("resources") or {}).get("requests")).items():
            total[name] += amount
    total["pods"] += NANO
    return dict(total)


def parse_time(text: str) -> float:
    """An audit timestamp (RFC 3339, microseconds, Z) as epoch seconds."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def rss_slope(samples: list[tuple[float, int]]) -> float | None:
    """MB per hour of a least-squares line through the second half of (seconds, bytes)
    samples; None with fewer than 4 samples there (too short a life to judge)."""
    if len(samples) < 8:
        return None
    half = samples[len(samples) // 2:]
    n = len(half)
    mean_t = sum(t for t, _ in half) / n
    mean_r = sum(r for _, r in half) / n
    var = sum((t - mean_t) ** 2 for t, _ in half)
    if var == 0:
        return None
    slope = sum((t - mean_t) * (r - mean_r) for t, r in half) / var  # bytes per second
    return slope * 3600 / 1e6


def role_segments(
    start: float, samples: list[tuple[float, int]], led_from: float | None,
    leader_warmup: float = 0.0,
) -> list[tuple[float, list[tuple[float, int]]]]:
    """A process's (start, samples) as a standby, then as the leader from `led_from`: taking
    over is a start-up of its own (the fold, the writer threads, the caches of what it now
    manages), which a slope through the whole life would read as growth. `leader_warmup`:
    seconds after the takeover left out of the leader's segment: a leader's working set
    grows for minutes, not one (bench/soak.py RSS_LEADER_WARMUP)."""
    if led_from is None:
        return [(start, samples)]
    return [(start, [s for s in samples if s[0] < led_from]),
            (led_from, [s for s in samples if s[0] >= led_from + leader_warmup])]


def pooled_rss_slope(
    lives: Iterable[tuple[float, list[tuple[float, int]]]], warmup: float
) -> tuple[float | None, float]:
    """MB per hour of one least-squares slope through every process's (seconds, bytes)
    samples from `warmup` seconds after its start (`lives`: (start, samples)), each process
    with a level of its own; and the seconds of samples it rests on (None: under 4 samples).

    Why pooled: under the soak's faults no process lives long (a leader is killed or loses
    its Lease every few minutes), so no single life is long enough to judge; but a leak
    raises every life at the same rate, however short, while a restart only drops the level
    back (the per-process levels absorb that drop, which one line through the slot's
    samples would read as flat or falling). The warm-up cuts start-up growth (imports,
    first listings, caches filling), which is not a leak and is over in every life."""
    sums = [0.0, 0.0]  # sum of (t - mean_t) * (r - mean_r), sum of (t - mean_t) ** 2
    count, covered = 0, 0.0
    for start, samples in lives:
        kept = [(t, r) for t, r in samples if t - start >= warmup]
        if len(kept) < 2:
            continue
        mean_t = sum(t for t, _ in kept) / len(kept)
        mean_r = sum(r for _, r in kept) / len(kept)
        sums[0] += sum((t - mean_t) * (r - mean_r) for t, r in kept)
        sums[1] += sum((t - mean_t) ** 2 for t, _ in kept)
        count += len(kept)
        covered += kept[-1][0] - kept[0][0]
    if count < 4 or sums[1] == 0:
        return None, covered
    return sums[0] / sums[1] * 3600 / 1e6, covered


@dataclass
class _Unit:
    quota: str
    request: Nanos
    consumer: tuple[str, str, str]
    phase: str = ""
    finished: bool = False
    waiting_fit_since: float | None = None
    reported_wait: bool = False


@dataclass
class _Pod:
    node: str
    request: Nanos
    done: bool


@dataclass
class Checker:
    oversell: float = 1.0
    quota_window: float = 15.0
    settle: float = 20.0
    bound: float = 30.0
    rss_limit_mb_per_hour: float = 60.0
    roles: dict[str, str] = field(default_factory=dict)
    """identity -> the Lease its role competes for (bench/soak.py registers each replica)."""
    violations: list[Violation] = field(default_factory=list)
    admissions: list[float] = field(default_factory=list)
    takeovers: list[Takeover] = field(default_factory=list)
    writes_checked: int = 0

    def __post_init__(self) -> None:
        self.quotas: dict[str, Quota] = {}
        self._trees: list[tuple[float, dict[str, Quota]]] = [(float("-inf"), {})]
        self.units: dict[str, _Unit] = {}
        self.queue_used: dict[str, dict[str, int]] = {}
        self.nodes: dict[str, Nanos] = {}
        self.pods: dict[str, _Pod] = {}
        self._bindings: dict[str, int] = defaultdict(int)
        self._holders: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self._last_lease_write: dict[str, tuple[float, str]] = {}
        self.last_fault = float("-inf")
        self.faults_active = 0
        self._usage_seen: dict[str, tuple[dict[str, int], float]] = {}
        self._annotated_at: dict[str, float] = {}
        """When each Queue's usage annotation last changed (for a violation's detail)."""
        self._reported: set[tuple[str, str]] = set()

    # --- recording -----------------------------------------------------------------------
    def _violate(self, kind: str, at: float, detail: str, key: str | None = None) -> None:
        if key is not None:
            if (kind, key) in self._reported:
                return
            self._reported.add((kind, key))
        self.violations.append(Violation(kind, at, detail))

    def fault(self, now: float, began: bool | None = None) -> None:
        """A fault was injected now (the bounds that wait for quiet start again); `began`
        True / False: a fault with a duration begins / ends, and nothing is quiet in between
        (bench/soak.py's 30-minute run: an etcd restart took 21 s, longer than `settle`, and
        the usage rule fired inside it, counting from its start)."""
        self.last_fault = max(self.last_fault, now)
        if began is not None:
            self.faults_active = max(0, self.faults_active + (1 if began else -1))

    def quiet_since(self, now: float) -> float:
        """Since when no fault is active: `now` during one, else the last one's end."""
        return now if self.faults_active else self.last_fault

    def report(self, kind: str, at: float, detail: str) -> None:
        """A violation found outside the checker (bench/soak_fuzz.py's answers)."""
        self._violate(kind, at, detail)

    def register(self, identity: str, lease: str) -> None:
        self.roles[identity] = lease

    # --- quotas and Queues ---------------------------------------------------------------
    def on_quota(self, event_type: str | None, obj: Mapping[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        quotas = dict(self.quotas)
        if event_type == "DELETED":
            quotas.pop(name, None)
        else:
            labels = meta.get("labels") or {}
            quotas[name] = Quota(nanos_of((obj.get("spec") or {}).get("max")),
                                 str(labels.get(QUOTA_PARENT_LABEL) or ""))
        if quotas != self.quotas:
            self.quotas = quotas
            self._trees.append((now, quotas))
            # keep the tree in force at the window's start and every later one
            while len(self._trees) > 1 and self._trees[1][0] <= now - self.quota_window:
                self._trees.pop(0)

    def on_queue(self, event_type: str | None, obj: Mapping[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        if event_type == "DELETED":
            self.queue_used.pop(name, None)
            return
        if name not in self.queue_used:
            # a Queue made (again: its quota deleted and created) gets its annotations at the
            # controller's next sync: the settle time starts now (it ran from the recount's
            # last change, long before: the 30-minute run caught a re-made Queue at once)
            self._usage_seen.pop(name, None)
        raw = (meta.get("annotations") or {}).get(QUEUE_USED_ANNOTATION)
        try:
            values = json.loads(raw) if raw else {}
        except ValueError:
            values = {"<unreadable>": -1}
        used = {str(k): int(v) for k, v in values.items() if v}
        if used != self.queue_used.get(name):
            self._annotated_at[name] = now
        self.queue_used[name] = used

    @staticmethod
    def _chain(quota: str, tree: Mapping[str, Quota]) -> list[str] | None:
        """The quota and its ancestors; None when one is missing or the chain loops."""
        chain: list[str] = []
        name = quota
        while name:
            if name in chain or name not in tree:
                return None
            chain.append(name)
            name = tree[name].parent
        return chain

    def _usage(self, tree: Mapping[str, Quota]) -> dict[str, Nanos]:
        used: dict[str, Nanos] = defaultdict(lambda: defaultdict(int))
        for unit in self.units.values():
            if unit.phase in ADMITTED:
                for q in self._chain(unit.quota, tree) or []:
                    for res, amount in unit.request.items():
                        used[q][res] += amount
        return used

    def _over(self, chain: list[str], used: Mapping[str, Mapping[str, int]],
              tree: Mapping[str, Quota], extra: Nanos | None = None) -> str | None:
        """The first (quota, resource) of `chain` over max x oversell, as text; None."""
        for q in chain:
            for res, limit in tree[q].max.items():
                have = used.get(q, {}).get(res, 0) + (extra or {}).get(res, 0)
                if have > limit * self.oversell:
                    return f"{q}/{res}: {have / NANO:g} > {limit / NANO:g} x {self.oversell:g}"
        return None

    def _trees_within(self, now: float) -> list[dict[str, Quota]]:
        """The quota trees seen in the window before `now`, and the one in force at its start."""
        trees: list[dict[str, Quota]] = []
        for start, tree in self._trees:
            if start > now:
                break
            if start <= now - self.quota_window:
                trees = [tree]  # only the latest before the window counts
            else:
                trees.append(tree)
        return trees

    # --- QueueUnits --------------------------------------------------------------------
    def on_unit(self, event_type: str | None, obj: Mapping[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if event_type == "DELETED":
            self.units.pop(uid, None)
            return
        phase = str((obj.get("status") or {}).get("phase") or "")
        unit = self.units.get(uid)
        if unit is None:
            spec = obj.get("spec") or {}
            ref = spec.get("consumerRef") or {}
            unit = self.units[uid] = _Unit(
                quota=str((meta.get("labels") or {}).get(QUOTA_NAME_LABEL) or ""),
                request=nanos_of(spec.get("resource")),
                consumer=(str(meta.get("namespace") or ""), str(ref.get("kind") or ""),
                          str(ref.get("name") or meta.get("name") or "")),
            )
        was = unit.phase
        unit.phase = phase
        if phase in FINISHED:
            unit.finished = True
        if phase not in ADMITTED or was in ADMITTED:
            return
        self.admissions.append(now)
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        if was in FINISHED:
            self._violate("admitted-twice", now, f"{name} admitted again after {was}")
        twins = [u for k, u in self.units.items()
                 if k != uid and u.consumer == unit.consumer and u.phase in ADMITTED]
        if twins:
            self._violate("admitted-twice", now, f"{name}: another unit of {unit.consumer} "
                                                 "is admitted too")
        self._check_admission(name, unit, now)

    def _check_admission(self, name: str, unit: _Unit, now: float) -> None:
        reasons = []
        for tree in self._trees_within(now):
            chain = self._chain(unit.quota, tree)
            if chain is None:
                reasons.append(f"quota {unit.quota!r}: chain missing or looping")
                continue
            over = self._over(chain, self._usage(tree), tree)
            if over is None:
                return  # fits one tree the controller may have acted on
            reasons.append(over)
        self._violate("quota-over-max", now, f"{name} admitted: {'; '.join(reasons)}")

    # --- pods and nodes ----------------------------------------------------------------
    def on_node(self, event_type: str | None, obj: Mapping[str, Any], now: float) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            self.nodes.pop(name, None)
        else:
            self.nodes[name] = nanos_of((obj.get("status") or {}).get("allocatable"))

    def on_pod(self, event_type: str | None, obj: Mapping[str, Any], now: float) -> None:
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        if event_type == "DELETED":
            self.pods.pop(uid, None)
            return
        node = str((obj.get("spec") or {}).get("nodeName") or "")
        done = (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        known = self.pods.get(uid)
        name = f"{meta.get('namespace')}/{meta.get('name')}"
        if known is not None and known.node and node != known.node:
            self._violate("pod-bound-twice", now, f"{name}: {known.node} -> {node or '-'}")
        self.pods[uid] = _Pod(node, pod_requests(obj), done)
        if node and (known is None or not known.node) and not done:
            self._check_node(name, uid, node, now)

    def _check_node(self, name: str, uid: str, node: str, now: float) -> None:
        allocatable = self.nodes.get(node)
        if allocatable is None:
            return  # (a node the watcher has not seen: nothing to compare with)
        used: Nanos = defaultdict(int)
        for pod in self.pods.values():
            if pod.node == node and not pod.done:
                for res, amount in pod.request.items():
                    used[res] += amount
        for res, limit in allocatable.items():
            if used.get(res, 0) > limit:
                self._violate("pod-over-node", now,
                              f"{name} bound to {node}: {res} {used[res] / NANO:g} > "
                              f"{limit / NANO:g}")
                return

    # --- the audit log -----------------------------------------------------------------
    def on_audit(self, event: Mapping[str, Any]) -> None:
        """One audit event (stage ResponseComplete; others are ignored)."""
        if event.get("stage") != "ResponseComplete":
            return
        ref = event.get("objectRef") or {}
        resource, verb = ref.get("resource"), event.get("verb")
        code = int((event.get("responseStatus") or {}).get("code") or 0)
        if resource == "pods" and ref.get("subresource") == "binding" and verb == "create":
            if 200 <= code < 300:
                key = f"{ref.get('namespace')}/{ref.get('name')}"
                self._bindings[key] += 1
                if self._bindings[key] > 1:
                    self._violate("pod-bound-twice", parse_time(event["stageTimestamp"]),
                                  f"{key} bound {self._bindings[key]} times (audit)")
            return
        if verb not in WRITE_VERBS:
            return
        if resource == "leases":
            self._on_lease_write(ref, event, code)
            return
        match = AGENT.match(str(event.get("userAgent") or ""))
        if match is None or (resource, verb) in NOT_FENCED:
            return
        identity = match["identity"]
        lease = self.roles.get(identity)
        if lease is None:
            return  # not a replica this soak started
        self.writes_checked += 1
        at = parse_time(event["requestReceivedTimestamp"])
        holder = self.holder(lease, at)
        if holder != identity:
            self._violate("write-not-leader", at,
                          f"{identity} {verb} {resource}/{ref.get('name')} ({code}) while "
                          f"{lease} was held by {holder or 'nobody'}")

    def _on_lease_write(self, ref: Mapping[str, Any], event: Mapping[str, Any],
                        code: int) -> None:
        lease = str(ref.get("name") or "")
        if not 200 <= code < 300 or lease not in set(self.roles.values()):
            return
        spec = (event.get("responseObject") or {}).get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        at = parse_time(event["stageTimestamp"])
        timeline = self._holders[lease]
        previous = timeline[-1][1] if timeline else ""
        last = self._last_lease_write.get(lease)
        if holder and holder != previous and last is not None:
            self.takeovers.append(Takeover(lease, previous, holder, at, at - last[0]))
        timeline.append((at, holder))
        self._last_lease_write[lease] = (at, holder)

    def led_from(self, identity: str) -> float | None:
        """When `identity` first held its role's Lease, per the Lease writes seen; None: never."""
        for when, holder in self._holders.get(self.roles.get(identity, ""), []):
            if holder == identity:
                return when
        return None

    def holder(self, lease: str, at: float) -> str:
        """Who held `lease` at `at`, per the Lease writes seen ("" before any)."""
        found = ""
        for when, holder in self._holders.get(lease, []):
            if when > at:
                break
            found = holder
        return found

    # --- every second ------------------------------------------------------------------
    def tick(self, now: float) -> None:
        tree = self.quotas
        used = self._usage(tree)
        quiet_since = self.quiet_since(now)
        for name in tree:
            whole = {res: ceil_div(n, NANO) for res, n in used.get(name, {}).items()}
            whole = {res: v for res, v in whole.items() if v}
            seen, since = self._usage_seen.get(name, (None, now))
            if seen != whole:
                self._usage_seen[name] = (whole, now)
                since = now
            if now - max(since, quiet_since) < self.settle or name not in self.queue_used:
                continue
            if self.queue_used[name] != whole:
                written = now - self._annotated_at.get(name, now)
                self._violate("usage-annotation", now,
                              f"Queue {name}: {self.queue_used[name]} != recount {whole} "
                              f"(the recount unchanged for {now - since:.0f} s, the "
                              f"annotation for {written:.0f} s)", key=f"{name}@{since}")
        for uid, unit in self.units.items():
            fits = self._waiting_fits(unit, used, tree)
            if not fits:
                unit.waiting_fit_since = None
                continue
            if unit.waiting_fit_since is None:
                unit.waiting_fit_since = now
            if now - max(unit.waiting_fit_since, quiet_since) > self.bound:
                self._violate("fits-not-admitted", now,
                              f"unit {uid} of {unit.consumer} fits {unit.quota}'s chain and "
                              f"waited {now - unit.waiting_fit_since:.0f} s", key=uid)

    def _waiting_fits(self, unit: _Unit, used: Mapping[str, Mapping[str, int]],
                      tree: Mapping[str, Quota]) -> bool:
        if unit.phase not in ("", "Enqueued"):
            return False
        chain = self._chain(unit.quota, tree)
        return chain is not None and self._over(chain, used, tree, unit.request) is None

    def check_rss(self, name: str, samples: list[tuple[float, int]], now: float) -> float | None:
        slope = rss_slope(samples)
        if slope is not None and slope > self.rss_limit_mb_per_hour:
            self._violate("rss-growth", now, f"{name}: RSS +{slope:.0f} MB/h", key=name)
        return slope

    def check_pooled_rss(self, name: str, slope: float | None, covered: float,
                         min_cover: float, now: float) -> bool:
        """Judge a slot's pooled slope (`pooled_rss_slope`) once its samples cover
        `min_cover` seconds; True when judged."""
        if slope is None or covered < min_cover:
            return False
        if slope > self.rss_limit_mb_per_hour:
            self._violate("rss-growth", now, f"{name}: RSS +{slope:.0f} MB/h over "
                          f"{covered / 60:.0f} min of its processes' lives", key=name)
        return True

    def counts(self) -> dict[str, int]:
        found = {kind: 0 for kind in INVARIANTS}
        for violation in self.violations:
            found[violation.kind] = found.get(violation.kind, 0) + 1
        return found


def per_interval(times: Iterable[float], start: float, width: float) -> list[float]:
    """Events per second in consecutive `width`-second intervals from `start`."""
    buckets: dict[int, int] = defaultdict(int)
    last = -1
    for t in times:
        index = int((t - start) // width)
        if index >= 0:
            buckets[index] += 1
            last = max(last, index)
    return [buckets[i] / width for i in range(last + 1)]
