"""docs/ stays true to the code: generated reference, metric list, messages, links, examples."""

from __future__ import annotations

import re
from importlib.resources import files

import pytest

from koordqueue.cli.flags import flags_reference_markdown
from koordqueue.domain import names
from koordqueue.kube import metrics
from koordqueue.simulation.explain import Reason
from tests.unit.cli.helpers import EXAMPLES, ROOT

DOCS = ROOT / "docs"


def test_configuration_reference_is_generated_from_the_flags() -> None:
    checked_in = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert checked_in == flags_reference_markdown(), (
        "docs/configuration.md is stale: python -m koordqueue.cli.flags > docs/configuration.md"
    )


def test_every_metric_is_documented() -> None:
    text = (DOCS / "metrics.md").read_text(encoding="utf-8")
    for family in metrics.REGISTRY.collect():
        suffix = "_total" if family.type == "counter" else ""
        assert f"`{family.name}{suffix}`" in text, family.name


def test_troubleshooting_covers_every_explain_reason() -> None:
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    missing = [r.value for r in Reason if f"`{r.value}`" not in text]
    assert not missing


@pytest.mark.parametrize(
    "template",
    [
        names.MSG_LIMITED,
        names.MSG_CYCLE,
        names.MSG_QUOTA_MISSING,
        names.MSG_QUEUE_NOT_FOUND,
        names.MSG_EMPTY_QUOTA_SPEC,
        names.MSG_NO_QUOTA_LABEL,
    ],
)
def test_troubleshooting_quotes_each_message_verbatim(template: str) -> None:
    """Every literal part of the message format appears, in order, in one table row."""
    text = (DOCS / "troubleshooting.md").read_text(encoding="utf-8")
    parts = [p for p in re.split(r"\{[^}]*\}", template) if p.strip()]
    pattern = ".*?".join(re.escape(p) for p in parts)
    assert re.search(pattern, text), template


def test_relative_links_in_docs_resolve() -> None:
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text("utf-8")):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_hierarchy_example_is_the_embedded_default() -> None:
    embedded = (files("koordqueue.simulation") / "examples" / "default.yaml").read_text("utf-8")
    assert (EXAMPLES / "hierarchy.yaml").read_text("utf-8") == embedded
