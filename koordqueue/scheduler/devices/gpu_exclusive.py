"""deviceshare's GPU exclusivity rules (Volcano v1.15, `deviceshare.GPUExclusiveRules`):
pods that match the same rule never share a vGPU card.

A rule is a set of label: value pairs; a pod matches it when it carries all of them. While a
pod matching rules R is tried on a node, every card already running a pod that matches a
rule of R is closed to it (its share count capped at what is used, so the vGPU allocator
skips it), for the fit, the score and the allocation alike. Pods of different rules, and
pods of none, share cards as before. Only HAMi-core nodes have such cards here (without a
MIG geometry config every node is HAMi-core), which is where Volcano applies the rules. A pod
Releasing when the session opens holds no card (v1.15.1) but still closes the cards its
annotation names to its rules, as Volcano reads them from the annotation then.

Where this differs from Volcano, and why:
- The cards a rule holds are derived from the pods on the cards each time they are asked.
  Volcano derives them the same way when a session opens, then keeps them incrementally;
  after a release inside a session it leaves a card reserved for a rule while a pod of
  *another* rule remains on it. Deriving gives the documented rule ("same-rule only") at
  every moment, and the same answer Volcano's next session gives.
- No memory across sessions (Volcano's persistedGPUs): the scheduler writes a pod's
  vgpu-ids annotation before the next session opens, so the pods themselves carry it.
- A rule entry Volcano drops silently (not a map, a non-string value, empty) is dropped
  here too, and named in a session warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.api.devices import PodDevices
from koordqueue.scheduler.devices.vgpu import ContainerAssignment, VGpuDevices

Fit = tuple[list[ContainerAssignment], float] | str
"""What `VGpuDevices.fit` answers: the cards per container and the score, or a refusal."""


@dataclass(frozen=True, slots=True)
class ExclusiveRule:
    """Label: value pairs a pod must all carry to match (Volcano's exclusiveRule)."""

    labels: tuple[tuple[str, str], ...]

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if not labels:
            return False
        return all(labels.get(key) == value for key, value in self.labels)

    def __str__(self) -> str:
        return "{" + ", ".join(f"{k}={v}" for k, v in self.labels) + "}"


def parse_rules(raw: object) -> tuple[list[ExclusiveRule], list[str]]:
    """The rules of the argument's value and what was dropped from it (Volcano's
    parseExclusiveRules: a list of maps, string keys to string values, empty maps skipped)."""
    if raw is None:
        return [], []
    if not isinstance(raw, list | tuple):
        return [], [f"is not a list of label maps ({raw!r})"]
    rules: list[ExclusiveRule] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            problems.append(f"entry {i} is not a map of labels ({item!r})")
            continue
        labels = {k: v for k, v in item.items() if isinstance(k, str) and isinstance(v, str)}
        dropped = [k for k in item if k not in labels]
        if dropped:
            problems.append(f"entry {i} drops {dropped!r}: label values must be strings")
        if labels:
            rules.append(ExclusiveRule(tuple(sorted(labels.items()))))
        elif not dropped:
            problems.append(f"entry {i} has no labels")
    return rules, problems


def load_rules(arguments: Mapping[str, object]) -> tuple[list[ExclusiveRule], list[str]]:
    """The plugin arguments' rules, and warnings naming what was dropped."""
    rules, problems = parse_rules(arguments.get(dn.GPU_EXCLUSIVE_RULES))
    return rules, [dn.EXCLUSIVE_RULES_BAD.format(problem=p) for p in problems]


def matching_rules(labels: Mapping[str, str] | None, rules: Sequence[ExclusiveRule]) -> list[int]:
    """The indices of the rules a pod with `labels` matches."""
    if not labels:
        return []
    return [i for i, rule in enumerate(rules) if rule.matches(labels)]


class ExclusiveCards:
    """A node's vGPUs under the rules: the cards, and which rules each placed pod matches."""

    __slots__ = ("annotated", "inner", "pod_rules", "rules")

    def __init__(self, inner: VGpuDevices, rules: Sequence[ExclusiveRule]) -> None:
        self.inner = inner
        self.rules = rules
        self.pod_rules: dict[str, frozenset[int]] = {}
        """pod uid -> the rules it matches (pods matching none are not kept)."""
        self.annotated: dict[str, frozenset[int]] = {}
        """pod uid -> the cards its `volcano.sh/vgpu-ids-new` names, for a pod that holds
        none (a Releasing pod when the session opens: Volcano v1.15.1 frees its memory but
        still closes its cards to its rules, read from the annotation)."""

    def track(self, uid: str, labels: Mapping[str, str] | None) -> None:
        """A pod placed on the node: remember the rules it matches."""
        matched = matching_rules(labels, self.rules)
        if matched:
            self.pod_rules[uid] = frozenset(matched)

    def track_annotated(
        self, uid: str, labels: Mapping[str, str] | None, assignment: list[ContainerAssignment],
    ) -> None:
        """A pod on the node holding no card: its annotation's cards (the uuid exactly)
        stay closed to its rules."""
        self.track(uid, labels)
        if uid not in self.pod_rules:
            return
        named = {uuid for container in assignment for uuid, _t, _m, _c in container}
        self.annotated[uid] = frozenset(c.index for c in self.inner.cards if c.uuid in named)

    def untrack(self, uid: str) -> None:
        self.pod_rules.pop(uid, None)
        self.annotated.pop(uid, None)

    def rule_cards(self) -> dict[int, set[int]]:
        """rule -> the indices of the cards running a pod that matches it."""
        out: dict[int, set[int]] = {}
        for card in self.inner.cards:
            for uid in card.pods:
                for rule in self.pod_rules.get(uid, ()):
                    out.setdefault(rule, set()).add(card.index)
        for uid, indices in self.annotated.items():
            for rule in self.pod_rules.get(uid, ()):
                out.setdefault(rule, set()).update(indices)
        return out

    def reserved_for(self, labels: Mapping[str, str] | None) -> set[int]:
        """The cards closed to a pod with `labels`: those running pods of its rules."""
        matched = matching_rules(labels, self.rules)
        if not matched:
            return set()
        cards = self.rule_cards()
        return set().union(*(cards.get(rule, set()) for rule in matched))

    def cap(self, indices: set[int]) -> dict[int, int]:
        """Close the cards (share count = shares used); what `restore` needs to reopen them."""
        saved: dict[int, int] = {}
        for card in self.inner.cards:
            if card.index in indices:
                saved[card.index] = card.number
                card.number = card.used_num
        return saved

    def restore(self, saved: Mapping[int, int]) -> None:
        for card in self.inner.cards:
            if card.index in saved:
                card.number = saved[card.index]

    def fit(
        self, devices: PodDevices, labels: Mapping[str, str] | None, policy: str,
        *, group: str = "", commit: str | None = None,
    ) -> Fit:
        """`VGpuDevices.fit` with the pod's rules' cards closed; a pod given cards
        (`commit`, its uid) is tracked. A refusal the rules alone cause says so."""
        reserved = self.reserved_for(labels)
        if not reserved:
            fitted = self.inner.fit(devices, policy, group=group, commit=commit)
        else:
            saved = self.cap(reserved)
            try:
                fitted = self.inner.fit(devices, policy, group=group, commit=commit)
            finally:
                self.restore(saved)
            if isinstance(fitted, str) and not isinstance(
                self.inner.fit(devices, policy, group=group), str
            ):
                return self._held(labels, reserved)
        if commit is not None and not isinstance(fitted, str):
            self.track(commit, labels)
        return fitted

    def _held(self, labels: Mapping[str, str] | None, reserved: set[int]) -> str:
        rules = " and ".join(str(self.rules[i]) for i in matching_rules(labels, self.rules))
        cards = ", ".join(str(i) for i in sorted(reserved))
        return dn.VGPU_EXCLUSIVE_HELD.format(rules=rules, cards=cards)
