"""What-if: a scenario (a snapshot) replayed as it is and with proposed edits (issue 29 part 2).

Both worlds go through the same simulator, step for step on the same clock, so the only
difference between them is the edits. An edit is checked before anything runs: one naming a
missing quota or unit, an invalid quantity, a parent that would close a cycle, or a quota the
controller itself would refuse (its own validation rules) is an `EditError` naming the edit.

Edit kinds (the flag spelling; an edits file lists the same, one `kind: value` per item):
  max QUOTA=RES, min QUOTA=RES        RES: cpu=12,memory=64Gi (the keys given are replaced)
  parent QUOTA=PARENT                 PARENT: a quota of the snapshot or the root quota
  policy QUOTA=POLICY                 Priority, Block, Intelligent, Round
  priority-threshold QUOTA=N          the Intelligent queue's threshold (its quota annotation)
  set-oversellrate RATE               the controller's --oversellrate
  add NAMESPACE/UNIT=N                N more units like that one, arriving now
  delete-quota QUOTA                  a quota with no child quotas
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from koordqueue.domain.names import (
    KNOWN_POLICIES,
    PRIORITY_THRESHOLD_ANNOTATION,
    ROOT_QUOTA,
)
from koordqueue.domain.quantity import InvalidQuantityError
from koordqueue.domain.queue_unit import Phase
from koordqueue.domain.quota_tree import parse_oversell_rate
from koordqueue.domain.quota_validation import cycle_through, object_problems
from koordqueue.domain.resources import Resources
from koordqueue.simulation.scenario import QuotaDef, Scenario, UnitDef
from koordqueue.simulation.simulator import SimulationResult, simulate

EDIT_KINDS: Final = (
    "max", "min", "parent", "policy", "priority-threshold", "set-oversellrate", "add",
    "delete-quota",
)
ADDED_SUFFIX: Final = "whatif"
"""Units an `add` edit makes are named <unit>-whatif-<n>."""
MAX_ADDED: Final = 10_000
"""More units than this in one `add` is a typo, not a question."""


class EditError(ValueError):
    """A proposed edit that cannot be applied: names the edit as the user gave it."""

    def __init__(self, edit: str, reason: str) -> None:
        self.edit = edit
        self.reason = reason
        super().__init__(f"edit {edit}: {reason}")


@dataclass(frozen=True, slots=True)
class Edit:
    kind: str
    target: str
    value: str
    text: str
    """How the user gave it (`--max team-a=cpu=12`, `edits.yaml:3: max: ...`), for errors."""


def parse_edit(kind: str, raw: str, text: str | None = None) -> Edit:
    """One edit from its kind and `TARGET=VALUE` (set-oversellrate: RATE; delete-quota: QUOTA)."""
    shown = text if text is not None else f"--{kind} {raw}"
    if kind not in EDIT_KINDS:
        raise EditError(shown, f"unknown edit kind {kind!r} (known: {', '.join(EDIT_KINDS)})")
    if kind in ("set-oversellrate", "delete-quota"):
        if not raw:
            raise EditError(shown, "needs a value")
        return Edit(kind, raw if kind == "delete-quota" else "", raw, shown)
    target, eq, value = raw.partition("=")
    if not eq or not target or not value:
        what = "NAMESPACE/UNIT=N" if kind == "add" else f"QUOTA={_VALUE_HELP[kind]}"
        raise EditError(shown, f"expected {what}, got {raw!r}")
    return Edit(kind, target, value, shown)


_VALUE_HELP: Final = {
    "max": "cpu=12,memory=64Gi", "min": "cpu=4", "parent": "PARENT", "policy": "POLICY",
    "priority-threshold": "N",
}


def parse_resources(edit: Edit) -> Resources:
    """`edit.value` as a resource list (`cpu=12,memory=64Gi`); EditError naming the edit."""
    given: dict[str, str] = {}
    for item in edit.value.split(","):
        name, eq, amount = item.strip().partition("=")
        if not eq or not name or not amount:
            raise EditError(edit.text, f"expected RESOURCE=QUANTITY[,...], got {item!r}")
        given[name] = amount
    try:
        return Resources.parse(given, edit.kind)
    except InvalidQuantityError as exc:
        raise EditError(edit.text, f"{exc.field}: {exc.value!r}: {exc.reason}") from exc


def _merged(before: Resources, given: Resources) -> Resources:
    """`before` with the given keys replaced (a 0 stays: a limit of 0 is a limit)."""
    return Resources({**before.as_dict(), **given.as_dict()})


def apply_edits(scenario: Scenario, edits: Sequence[Edit]) -> Scenario:
    """The scenario with every edit applied in order; EditError on the first bad one."""
    quotas = {q.name: q for q in scenario.quotas}
    order = [q.name for q in scenario.quotas]
    units = list(scenario.units)
    rate = scenario.oversell_rate
    for edit in edits:
        if edit.kind == "set-oversellrate":
            try:
                parse_oversell_rate(edit.value)
            except ValueError as exc:
                raise EditError(edit.text, str(exc)) from exc
            rate = edit.value
            continue
        if edit.kind == "add":
            units.extend(_added(edit, units))
            continue
        quota = quotas.get(edit.target)
        if quota is None:
            raise EditError(edit.text, f"no quota {edit.target!r} in the snapshot "
                                       f"(quotas: {', '.join(sorted(quotas)) or 'none'})")
        if edit.kind == "delete-quota":
            children = sorted(q.name for q in quotas.values() if q.parent == edit.target)
            if children:
                raise EditError(edit.text, f"quota {edit.target} has child quotas "
                                           f"({', '.join(children)}): move or delete them first")
            del quotas[edit.target]
            order.remove(edit.target)
            continue
        quotas[edit.target] = _edited_quota(edit, quota, quotas)
    return replace(
        scenario, oversell_rate=rate, quotas=tuple(quotas[n] for n in order), units=tuple(units)
    )


def _edited_quota(edit: Edit, quota: QuotaDef, quotas: Mapping[str, QuotaDef]) -> QuotaDef:
    if edit.kind in ("max", "min"):
        given = parse_resources(edit)
        if edit.kind == "max":
            edited = replace(quota, max=_merged(quota.max, given))
        else:
            edited = replace(quota, min=_merged(quota.min, given))
    elif edit.kind == "parent":
        parent = edit.value
        if parent != ROOT_QUOTA and parent not in quotas:
            raise EditError(edit.text, f"no quota {parent!r} in the snapshot to be the parent")
        parents = {q.name: q.parent for q in quotas.values() if q.name != quota.name}
        cycle = cycle_through(quota.name, parent, parents)
        if cycle is not None:
            raise EditError(edit.text, f"would close a cycle: {' -> '.join(cycle)}")
        edited = replace(quota, parent=parent)
    elif edit.kind == "policy":
        if edit.value not in KNOWN_POLICIES:
            raise EditError(edit.text, f"unknown policy {edit.value!r} "
                                       f"(known: {', '.join(KNOWN_POLICIES)})")
        edited = replace(quota, policy=edit.value)
    else:  # priority-threshold
        try:
            threshold = int(edit.value)
        except ValueError:
            raise EditError(edit.text, f"must be an integer, got {edit.value!r}") from None
        annotations = {**quota.annotations, PRIORITY_THRESHOLD_ANNOTATION: str(threshold)}
        edited = replace(quota, annotations=annotations)
    problems = object_problems(edited.as_object())
    if problems:
        refused = "; ".join(str(p) for p in problems)
        raise EditError(edit.text, f"the controller would refuse quota {quota.name}: {refused}")
    return edited


def _added(edit: Edit, units: Sequence[UnitDef]) -> list[UnitDef]:
    key = edit.target if "/" in edit.target else f"default/{edit.target}"
    like = next((u for u in units if f"{u.namespace}/{u.name}" == key), None)
    if like is None:
        raise EditError(edit.text, f"no unit {key} in the snapshot to copy")
    try:
        count = int(edit.value)
    except ValueError:
        raise EditError(edit.text, f"N must be an integer, got {edit.value!r}") from None
    if not 1 <= count <= MAX_ADDED:
        raise EditError(edit.text, f"N must be 1..{MAX_ADDED}, got {count}")
    taken = {f"{u.namespace}/{u.name}" for u in units}
    width = len(str(count))
    out: list[UnitDef] = []
    for i in range(1, count + 1):
        name = f"{like.name}-{ADDED_SUFFIX}-{i:0{width}d}"
        if f"{like.namespace}/{name}" in taken:
            raise EditError(edit.text, f"unit {like.namespace}/{name} exists already")
        out.append(replace(like, name=name, arrive=0, phase=Phase.ENQUEUED.value,
                           message=None, created=0.0, admissions=(), running_pods=()))
    return out


def with_runtime(scenario: Scenario, runtime: int, steps: int | None) -> Scenario:
    """Every unit runs `runtime` steps once admitted (the admitted ones from step 0), and the
    replay lasts long enough for every unit to have had its turn one after another."""
    units = tuple(u if u.duration is not None else replace(u, duration=runtime)
                  for u in scenario.units)
    total = steps if steps is not None else runtime * (len(units) + 1) + 2
    return replace(scenario, units=units, steps=total)


# --- the difference --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """One unit in one world."""

    phase: str
    message: str
    held: bool
    """Admitted as the replay starts (a snapshot's admitted unit)."""
    admitted_at: int | None
    """The first step the replay admitted it, or None."""
    preempted_at: int | None


@dataclass(frozen=True, slots=True)
class UnitChange:
    key: str
    change: str
    before: Outcome | None
    after: Outcome | None


@dataclass(frozen=True, slots=True)
class QuotaUse:
    name: str
    max_before: str
    max_after: str
    used_before: str
    used_after: str


@dataclass(slots=True)
class WhatIf:
    edits: tuple[Edit, ...]
    before: SimulationResult
    after: SimulationResult
    units: list[UnitChange] = field(default_factory=list)
    order_before: list[str] = field(default_factory=list)
    order_after: list[str] = field(default_factory=list)
    usage: list[QuotaUse] = field(default_factory=list)

    def changed(self) -> list[UnitChange]:
        """Units whose outcome the edits change (not those waiting alike in both worlds)."""
        return [u for u in self.units if u.change not in (UNCHANGED, WAITING)]

    def waiting(self) -> list[UnitChange]:
        """Units waiting in both worlds for the same reason."""
        return [u for u in self.units if u.change == WAITING]


ADMITTED: Final = "admitted"
NOT_ADMITTED: Final = "no longer admitted"
PREEMPTED: Final = "preempted"
NOT_PREEMPTED: Final = "no longer preempted"
SOONER: Final = "admitted sooner"
LATER: Final = "admitted later"
WAITING: Final = "still waiting"
NEW_ADMITTED: Final = "new, admitted"
NEW_WAITING: Final = "new, waiting"
UNCHANGED: Final = "unchanged"


def _outcomes(result: SimulationResult) -> dict[str, Outcome]:
    phases, messages = result.final_phases(), result.final_messages()
    admitted_at: dict[str, int] = {}
    preempted_at: dict[str, int] = {}
    for record in result.steps:
        for key in record.admitted:
            admitted_at.setdefault(key, record.step)
        for key in record.preempted:
            preempted_at.setdefault(key, record.step)
    held = {
        f"{u.namespace}/{u.name}" for u in result.scenario.units
        if u.phase != Phase.ENQUEUED.value
    }
    return {
        key: Outcome(phase, messages.get(key, ""), key in held, admitted_at.get(key),
                     preempted_at.get(key))
        for key, phase in phases.items()
    }


def _admitted(o: Outcome) -> bool:
    return (o.held and o.preempted_at is None) or o.admitted_at is not None


def _change(before: Outcome | None, after: Outcome | None) -> str:
    if after is None:
        return UNCHANGED  # (no edit removes a unit)
    if before is None:
        return NEW_ADMITTED if _admitted(after) else NEW_WAITING
    if (after.preempted_at is None) != (before.preempted_at is None):
        return PREEMPTED if after.preempted_at is not None else NOT_PREEMPTED
    if _admitted(before) != _admitted(after):
        return ADMITTED if _admitted(after) else NOT_ADMITTED
    if not _admitted(after):
        return WAITING if before == after else f"{WAITING} (message changed)"
    if before.admitted_at is not None and after.admitted_at is not None:
        if after.admitted_at < before.admitted_at:
            return SOONER
        if after.admitted_at > before.admitted_at:
            return LATER
    return UNCHANGED if before == after else "changed"


def _order(result: SimulationResult) -> list[str]:
    return [key for record in result.steps for key in record.admitted]


def _usage(before: SimulationResult, after: SimulationResult) -> list[QuotaUse]:
    """Each quota after the first round (the controller's next round) in both worlds."""
    first_before = {u.name: u for u in before.steps[0].usage} if before.steps else {}
    first_after = {u.name: u for u in after.steps[0].usage} if after.steps else {}
    rows = []
    for name in sorted(set(first_before) | set(first_after)):
        b, a = first_before.get(name), first_after.get(name)
        rows.append(QuotaUse(
            name,
            str(b.max) if b else "(none)", str(a.max) if a else "(deleted)",
            str(b.used) if b else "", str(a.used) if a else "",
        ))
    return rows


def what_if(scenario: Scenario, edits: Sequence[Edit]) -> WhatIf:
    """Replay `scenario` as it is and with `edits`, and say what differs."""
    proposed = apply_edits(scenario, edits)
    before, after = simulate(scenario), simulate(proposed)
    out_before, out_after = _outcomes(before), _outcomes(after)
    units = [
        UnitChange(key, _change(out_before.get(key), out_after.get(key)),
                   out_before.get(key), out_after.get(key))
        for key in sorted(set(out_before) | set(out_after))
    ]
    return WhatIf(tuple(edits), before, after, units, _order(before), _order(after),
                  _usage(before, after))
