"""Which definition of an ElasticQuota is in force: one rule for the controller and explain.

The controller refuses an object that breaks a rule of its own fields, or whose parent edit
would close a cycle, and keeps the definition in force before it (issue 33: a refused edit
undoes no admission). That definition lives in the controller's memory; so that a restarted
controller and `koordqueue explain` (which folds the listed objects afresh) read the same one,
the controller also writes it into the quota's status (`status.lastValid`: the labels and spec
it accepted) while the object is refused, and removes it once an edit is accepted.

`fold_quota` is the rule: the object's own definition when it passes `check_quota`, else the
one in force in the tree (the running controller), else the one its status keeps (a fresh
fold), else none. Of same-name copies in several namespaces the tree keeps the oldest in force
(`quota.precedence`), the same for every fold.

A parent edit refused because it would close a cycle passes every rule of its own fields, so a
fresh fold must find the cycle again: it takes the kept definition as the one the edit changes
and folds such objects after the others (`fold_order`), when the parents they would loop
through are in the tree. Without that a restarted controller and explain accepted the edit the
running controller refused (b -> a while a -> b) and folded a loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from koordqueue.domain import names
from koordqueue.domain.quota import InvalidQuotaError, QuotaSpec, precedence, quota_from_object
from koordqueue.domain.quota_tree import QuotaTree
from koordqueue.domain.quota_validation import Problem, Rule, cycle_through, object_problems

_Obj = TypeVar("_Obj", bound=Mapping[str, Any])


@dataclass(frozen=True, slots=True)
class Folded:
    """What to fold in for one object: the problems that refused it (none when accepted),
    and the definition in force (the object's own, an earlier valid one, or none)."""

    problems: tuple[Problem, ...]
    spec: QuotaSpec | None
    kept: bool = False
    """`spec` is an earlier definition: the object itself was refused."""


def check_quota(
    obj: Mapping[str, Any], tree: QuotaTree
) -> tuple[tuple[Problem, ...], QuotaSpec | None]:
    """(problems, the object's definition or None when it is refused): its own fields'
    rules, and, for a parent edit of the copy in force, no cycle through it."""
    problems = object_problems(obj)
    if problems:
        return tuple(problems), None
    try:
        spec = quota_from_object(obj)
    except InvalidQuotaError as exc:
        return (Problem(exc.field, Rule.NOT_A_MAP, exc.reason),), None
    before = in_force_copy(tree, spec.name, spec.namespace)
    if before is None:
        before = last_valid(obj)  # a fresh fold of a refused edit: the kept one is in force
    live = tree.get(spec.name)
    # this copy is (or, by precedence, becomes) the one in force: its parent is the tree's
    # (a fresh fold may meet another namespace's younger copy first)
    in_force = live is None or live.namespace == spec.namespace or (
        precedence(spec.created, spec.namespace) < precedence(live.created, live.namespace)
    )
    if before is not None and before.parent != spec.parent and in_force:
        parents = {q.name: q.parent for q in tree if q.name != spec.name}
        cycle = cycle_through(spec.name, spec.parent, parents)
        if cycle is not None:
            message = names.MSG_QUOTA_CYCLE_REFUSED.format(
                parent=spec.parent, cycle=" -> ".join(cycle)
            )
            field = f"metadata.labels[{names.QUOTA_PARENT_LABEL}]"
            return (Problem(field, Rule.CYCLE, message),), None
    return (), spec


def fold_order(objects: Iterable[_Obj]) -> list[_Obj]:
    """The order a fresh fold takes quotas in: those whose status keeps a refused edit's
    definition last, so that the cycle that refused it is in the tree when they are checked;
    of those, the ones refused for their own fields first (what they keep goes in as it is,
    and may be part of that cycle), the parent edits that may close a cycle after them."""
    listed = list(objects)
    return sorted(listed, key=lambda o: (last_valid(o) is not None, not object_problems(o)))


def in_force_copy(tree: QuotaTree, name: str, namespace: str) -> QuotaSpec | None:
    """The definition the tree holds for this namespace's copy of `name`, if any."""
    return next((q for q in tree.copies(name) if q.namespace == namespace), None)


def fold_quota(obj: Mapping[str, Any], tree: QuotaTree) -> Folded:
    """The definition of `obj`'s quota to fold in (see the module docstring)."""
    problems, spec = check_quota(obj, tree)
    if spec is not None:
        return Folded((), spec)
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    namespace = str(meta.get("namespace") or "default")
    kept = in_force_copy(tree, name, namespace) or last_valid(obj)
    return Folded(problems, kept, kept is not None)


def last_valid(obj: Mapping[str, Any]) -> QuotaSpec | None:
    """The definition `status.lastValid` keeps for a refused object (None when absent or
    not a valid definition itself)."""
    kept = (obj.get("status") or {}).get(names.QUOTA_LAST_VALID_FIELD)
    meta = obj.get("metadata")
    if not isinstance(kept, Mapping) or not isinstance(meta, Mapping):
        return None
    rebuilt = {"metadata": {**meta, "labels": kept.get("labels") or {}},
               "spec": kept.get("spec") or {}}
    if object_problems(rebuilt):
        return None
    try:
        return quota_from_object(rebuilt)
    except InvalidQuotaError:
        return None


def last_valid_status(spec: QuotaSpec) -> dict[str, Any]:
    """`status.lastValid` for a definition kept in force: the labels and spec it came from
    (what CheckUsage and the tree read of it)."""
    labels: dict[str, str] = {}
    if spec.parent != names.ROOT_QUOTA:
        labels[names.QUOTA_PARENT_LABEL] = spec.parent
    if spec.is_parent:
        labels[names.QUOTA_IS_PARENT_LABEL] = "true"
    body: dict[str, Any] = {}
    if spec.max:
        body["max"] = spec.max.to_quantities()
    if spec.min:
        body["min"] = spec.min.to_quantities()
    return {"labels": labels, "spec": body}


__all__ = [
    "Folded",
    "check_quota",
    "fold_order",
    "fold_quota",
    "in_force_copy",
    "last_valid",
    "last_valid_status",
]
