"""`--feature-gates=Name=true,Other=false` parsing (the Kubernetes flag format)."""

from __future__ import annotations

from typing import Final

from koordqueue.scheduler.gates.names import FEATURE_GATE

KNOWN: Final = {FEATURE_GATE: False}
"""Feature gates and their defaults."""


class FeatureGateError(ValueError):
    """A malformed or unknown entry in --feature-gates."""

    def __init__(self, entry: str, reason: str) -> None:
        self.entry = entry
        super().__init__(f"--feature-gates: {entry!r}: {reason}")


def parse_feature_gates(text: str | None) -> dict[str, bool]:
    """Known gates with their values; unknown names and non-boolean values are errors."""
    gates = dict(KNOWN)
    for raw in (text or "").split(","):
        entry = raw.strip()
        if not entry:
            continue
        name, sep, value = entry.partition("=")
        name, value = name.strip(), value.strip().lower()
        if not sep or value not in ("true", "false"):
            raise FeatureGateError(entry, "expected Name=true or Name=false")
        if name not in KNOWN:
            raise FeatureGateError(entry, f"unknown feature gate (known: {', '.join(KNOWN)})")
        gates[name] = value == "true"
    return gates
