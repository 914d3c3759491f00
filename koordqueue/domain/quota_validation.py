"""ElasticQuota validation: what the admission webhook denies or warns about (issue 33).

Koordinator's ElasticQuota webhook (`pkg/webhook/elasticquota`) is the model: a quota's own
fields are checked (no negative or unparseable quantity, min within max, every min resource
limited by max), then its place among the other quotas (no parent edge that closes a cycle, no
is-parent turned off under children). Names are cluster-wide here (SPEC 2.1), so a second quota
with a name already used in another namespace is denied too.

What depends on the order in which quotas are applied is only a warning, so that
`kubectl apply -f quotas/` works in any file order: a parent that does not exist yet, a parent
without is-parent, children whose mins add up to more than the parent's, a queue policy that is
not served.

Every problem is reported at once, each with its field path in the API server's spelling
(`spec.max[cpu]`, `metadata.labels[quota.scheduling.koordinator.sh/parent]`), as
`field.ErrorList` does. Pure: objects in (the API's JSON as dicts), problems out; the webhook
(koordqueue/kube/webhooks/elasticquota.py) and the controller, which refuses the same edits
when the webhook is down (koordqueue/kube/controller/quotas.py), share these rules.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

from koordqueue.domain.names import (
    KNOWN_POLICIES,
    QUEUE_POLICY_KEY,
    QUOTA_IS_PARENT_LABEL,
    QUOTA_PARENT_LABEL,
    REGISTERED_POLICIES,
    ROOT_QUOTA,
)
from koordqueue.domain.quantity import InvalidQuantityError, format_nanos, parse_quantity
from koordqueue.domain.quota import precedence

PARENT_FIELD: Final = f"metadata.labels[{QUOTA_PARENT_LABEL}]"
IS_PARENT_FIELD: Final = f"metadata.labels[{QUOTA_IS_PARENT_LABEL}]"
POLICY_FIELD: Final = f"metadata.labels[{QUEUE_POLICY_KEY}]"

# --- message formats: every problem's text is rendered from one of these --------------------
MSG_NOT_A_MAP: Final = "must be a map of resource name to quantity"
MSG_NOT_A_QUANTITY: Final = (
    "{value!r} is not a Kubernetes quantity such as 2, 500m, 1.5 or 8Gi ({reason})"
)
MSG_BAD_RESOURCE_NAME: Final = "{name!r} is not a resource name"
MSG_NEGATIVE: Final = "{value!r} must not be negative"
MSG_MIN_WITHOUT_MAX: Final = (
    "{resource} has a min but no max: every resource in spec.min must also be in spec.max"
)
MSG_MIN_ABOVE_MAX: Final = "min {min} is above max {max}"
MSG_DUPLICATE_NAME: Final = (
    "an ElasticQuota named {name} already exists in namespace {other}: quota names are "
    "cluster-wide (one quota per name across all namespaces); choose another name"
)
MSG_IGNORED_COPY: Final = (
    "an older ElasticQuota named {name} exists in namespace {other} and is the one in force; "
    "this copy is ignored (quota names are cluster-wide)"
)
MSG_CYCLE: Final = (
    "parent {parent} closes a cycle ({cycle}): every chain of parents must end at "
    "{root} (no parent label)"
)
MSG_IN_CYCLE: Final = "this quota is in a cycle of parents ({cycle}); its units are not admitted"
MSG_IS_PARENT_OFF: Final = (
    "is-parent cannot be turned off while the quota has children ({children}); move or "
    "delete them first"
)
MSG_PARENT_MISSING: Final = (
    "parent quota {parent} does not exist (yet): units of this quota are not admitted until it does"
)
MSG_PARENT_NOT_IS_PARENT: Final = 'parent quota {parent} does not carry the label {label}="true"'
MSG_CHILDREN_NOT_IS_PARENT: Final = (
    'this quota has children ({children}) but not the label {label}="true"'
)
MSG_CHILDREN_MIN: Final = "the children's min adds up to more than this quota's min: {excess}"
MSG_SIBLINGS_MIN: Final = (
    "with its siblings' min, the min under parent {parent} adds up to more than the "
    "parent's min: {excess}"
)
MSG_POLICY_NOT_SERVED: Final = (
    "queue policy {policy!r} is not served (registered: {registered}): the quota's queue admits "
    "nothing until the label names one of them"
)
MSG_POLICY_UNKNOWN: Final = (
    "unknown queue policy {policy!r} (registered: {registered}): the queue uses Priority"
)
MSG_DELETE_PARENT: Final = (
    "this quota has children ({children}): their units are not admitted until it is back or "
    "their parent label changes"
)


class Rule(StrEnum):
    """Which rule a problem breaks (tests and the controller's conditions key on it)."""

    NOT_A_MAP = "NotAMap"
    NOT_A_QUANTITY = "NotAQuantity"
    BAD_RESOURCE_NAME = "BadResourceName"
    NEGATIVE = "Negative"
    MIN_WITHOUT_MAX = "MinWithoutMax"
    MIN_ABOVE_MAX = "MinAboveMax"
    DUPLICATE_NAME = "DuplicateName"
    IGNORED_COPY = "IgnoredCopy"
    CYCLE = "Cycle"
    IS_PARENT_OFF = "IsParentOff"
    PARENT_MISSING = "ParentMissing"
    PARENT_NOT_IS_PARENT = "ParentNotIsParent"
    CHILDREN_NOT_IS_PARENT = "ChildrenNotIsParent"
    CHILDREN_MIN = "ChildrenMin"
    SIBLINGS_MIN = "SiblingsMin"
    POLICY_NOT_SERVED = "PolicyNotServed"
    POLICY_UNKNOWN = "PolicyUnknown"
    DELETE_PARENT = "DeleteParent"


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem: the field it is in, the rule it breaks, and a sentence for a person."""

    field: str
    rule: Rule
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True, slots=True)
class QuotaReview:
    """The answer for one quota: denied if any problem is a denial; warnings either way."""

    denied: tuple[Problem, ...] = ()
    warnings: tuple[Problem, ...] = ()

    @property
    def allowed(self) -> bool:
        return not self.denied


# --- one quota on its own ---------------------------------------------------------------------
def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = obj.get("metadata")
    return value if isinstance(value, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    value = _meta(obj).get("labels")
    return value if isinstance(value, Mapping) else {}


def _resource_list(raw: object, path: str, problems: list[Problem]) -> dict[str, int]:
    """The amounts (nano-units) of the entries that parse; a problem for each that does not."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(Problem(path, Rule.NOT_A_MAP, MSG_NOT_A_MAP))
        return {}
    amounts: dict[str, int] = {}
    for name, value in raw.items():
        where = f"{path}[{name}]"
        if not isinstance(name, str) or not name or len(name) > 253:
            problems.append(
                Problem(where, Rule.BAD_RESOURCE_NAME, MSG_BAD_RESOURCE_NAME.format(name=name))
            )
            continue
        try:
            nanos = parse_quantity(value, where).nanos
        except InvalidQuantityError as exc:
            problems.append(
                Problem(
                    where,
                    Rule.NOT_A_QUANTITY,
                    MSG_NOT_A_QUANTITY.format(value=value, reason=exc.reason),
                )
            )
            continue
        if nanos < 0:
            problems.append(Problem(where, Rule.NEGATIVE, MSG_NEGATIVE.format(value=value)))
            continue
        amounts[name] = nanos
    return amounts


def object_problems(obj: Mapping[str, Any]) -> list[Problem]:
    """Every problem of the quota's own fields (no other quota needed), in field order."""
    problems: list[Problem] = []
    spec = obj.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, Mapping):
        return [Problem("spec", Rule.NOT_A_MAP, "must be a map")]
    max_ = _resource_list(spec.get("max"), "spec.max", problems)
    min_ = _resource_list(spec.get("min"), "spec.min", problems)
    raw_max = spec.get("max")
    max_raw: Mapping[str, Any] = raw_max if isinstance(raw_max, Mapping) else {}
    for name, amount in min_.items():
        where = f"spec.min[{name}]"
        if name not in max_raw:
            problems.append(
                Problem(where, Rule.MIN_WITHOUT_MAX, MSG_MIN_WITHOUT_MAX.format(resource=name))
            )
        elif name in max_ and amount > max_[name]:
            problems.append(
                Problem(
                    where,
                    Rule.MIN_ABOVE_MAX,
                    MSG_MIN_ABOVE_MAX.format(
                        min=format_nanos(amount), max=format_nanos(max_[name])
                    ),
                )
            )
    return problems


