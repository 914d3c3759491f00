"""Label selectors as Kubernetes evaluates them (metav1.LabelSelector), as frozen data.

Why frozen and hashable: selectors are parsed once per pod by the kube adapter and shared by
every session; the inter-pod affinity and topology spread state groups pods by selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

SELECTOR_OPERATORS: Final = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


@dataclass(frozen=True, slots=True)
class LabelSelectorRequirement:
    """One `matchExpressions` entry: In, NotIn, Exists or DoesNotExist."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes' requirement semantics (NotIn and DoesNotExist hold on a missing key)."""
        op = self.operator
        if op == "In":
            value = labels.get(self.key)
            return value is not None and value in self.values
        if op == "NotIn":
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == "Exists":
            return self.key in labels
        if op == "DoesNotExist":
            return self.key not in labels
        return False


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed `metav1.LabelSelector`; an empty one selects everything.

    A *missing* selector (Kubernetes' nil, which selects nothing) is represented by None
    where the API allows it.
    """

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    _hash: int = field(default=0, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.match_labels, self.match_expressions)))

    def __hash__(self) -> int:
        return self._hash

    @property
    def empty(self) -> bool:
        """No requirement at all (selects every pod)."""
        return not self.match_labels and not self.match_expressions

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Every matchLabels pair and every expression holds."""
        for key, value in self.match_labels:
            if labels.get(key) != value:
                return False
        return all(req.matches(labels) for req in self.match_expressions)

    def merged(self, extra: Mapping[str, str]) -> LabelSelector:
        """This selector plus `key == value` for each extra pair (topology spread's
        matchLabelKeys merge)."""
        if not extra:
            return self
        pairs = dict(self.match_labels)
        for key, value in extra.items():
            if key in pairs and pairs[key] != value:
                # Two different required values: keep both as requirements (matches nothing).
                return LabelSelector(
                    self.match_labels,
                    (*self.match_expressions, LabelSelectorRequirement(key, "In", (value,))),
                )
            pairs[key] = value
        return LabelSelector(tuple(sorted(pairs.items())), self.match_expressions)

    def invalid(self) -> str | None:
        """Why the selector cannot be evaluated (metav1.LabelSelectorAsSelector errors)."""
        for req in self.match_expressions:
            if req.operator not in SELECTOR_OPERATORS:
                return f"invalid label selector operator {req.operator!r} for key {req.key!r}"
            if req.operator in ("In", "NotIn") and not req.values:
                return f"label selector operator {req.operator} for key {req.key!r} needs values"
            if req.operator in ("Exists", "DoesNotExist") and req.values:
                return f"label selector operator {req.operator} for key {req.key!r} takes no values"
        return None


def selector_matches(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    """A possibly missing selector: None selects nothing (Kubernetes' nil selector)."""
    return selector is not None and selector.matches(labels)


EVERYTHING: Final = LabelSelector()
