"""Workloads the periodic resync need not look at again: the versions of its last quiet look.

Why: every minute the periodic resync listed each served kind whole and looked at every
workload again, though nearly all were the very versions the controller had already looked
at. With 6,000 Jobs that was ~0.4 s of the owner thread decoding the list and ~0.2 s looking
again (resync_probe_jobs, issue 27); with 15,000 Jobs in bench_scale's shape the resync came
~10 s before its admissions fell from ~60 to ~30 a second while the creators went on (issue
36). The API server meanwhile serialised every Job whole.

A look is quiet when it wrote nothing: no phase, no workload write (a look whose write was
refused, or that wrote, is not). Its record is the versions it decided on: the workload's
resourceVersion, its unit's, the unit's phase and whether the engine admitted it. A resync
listing a workload at the same version, its unit unchanged, has nothing to repair: the same
inputs gave a decision that needed no write. Time-driven decisions (running timeout, back-off)
have their own timers. The resync therefore lists the kind's metadata (PartialObjectMetadata)
and reads whole only the workloads not at a quiet version (`wanted`); one whose version
matched on the pool but whose unit moved on by the time the owner folds it is read again then
(`still_quiet` is the owner's check). Single-object workloads only (a group's members change
one by one); anything else is listed and looked at as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from koordqueue.domain.integrations.reconcile import Target
from koordqueue.kube.api import Kind, ObjectApi
from koordqueue.kube.controller.base import meta, object_key
from koordqueue.kube.controller.state import ControllerState

METADATA_KIND: Final = "PartialObjectMetadata"
READ_ONE_BY_ONE: Final = 100
"""Up to this many objects a resync found changed are read by name; more, by one list (a list
of 15,000 costs about what ~100 single reads do)."""


def listed_key(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(namespace, name) of a listed object, as `read_whole` takes it."""
    m = meta(obj)
    return str(m.get("namespace") or ""), str(m.get("name"))


def read_whole(api: ObjectApi, kind: Kind, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """The objects `keys` (namespace, name) whole: each by itself when few, else one list
    (one gone since is left out: its event, or the next resync, handles it)."""
    if len(keys) > READ_ONE_BY_ONE:
        wanted = set(keys)
        return [o for o in api.list_with_version(kind)[0] if listed_key(o) in wanted]
    found = (api.get(kind, name, namespace) for namespace, name in keys)
    return [o for o in found if o is not None]


class Quiet(NamedTuple):
    """A quiet look at one workload object: what it decided on."""

    unit_key: str
    target: Target
    version: str
    unit_version: str
    phase: str
    admitted: bool


def is_metadata(obj: Mapping[str, Any]) -> bool:
    """An item of a metadata-only listing (no spec, no status)."""
    return obj.get("kind") == METADATA_KIND


class QuietLooks:
    """Workload object key -> its last quiet look (owner thread writes; the pool reads the
    versions only, `wanted`)."""

    def __init__(self, state: ControllerState) -> None:
        self.state = state
        self.looks: dict[str, Quiet] = {}

    def note(self, unit_key: str, target: Target, members: list[dict[str, Any]],
             uid: str) -> None:  # fmt: skip
        """A look at `members` (one object) decided on its unit `uid` and wrote nothing."""
        if len(members) != 1 or target.group:
            return
        unit = self.state.engine.unit(uid)
        unit_obj = self.state.unit_objects.get(uid)
        version = str(meta(members[0]).get("resourceVersion") or "")
        if unit is None or unit_obj is None or not version:
            return
        self.looks[object_key(members[0])] = Quiet(
            unit_key, target, version, str(meta(unit_obj).get("resourceVersion") or ""),
            unit.phase.value, self.state.engine.is_admitted(uid),
        )

    def forget(self, obj: Mapping[str, Any]) -> None:
        self.looks.pop(object_key(obj), None)

    def at_version(self, obj: Mapping[str, Any]) -> Quiet | None:
        """The quiet look at the listed object's very version, if any (any thread)."""
        look = self.looks.get(object_key(obj))
        if look is None or look.version != meta(obj).get("resourceVersion"):
            return None
        return look

    def still_quiet(self, look: Quiet) -> bool:
        """(Owner thread.) The look's unit is as it was then: same version, phase, admission."""
        state = self.state
        uid = state.unit_by_key.get(look.unit_key)
        unit = state.engine.unit(uid) if uid else None
        unit_obj = state.unit_objects.get(uid) if uid else None
        return (
            uid is not None and unit is not None and unit_obj is not None
            and str(meta(unit_obj).get("resourceVersion") or "") == look.unit_version
            and unit.phase.value == look.phase
            and state.engine.is_admitted(uid) == look.admitted
        )  # fmt: skip

    def split(
        self, listed: list[dict[str, Any]]
    ) -> tuple[list[dict[str, Any]], list[tuple[str, str]]]:
        """The listed metadata items at a quiet look's version, and the (namespace, name) of
        the others: those the resync reads whole."""
        quiet: list[dict[str, Any]] = []
        wanted: list[tuple[str, str]] = []
        for item in listed:
            if self.at_version(item) is None:
                wanted.append(listed_key(item))
            else:
                quiet.append(item)
        return quiet, wanted
