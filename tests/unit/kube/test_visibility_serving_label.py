"""The leader's pod carries the visibility Service's label only once it has a round."""

from __future__ import annotations

import time
from typing import Any

from koordqueue.domain import names
from koordqueue.domain.round import RoundResult
from koordqueue.kube.api import ApiError, Kind
from koordqueue.kube.visibility.serving_label import ServingLabel
from koordqueue.kube.visibility.view import Publication


class PodApi:
    def __init__(self, refuse: int = 0) -> None:
        self.patches: list[tuple[str, str | None, dict[str, Any]]] = []
        self.refuse = refuse

    def merge_patch(self, kind: Kind, name: str, patch: dict[str, Any],
                    namespace: str | None = None, subresource: str | None = None
                    ) -> dict[str, Any]:
        assert kind.plural == "pods"
        if self.refuse:
            self.refuse -= 1
            raise ApiError(500, "InternalError", "try again", "PATCH", "/pods")
        self.patches.append((name, namespace, patch))
        return {}


def labels(api: PodApi) -> list[str | None]:
    return [p[2]["metadata"]["labels"][names.VISIBILITY_SERVING_LABEL] for p in api.patches]


def test_off_at_start_on_after_the_first_round_off_at_stop() -> None:
    api = PodApi()
    label = ServingLabel.from_env(api, {"POD_NAME": "ctl-0", "POD_NAMESPACE": "koord-queue"})
    assert label is not None
    publication = Publication()
    label.serve_once_published(publication)
    time.sleep(0.7)
    assert labels(api) == [None]  # a standby (no round) is not selected
    publication.publish(RoundResult(), 1.0)
    deadline = time.monotonic() + 5
    while labels(api) != [None, "serving"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert labels(api) == [None, "serving"]
    assert api.patches[-1][:2] == ("ctl-0", "koord-queue")
    label.stop()
    assert labels(api) == [None, "serving", None]


def test_a_refused_patch_is_tried_again_and_outside_a_pod_nothing_is_done() -> None:
    api = PodApi(refuse=2)  # the start-up clear and the first try are refused
    label = ServingLabel(api, "ctl-1", "koord-queue")
    publication = Publication()
    publication.publish(RoundResult(), 1.0)
    label.serve_once_published(publication)
    deadline = time.monotonic() + 5
    while labels(api) != ["serving"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert labels(api) == ["serving"]
    label.stop()
    assert ServingLabel.from_env(api, {}) is None
