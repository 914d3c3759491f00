"""Volcano's rescheduling_test.go argument cases, transcribed (inputs and expected outcomes)."""

from __future__ import annotations

from koordqueue.scheduler.plugins.rescheduling_args import (
    LowNodeUtilizationConf,
    parse_interval,
)


def test_a_bare_number_interval_falls_back_to_5m() -> None:
    assert parse_interval(5) == 300.0  # Volcano's 5m


def test_a_valid_interval_applies() -> None:
    assert parse_interval("10m") == 600.0


def test_an_unparsable_interval_falls_back_to_5m() -> None:
    assert parse_interval("often") == 300.0  # Volcano's 5m


def test_mixed_threshold_types_take_the_int_and_skip_the_string() -> None:
    conf = LowNodeUtilizationConf(thresholds={}, target_thresholds={})
    conf.parse({"thresholds": {"cpu": "20", "memory": 30}})
    assert conf.thresholds == {"memory": 30.0}


def test_a_non_string_key_is_skipped_and_the_others_taken() -> None:
    conf = LowNodeUtilizationConf(thresholds={}, target_thresholds={})
    conf.parse({"targetThresholds": {1: 40, "cpu": 50}})
    assert conf.target_thresholds == {"cpu": 50.0}


def test_defaults_are_volcanos_100_percent() -> None:
    conf = LowNodeUtilizationConf()
    everything = {"cpu": 100.0, "memory": 100.0, "pods": 100.0}
    assert conf.thresholds == conf.target_thresholds == everything
