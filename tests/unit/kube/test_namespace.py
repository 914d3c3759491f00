"""The controller's namespace at start-up (issue 33 part 3): made when missing and allowed,
else start-up fails naming it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from koordqueue.kube.api import NAMESPACE, ApiError, Kind
from koordqueue.kube.namespace import NamespaceMissingError, ensure_namespace
from tests.unit.kube.memory_api import MemoryApi


class Refusing(MemoryApi):
    """An API where this process may not create (or, with `read=False`, read) namespaces."""

    def __init__(self, read: bool = True) -> None:
        super().__init__()
        self.read = read

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        if not self.read:
            raise ApiError(403, "Forbidden", "namespaces is forbidden", "GET", kind.path())
        return super().get(kind, name, namespace)

    def create(
        self, kind: Kind, body: Mapping[str, Any], namespace: str | None = None
    ) -> dict[str, Any]:
        raise ApiError(403, "Forbidden", "cannot create namespaces", "POST", kind.path())


def test_a_missing_namespace_is_created_once() -> None:
    api = MemoryApi()
    assert ensure_namespace(api, "koord-queue") is True
    assert api.get(NAMESPACE, "koord-queue") is not None
    assert ensure_namespace(api, "koord-queue") is False


def test_a_namespace_that_may_not_be_created_fails_start_up_naming_it() -> None:
    with pytest.raises(NamespaceMissingError) as raised:
        ensure_namespace(Refusing(), "team-queues")
    message = str(raised.value)
    assert message.startswith("namespace team-queues does not exist and could not be created")
    assert "403 Forbidden" in message and "kubectl create namespace team-queues" in message
    assert "--namespace" in message


def test_a_namespace_we_may_not_read_is_taken_as_existing() -> None:
    assert ensure_namespace(Refusing(read=False), "koord-queue") is False
