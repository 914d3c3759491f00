"""`--feature-gates` for the scheduler side: the one parser and gate set of domain/features.py."""

from __future__ import annotations

from koordqueue.domain.features import KNOWN, FeatureGateError, FeatureGates, parse_feature_gates

__all__ = ["KNOWN", "FeatureGateError", "FeatureGates", "parse_feature_gates"]
