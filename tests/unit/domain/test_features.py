"""Issue 35 point 9: feature gates by Koord-Queue's names and defaults, dependencies refused.

Expectations transcribed from Koord-Queue's pkg/features/features.go (defaultFeatureGates):
QueueUnitConditions beta and on; QueueUnitActive, QueueUnitRequeueState and
MaximumExecutionTime alpha and off. The dependencies are ours (Koord-Queue lets a user turn on
MaximumExecutionTime alone, and its budget then never starts: PodsReady is never written).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from koordqueue.cli.main import main
from koordqueue.domain import features
from koordqueue.domain.features import FeatureGateError, Stage, parse_feature_gates


def test_defaults_and_stages_are_koord_queues() -> None:
    gates = parse_feature_gates("")
    assert (gates.conditions, gates.active, gates.requeue_state, gates.maximum_execution_time) == (
        True,
        False,
        False,
        False,
    )
    assert features.KNOWN["QueueUnitConditions"].stage is Stage.BETA
    for name in ("QueueUnitActive", "QueueUnitRequeueState", "MaximumExecutionTime"):
        assert features.KNOWN[name].stage is Stage.ALPHA


def test_a_koord_queue_gate_line_is_accepted_unchanged() -> None:
    line = "QueueUnitActive=true,QueueUnitRequeueState=true,MaximumExecutionTime=true"
    gates = parse_feature_gates(line)
    assert gates.active and gates.requeue_state and gates.maximum_execution_time
    assert gates.conditions


def test_conditions_can_be_switched_off() -> None:
    assert parse_feature_gates("QueueUnitConditions=false").conditions is False


@pytest.mark.parametrize(
    ("line", "missing"),
    [
        ("MaximumExecutionTime=true", "QueueUnitActive"),
        ("MaximumExecutionTime=true,QueueUnitActive=true,QueueUnitConditions=false",
         "QueueUnitConditions"),
        ("QueueUnitRequeueState=true,QueueUnitConditions=false", "QueueUnitConditions"),
    ],
)
def test_a_gate_whose_dependency_is_off_is_refused_naming_it(line: str, missing: str) -> None:
    with pytest.raises(FeatureGateError) as caught:
        parse_feature_gates(line)
    assert missing in caught.value.reason
    assert f"{missing}=true" in str(caught.value)


def test_maximum_execution_time_alone_names_both_dependencies_it_lacks() -> None:
    with pytest.raises(FeatureGateError) as caught:
        parse_feature_gates("MaximumExecutionTime=true,QueueUnitConditions=false")
    assert "QueueUnitActive and QueueUnitConditions" in caught.value.reason


@pytest.mark.parametrize("line", ["QueueUnitActive", "QueueUnitActive=yes", "NoSuchGate=true"])
def test_malformed_or_unknown_entries_are_refused(line: str) -> None:
    with pytest.raises(FeatureGateError):
        parse_feature_gates(line)


@given(st.dictionaries(st.sampled_from(sorted(features.KNOWN)), st.booleans()))
def test_any_accepted_set_satisfies_every_dependency(chosen: dict[str, bool]) -> None:
    line = ",".join(f"{name}={str(on).lower()}" for name, on in chosen.items())
    try:
        gates = parse_feature_gates(line)
    except FeatureGateError:
        return
    for name, spec in features.KNOWN.items():
        assert gates[name] == chosen.get(name, spec.default)
        if gates[name]:
            assert all(gates[need] for need in spec.needs)


def test_run_refuses_an_unsatisfiable_set_at_start_up(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--feature-gates", "MaximumExecutionTime=true"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "MaximumExecutionTime=true" in err and "QueueUnitActive=true" in err
