"""Fixtures shared by the Volcano cases."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordqueue.scheduler.api import JobInfo
from koordqueue.scheduler.framework import registry
from koordqueue.scheduler.framework.interface import Plugin, Vote
from koordqueue.scheduler.framework.session import Session

REJECTER = "test-rejecter"


class Rejecter(Plugin):
    """uthelper.RejecterPlugin: rejects the enqueue of the PodGroup named pgA."""

    name = REJECTER

    def on_session_open(self, session: Session) -> None:
        def vote(job: JobInfo) -> Vote:
            return Vote.REJECT if job.name == "pgA" else Vote.ABSTAIN

        session.add_job_enqueueable_fn(self.name, vote)


@pytest.fixture
def rejecter() -> Iterator[None]:
    """Register the rejecter plugin for one test."""
    registry.register_plugin_builder(REJECTER, Rejecter)
    yield
    registry.unregister_plugin_builder(REJECTER)
