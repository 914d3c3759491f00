"""Admission checks in a scenario (issue 29: a snapshot's Reserved units).

A quota's `admissionChecks` is its Queue's spec.admissionChecks (read by
domain/admission_checks.py's own parser, so a list the controller would refuse is refused
here, naming the field). A Reserved unit's `admissionChecks` is its status.admissionChecks
(name, state, message); the replay decides on them as the controller does
(domain/reservation.py). A state that is not one of Kueue's four, or a check its queue does
not ask for, is an error naming the field: a scenario says only what the replay reads (a
snapshot leaves a removed check's state out, with a note: it counts as Ready).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from koordqueue.domain import admission_checks as ac
from koordqueue.domain.names import QUOTA_NAME_LABEL
from koordqueue.domain.queue_unit import Phase
from koordqueue.simulation.scenario_fields import (
    ScenarioError,
    line_of,
    list_field,
    maps_of,
    plain,
    str_map,
)

_STATE_KEYS = {"name", "state", "message"}


def queue_checks(source: str, q: Mapping[str, Any], where: str) -> tuple[ac.CheckSpec, ...]:
    """A quota's `admissionChecks`: the checks its Queue asks for."""
    raw = q.get(ac.CHECKS_FIELD)
    if raw is None:
        return ()
    try:
        return ac.parse_checks(plain(raw), f"{where}.{ac.CHECKS_FIELD}")
    except ac.InvalidAdmissionCheckError as exc:
        raise ScenarioError(source, line_of(q, ac.CHECKS_FIELD), exc.field, exc.reason) from exc


def unit_labels(source: str, u: Mapping[str, Any], where: str) -> dict[str, str]:
    """A unit's `labels` (those a check's labelSelector reads); its quota is `quota:`."""
    labels = str_map(source, u, "labels", where)
    if QUOTA_NAME_LABEL in labels:
        raise ScenarioError(source, line_of(u, "labels"), f"{where}.labels.{QUOTA_NAME_LABEL}",
                            "say the unit's quota with quota:")
    return labels


def unit_checks(
    source: str,
    u: Mapping[str, Any],
    where: str,
    phase: str,
    asked: Mapping[str, tuple[ac.CheckSpec, ...]],
) -> tuple[ac.CheckState, ...]:
    """A unit's `admissionChecks` states; `asked`: each quota's checks by quota name."""
    listed = list_field(source, u, ac.CHECKS_FIELD)
    if listed and phase != Phase.RESERVED.value:
        raise ScenarioError(source, line_of(u, ac.CHECKS_FIELD), f"{where}.{ac.CHECKS_FIELD}",
                            f"only a Reserved unit has check states, not {phase}")
    quota = u.get("quota")
    known = [c.name for c in asked.get(quota, ())] if isinstance(quota, str) else []
    out: list[ac.CheckState] = []
    for field, entry in maps_of(source, u, ac.CHECKS_FIELD, listed, _STATE_KEYS, where):
        name, state = entry.get("name"), entry.get("state", ac.PENDING)
        message = entry.get("message", "")
        if not isinstance(name, str) or not name:
            raise ScenarioError(source, line_of(entry, "name"), f"{field}.name",
                                "must be a non-empty string")
        if name not in known:
            said = ", ".join(known) if known else "none"
            raise ScenarioError(source, line_of(entry, "name"), f"{field}.name",
                                f"{name!r} is no admission check of quota {quota}'s queue "
                                f"(it asks for: {said})")
        if any(s.name == name for s in out):
            raise ScenarioError(source, line_of(entry, "name"), f"{field}.name",
                                f"duplicate check {name!r}")
        if state not in ac.STATES:
            raise ScenarioError(source, line_of(entry, "state"), f"{field}.state",
                                f"must be one of {', '.join(ac.STATES)}, got {state!r}")
        if not isinstance(message, str):
            raise ScenarioError(source, line_of(entry, "message"), f"{field}.message",
                                "must be a string")
        out.append(ac.CheckState(name, state, "", message))
    return tuple(out)

