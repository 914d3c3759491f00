"""The quiet memo: what sessions conclude about the jobs they do not write.

A quiet job (nothing to place, not Pending) is only read by a session. When every action and
plugin declares that its answers on a job depend on that job alone (their `quiet`), the
job's job-valid message, close-hook condition and phase update are worked out once per job
object (`fill_memo`) and merged into every later session's result (`merge_updates`) instead
of being scanned again.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence

from koordqueue.scheduler.api.job_info import JobInfo
from koordqueue.scheduler.framework.interface import Action, Plugin, ValidateResult
from koordqueue.scheduler.framework.result import PhaseUpdate

CloseCondition = Callable[[JobInfo, bool], str | None]
"""A close hook's per-job condition: (job, has a condition already) -> condition or None."""


class QuietMemo:
    """What sessions concluded about jobs they did not write, kept while job and config stay.

    A quiet job (nothing to place, not Pending) is only read by a session: its job-valid
    message, its close-hook condition and its phase update depend on the job alone (for
    plugins and actions that declare `quiet`), so they are worked out once per job object
    and reused.
    `missing` holds the uids whose verdict must be (re)computed; the cache adds a uid
    whenever it remakes that job.
    """

    __slots__ = ("closing", "key", "missing", "order", "updates", "valid", "verdicts")

    def __init__(self) -> None:
        self.key: object = None
        self.verdicts: dict[str, JobInfo] = {}
        """uid -> the job object the verdict is for."""
        self.valid: dict[str, str] = {}
        """uid -> job-valid message (set while the actions scan jobs)."""
        self.closing: dict[str, str] = {}
        """uid -> condition set by a close hook."""
        self.order: list[str] = []
        """uids with a phase update, sorted."""
        self.updates: list[PhaseUpdate] = []
        """Their phase updates, in the same order."""
        self.missing: set[str] = set()

    def drop(self, uid: str) -> None:
        if self.verdicts.pop(uid, None) is None:
            return
        self.valid.pop(uid, None)
        self.closing.pop(uid, None)
        i = bisect_left(self.order, uid)
        if i < len(self.order) and self.order[i] == uid:
            del self.order[i]
            del self.updates[i]

    def put(
        self, job: JobInfo, valid: str | None, closing: str | None, update: PhaseUpdate | None
    ) -> None:
        uid = job.uid
        self.drop(uid)
        self.verdicts[uid] = job
        if valid is not None:
            self.valid[uid] = valid
        if closing is not None:
            self.closing[uid] = closing
        if update is not None:
            i = bisect_left(self.order, uid)
            self.order.insert(i, uid)
            self.updates.insert(i, update)

    def reset(self, key: object, uids: Iterable[str]) -> None:
        self.key = key
        self.verdicts.clear()
        self.valid.clear()
        self.closing.clear()
        self.order.clear()
        self.updates.clear()
        self.missing = set(uids)


def declares_quiet(obj: Plugin | Action) -> bool:
    """Whether the object's own class (not a base) declares `quiet = True`."""
    return vars(type(obj)).get("quiet") is True


def quiet_allowed(actions: Iterable[Action], plugins: Iterable[Plugin]) -> bool:
    """Quiet jobs may be skipped only when every plugin and action declares that its view
    of a job it does not write depends on that job alone."""
    return all(map(declares_quiet, actions)) and all(map(declares_quiet, plugins))


def fill_memo(
    memo: QuietMemo,
    *,
    key: object,
    jobs: Mapping[str, JobInfo],
    own: Collection[str],
    queues: Collection[str],
    job_valid: Callable[[JobInfo], ValidateResult | None] | None,
    close_conditions: Sequence[CloseCondition],
) -> None:
    """Work out the verdict of every quiet job the memo lacks (all of them when `key`, the
    configuration and the set of queues, changed). `job_valid` is None when no action
    scans jobs; `own` are the jobs the session writes (never quiet)."""
    if memo.key != key:
        memo.reset(key, jobs)
    for uid in memo.missing:
        job = jobs.get(uid)
        if job is None or uid in own or job.queue not in queues:
            memo.drop(uid)
            continue
        valid: str | None = None
        if job_valid is not None:
            invalid = job_valid(job)
            if invalid is not None:
                valid = invalid.message
        closing: str | None = None
        for fn in close_conditions:
            answer = fn(job, valid is not None or closing is not None)
            if answer is not None:
                closing = answer
        new = job.session_phase(valid is not None or closing is not None)
        update = (
            PhaseUpdate(uid, job.namespace, job.name, job.phase, new)
            if new is not job.phase
            else None
        )
        memo.put(job, valid, closing, update)
    memo.missing = set()


def merge_updates(
    memo: QuietMemo, own: Iterable[str], scanned: list[PhaseUpdate]
) -> list[PhaseUpdate]:
    """The memoised phase updates of the jobs left quiet merged, by uid, with the scanned
    jobs' ones: a handful of bisections, then one copy of the memo's list in slices
    (nothing to merge: the memo's list itself; callers copy it into the result)."""
    order, memoised = memo.order, memo.updates
    size = len(order)
    # (position, 0, k): scanned update k goes before memo entry `position`;
    # (position, 1, 0): memo entry `position` is dropped (its job was written this
    # session: its own update, if any, is among the scanned ones).
    events: list[tuple[int, int, int]] = []
    for uid in own:
        i = bisect_left(order, uid)
        if i < size and order[i] == uid:
            events.append((i, 1, 0))
    for k, update in enumerate(scanned):
        events.append((bisect_left(order, update.job), 0, k))
    if not events:
        return memoised
    events.sort()
    out: list[PhaseUpdate] = []
    at = 0
    for position, drop, k in events:
        if position > at:
            out += memoised[at:position]
            at = position
        if drop:
            at = position + 1
        else:
            out.append(scanned[k])
    out += memoised[at:]
    return out