# --- the quota among the others ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class QuotaFacts:
    """What the rules between quotas read of one ElasticQuota (lenient: bad amounts are left
    out, so one broken quota does not hide the others' problems)."""

    name: str
    namespace: str
    parent: str = ROOT_QUOTA
    is_parent: bool = False
    policy: str | None = None
    min: Mapping[str, int] = field(default_factory=dict)
    created: str = ""
    """metadata.creationTimestamp (RFC 3339; "" for an object not created yet)."""

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def facts_of(obj: Mapping[str, Any]) -> QuotaFacts:
    m = _meta(obj)
    labels = _labels(obj)
    parent = labels.get(QUOTA_PARENT_LABEL)
    policy = labels.get(QUEUE_POLICY_KEY)
    spec = obj.get("spec")
    scratch: list[Problem] = []
    min_ = _resource_list(spec.get("min"), "spec.min", scratch) if isinstance(spec, Mapping) else {}
    created = m.get("creationTimestamp")
    return QuotaFacts(
        name=str(m.get("name") or ""),
        namespace=str(m.get("namespace") or "default"),
        parent=parent if isinstance(parent, str) and parent else ROOT_QUOTA,
        is_parent=labels.get(QUOTA_IS_PARENT_LABEL) == "true",
        policy=policy if isinstance(policy, str) else None,
        min=min_,
        created=created if isinstance(created, str) else "",
    )


