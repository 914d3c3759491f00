"""`koordqueue explain pod` says when --gate-reservation-timeout releases (or released) the
queue reservation of a pod let through the scheduling gate and not yet placed (issue 19,
part 5)."""

from __future__ import annotations

from typing import Any

import pytest

from koordqueue.cli import explain as cli_explain
from koordqueue.kube.api import EVENT, Kind
from koordqueue.kube.scheduler.cache import SchedulerCache
from koordqueue.kube.scheduler.explain_pod import explain_pod, reservation_expired_at
from koordqueue.scheduler import default_config
from koordqueue.scheduler.gates import GATE_NAME, OPT_IN_ANNOTATION
from koordqueue.scheduler.gates import names as gate_names
from tests.unit.cli.helpers import run
from tests.unit.cli.test_explain_pod import NS, cache_of, node, pod

EXPIRED_AT = "2026-12-03T10:00:00Z"


def _admitted() -> dict[str, Any]:
    """Opted in, gate already removed by the scheduler, still pending: it holds a
    reservation. It asks more than any node has, so it stays pending."""
    return pod("p", cpu="8", annotations={OPT_IN_ANNOTATION: "true"})


def _explain(target: dict[str, Any], **kw: Any) -> Any:
    cache = cache_of([node("n1", "4")], [target])
    return explain_pod(target, cache, default_config(), gates_enabled=True, **kw)


def test_a_reserved_pod_under_a_timeout_is_told_when_it_is_released() -> None:
    ex = _explain(_admitted(), reservation_timeout=300)
    assert ex.reservation == gate_names.EXPLAIN_RESERVATION_TIMEOUT.format(
        queue="default", timeout=300)
    assert "--gate-reservation-timeout=300s" in ex.reservation
    assert ex.reservation in ex.notes
    assert ex.to_dict()["reservation"] == ex.reservation


def test_a_reserved_pod_whose_reservation_expired_is_told_when() -> None:
    ex = _explain(_admitted(), reservation_timeout=300, expired_at=EXPIRED_AT)
    assert ex.reservation == gate_names.EXPLAIN_RESERVATION_EXPIRED.format(
        queue="default", at=EXPIRED_AT)
    assert EXPIRED_AT in ex.reservation


def test_without_a_timeout_the_reservation_is_held_until_placed() -> None:
    ex = _explain(_admitted())
    assert ex.reservation == gate_names.EXPLAIN_RESERVATION_HELD.format(queue="default")


def test_a_pod_still_gated_or_not_opted_in_has_no_reservation() -> None:
    gated = pod("p", annotations={OPT_IN_ANNOTATION: "true"}, gates=[GATE_NAME])
    assert _explain(gated, reservation_timeout=300).reservation is None
    assert _explain(pod("p", cpu="8"), reservation_timeout=300).reservation is None


class _Events:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events
        self.asked: list[tuple[Kind, str | None, str | None]] = []

    def list_objects(self, kind: Kind, namespace: str | None = None,
                     label_selector: str | None = None,
                     field_selector: str | None = None) -> list[dict[str, Any]]:
        self.asked.append((kind, namespace, field_selector))
        return self.events


def test_the_expiry_time_is_the_newest_reservation_expired_event() -> None:
    api = _Events([{"lastTimestamp": "2026-12-03T09:00:00Z"},
                   {"lastTimestamp": EXPIRED_AT}])
    assert reservation_expired_at(api, _admitted()) == EXPIRED_AT  # type: ignore[arg-type]
    [(kind, namespace, selector)] = api.asked
    assert (kind, namespace) == (EVENT, NS)
    assert selector == (
        f"involvedObject.uid=uid-p,reason={gate_names.REASON_RESERVATION_EXPIRED}"
    )
    assert reservation_expired_at(_Events([]), _admitted()) is None  # type: ignore[arg-type]


def test_the_cli_passes_the_timeout_and_the_expiry_through(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _admitted()

    def read_pod(namespace: str, name: str, kubeconfig: str | None, context: str | None,
                 scheduler_name: str) -> tuple[dict[str, Any], SchedulerCache, str, str | None]:
        return target, cache_of([node("n1", "4")], [target]), "cluster fake", EXPIRED_AT

    monkeypatch.setattr(cli_explain, "read_pod", read_pod)
    r = run(capsys, "explain", "-n", NS, "pod/p", "--feature-gates",
            "SchedulingGatesQueueAdmission=true", "--gate-reservation-timeout", "300")
    assert r.code == 0, r.err
    assert f"released by --gate-reservation-timeout at {EXPIRED_AT}" in r.out
