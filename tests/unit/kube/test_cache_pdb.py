"""The scheduler cache carries PodDisruptionBudgets into its snapshots (for the opt-in pdb
plugin): added, updated and deleted by watch events, the same from an incremental build and
from a full one; the relist reads them, and a ClusterRole without them (403) is no error."""

from __future__ import annotations

from typing import Any

from koordqueue.kube.api import POD_DISRUPTION_BUDGET, ApiError, Kind
from koordqueue.kube.scheduler import names
from koordqueue.kube.scheduler.cache import CachedKind, SchedulerCache
from koordqueue.kube.scheduler.scheduler import Scheduler
from koordqueue.kube.settings import ControllerSettings

from .memory_api import MemoryApi


def _pdb(namespace: str, name: str, allowed: int) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}}},
        "status": {"disruptionsAllowed": allowed},
    }


def test_cache_snapshot_carries_pdbs_from_watch_events() -> None:
    cache = SchedulerCache(names.DEFAULT_SCHEDULER_NAME)
    assert cache.build().snapshot.pdbs == ()
    cache.on_event(CachedKind.PDB, "ADDED", _pdb("ns2", "web", 1))
    cache.on_event(CachedKind.PDB, "ADDED", _pdb("ns1", "db", 0))
    built = cache.build()
    assert [(p.namespace, p.name, p.disruptions_allowed) for p in built.snapshot.pdbs] == [
        ("ns1", "db", 0),
        ("ns2", "web", 1),
    ]
    assert built.snapshot.pdbs == cache.rebuild().snapshot.pdbs
    cache.on_event(CachedKind.PDB, "MODIFIED", _pdb("ns2", "web", 0))
    cache.on_event(CachedKind.PDB, "DELETED", _pdb("ns1", "db", 0))
    built = cache.build()
    assert [(p.name, p.disruptions_allowed) for p in built.snapshot.pdbs] == [("web", 0)]
    assert built.snapshot.pdbs == cache.rebuild().snapshot.pdbs


def test_a_pdb_change_does_not_wake_the_session_loop() -> None:
    cache = SchedulerCache(names.DEFAULT_SCHEDULER_NAME)
    cache.work.clear()
    cache.on_event(CachedKind.PDB, "ADDED", _pdb("ns", "web", 1))
    assert not cache.work.is_set()


class _ForbiddenPdbApi(MemoryApi):
    """A server whose ClusterRole predates PDBs: listing them is refused (403)."""

    def list_with_version(
        self, kind: Kind, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        if kind == POD_DISRUPTION_BUDGET:
            raise ApiError(403, "Forbidden", "cannot list", "GET", kind.path())
        return super().list_with_version(kind, namespace, label_selector)


def test_relist_reads_pdbs_into_the_cache() -> None:
    api = MemoryApi()
    api.create(POD_DISRUPTION_BUDGET, _pdb("ns", "web", 2), namespace="ns")
    sched = Scheduler(api, ControllerSettings())  # type: ignore[arg-type]
    listings = sched.relist()
    assert len(listings[POD_DISRUPTION_BUDGET][0]) == 1
    pdbs = sched.cache.build().snapshot.pdbs
    assert [(p.namespace, p.name, p.disruptions_allowed) for p in pdbs] == [("ns", "web", 2)]


def test_relist_without_permission_for_pdbs_treats_them_as_none() -> None:
    sched = Scheduler(_ForbiddenPdbApi(), ControllerSettings())  # type: ignore[arg-type]
    listings = sched.relist()
    assert listings[POD_DISRUPTION_BUDGET] == ([], "")
    assert sched.cache.build().snapshot.pdbs == ()