def in_force(copies: Iterable[QuotaFacts]) -> QuotaFacts | None:
    """The copy in force among same-name quotas (None when there is none)."""
    return min(copies, key=lambda q: precedence(q.created, q.namespace), default=None)


def cycle_through(name: str, parent: str, parents: Mapping[str, str]) -> tuple[str, ...] | None:
    """The cycle `name -> parent -> ... -> name` when `name`'s parent is `parent` and the
    others' are `parents` (None: the chain ends at the root or a missing quota, or loops
    without passing through `name`)."""
    path = [name]
    seen = {name}
    current = parent
    while current != ROOT_QUOTA:
        if current == name:
            return (*path, name)
        if current in seen or current not in parents:
            return None
        path.append(current)
        seen.add(current)
        current = parents[current]
    return None


def _excess(total: Mapping[str, int], limit: Mapping[str, int]) -> str:
    over = [
        f"{name} {format_nanos(amount)} > {format_nanos(limit.get(name, 0))}"
        for name, amount in sorted(total.items())
        if amount > limit.get(name, 0)
    ]
    return ", ".join(over)


def _sum(mins: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for amounts in mins:
        for name, amount in amounts.items():
            total[name] = total.get(name, 0) + amount
    return total


def _policy_warning(policy: str | None) -> Problem | None:
    if policy is None or policy in REGISTERED_POLICIES:
        return None
    registered = ", ".join(REGISTERED_POLICIES)
    if policy in KNOWN_POLICIES:
        message = MSG_POLICY_NOT_SERVED.format(policy=policy, registered=registered)
        return Problem(POLICY_FIELD, Rule.POLICY_NOT_SERVED, message)
    message = MSG_POLICY_UNKNOWN.format(policy=policy, registered=registered)
    return Problem(POLICY_FIELD, Rule.POLICY_UNKNOWN, message)


def review_quota(
    new: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    existing: Sequence[Mapping[str, Any]],
) -> QuotaReview:
    """Review a create (`old` None) or an update of `new` against the `existing` quotas
    (every ElasticQuota in the cluster; `new`'s own stored version among them is ignored)."""
    denied = object_problems(new)
    warnings: list[Problem] = []
    me = facts_of(new)
    others = [f for f in map(facts_of, existing) if f.key != me.key and f.name]
    twins = [f for f in others if f.name == me.name]
    if twins:
        first = in_force(twins)
        assert first is not None
        if old is None:
            message = MSG_DUPLICATE_NAME.format(name=me.name, other=first.namespace)
            denied.append(Problem("metadata.name", Rule.DUPLICATE_NAME, message))
        elif in_force([*twins, me]) is not me:
            message = MSG_IGNORED_COPY.format(name=me.name, other=first.namespace)
            warnings.append(Problem("metadata.name", Rule.IGNORED_COPY, message))
    by_name: dict[str, list[QuotaFacts]] = {}
    for other in others:
        if other.name != me.name:
            by_name.setdefault(other.name, []).append(other)
    live = {name: in_force(copies) for name, copies in by_name.items()}
    parents = {name: q.parent for name, q in live.items() if q is not None}
    before = facts_of(old) if old is not None else None

    cycle = cycle_through(me.name, me.parent, parents)
    if cycle is not None:
        shown = " -> ".join(cycle)
        if before is None or before.parent != me.parent:
            message = MSG_CYCLE.format(parent=me.parent, cycle=shown, root=ROOT_QUOTA)
            denied.append(Problem(PARENT_FIELD, Rule.CYCLE, message))
        else:
            warnings.append(Problem(PARENT_FIELD, Rule.CYCLE, MSG_IN_CYCLE.format(cycle=shown)))
    elif me.parent != ROOT_QUOTA:
        parent = live.get(me.parent)
        if parent is None:
            message = MSG_PARENT_MISSING.format(parent=me.parent)
            warnings.append(Problem(PARENT_FIELD, Rule.PARENT_MISSING, message))
        else:
            if not parent.is_parent:
                message = MSG_PARENT_NOT_IS_PARENT.format(
                    parent=me.parent, label=QUOTA_IS_PARENT_LABEL
                )
                warnings.append(Problem(PARENT_FIELD, Rule.PARENT_NOT_IS_PARENT, message))
            siblings = [q.min for q in live.values() if q is not None and q.parent == me.parent]
            total = _sum([*siblings, me.min])
            if excess := _excess(total, parent.min):
                message = MSG_SIBLINGS_MIN.format(parent=me.parent, excess=excess)
                warnings.append(Problem("spec.min", Rule.SIBLINGS_MIN, message))

    children = sorted(q.name for q in live.values() if q is not None and q.parent == me.name)
    if children:
        shown = ", ".join(children)
        if before is not None and before.is_parent and not me.is_parent:
            message = MSG_IS_PARENT_OFF.format(children=shown)
            denied.append(Problem(IS_PARENT_FIELD, Rule.IS_PARENT_OFF, message))
        elif not me.is_parent:
            message = MSG_CHILDREN_NOT_IS_PARENT.format(children=shown, label=QUOTA_IS_PARENT_LABEL)
            warnings.append(Problem(IS_PARENT_FIELD, Rule.CHILDREN_NOT_IS_PARENT, message))
        total = _sum(q.min for q in live.values() if q is not None and q.parent == me.name)
        if excess := _excess(total, me.min):
            message = MSG_CHILDREN_MIN.format(excess=excess)
            warnings.append(Problem("spec.min", Rule.CHILDREN_MIN, message))

    if (policy := _policy_warning(me.policy)) is not None:
        warnings.append(policy)
    return QuotaReview(tuple(denied), tuple(warnings))


def review_quota_delete(
    old: Mapping[str, Any], existing: Sequence[Mapping[str, Any]]
) -> QuotaReview:
    """Deleting is always allowed; a warning names the children it leaves without a parent
    (when no same-name copy in another namespace takes its place)."""
    me = facts_of(old)
    others = [f for f in map(facts_of, existing) if f.key != me.key and f.name]
    if any(f.name == me.name for f in others):
        return QuotaReview()
    children = sorted({f.name for f in others if f.parent == me.name})
    if not children:
        return QuotaReview()
    message = MSG_DELETE_PARENT.format(children=", ".join(children))
    return QuotaReview(warnings=(Problem("metadata.name", Rule.DELETE_PARENT, message),))
