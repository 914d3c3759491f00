"""deviceshare's GPU exclusivity rules: the cases of volcano-sh/volcano v1.15.1
pkg/scheduler/plugins/deviceshare/gpuexclusive_test.go (all ten test functions), then the
rules in a session: cards closed to pods of the same rule, the refusal naming the rule, the
score taken with the cards closed, running pods' cards closed when the session opens.

Checked failing with the feature switched off (no `deviceshare.GPUExclusiveRules`, or
`ExclusiveCards.reserved_for` answering no cards): each session case says what then happens.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from koordqueue.scheduler.api import device_names as dn
from koordqueue.scheduler.devices.gpu_exclusive import (
    ExclusiveCards,
    load_rules,
    matching_rules,
    parse_rules,
)
from koordqueue.scheduler.devices.vgpu import PodUsage, VGpuCard, VGpuDevices
from koordqueue.scheduler.framework import open_session
from koordqueue.scheduler.framework.interface import Arguments

from .devices import annotations_of, cluster, conf, placed, pod_object, schedule, vgpu_node

TRAINING = {"app": "training", "team": "ml"}
INFERENCE = {"workload": "inference"}
RULES_RAW = [dict(TRAINING), dict(INFERENCE)]
RULES, _ = parse_rules(RULES_RAW)


def _card(index: int, number: int, used_num: int, pods: tuple[str, ...] = ()) -> VGpuCard:
    """Volcano's makeTestGPUDevice: 16384 MiB, healthy, NVIDIA, the given pods on it."""
    card = VGpuCard(index, f"GPU-{index}", number, 16384, "NVIDIA", True, used_num)
    for uid in pods:
        card.pods[uid] = PodUsage()
    return card


def _cards(*cards: VGpuCard, placed: Mapping[str, Mapping[str, str]] | None = None,
           ) -> ExclusiveCards:
    """Volcano's makeExclusiveWrapper on "test-node"; `placed`: pod uid -> its labels."""
    wrapper = ExclusiveCards(VGpuDevices("test-node", list(cards)), RULES)
    for uid, labels in (placed or {}).items():
        wrapper.track(uid, labels)
    return wrapper


# --- rule matching -------------------------------------------------------------------------

@pytest.mark.parametrize(("labels", "rule", "expected"), [
    (TRAINING, 0, True),
    ({**TRAINING, "env": "prod"}, 0, True),
    ({"app": "training"}, 0, False),
    ({"app": "training", "team": "data"}, 0, False),
    (INFERENCE, 1, True),
    (None, 0, False),
], ids=["matches rule 0", "extra labels", "missing one label", "wrong value",
        "matches rule 1", "nil labels"])
def test_pod_matches_rule(labels: Mapping[str, str] | None, rule: int, expected: bool) -> None:
    """TestPodMatchesRule."""
    assert RULES[rule].matches(labels) is expected


@pytest.mark.parametrize(("labels", "count"), [
    (TRAINING, 1), (INFERENCE, 1), ({**TRAINING, **INFERENCE}, 2), ({"app": "serving"}, 0),
    (None, 0),
], ids=["rule 0 only", "rule 1 only", "both rules", "no rules", "nil labels"])
def test_matching_rules(labels: Mapping[str, str] | None, count: int) -> None:
    """TestMatchingRules."""
    assert len(matching_rules(labels, RULES)) == count


# --- configuration ---------------------------------------------------------------------------

def test_load_gpu_exclusive_config() -> None:
    """TestLoadGPUExclusiveConfig: no rules by default; rules from a list of maps, in
    order; a map whose keys are not all strings keeps its string pairs (Volcano's
    map[interface{}]interface{} case, as a YAML decoder may give it)."""
    assert load_rules(Arguments({})) == ([], [])
    rules, warnings = load_rules(Arguments({dn.GPU_EXCLUSIVE_RULES: RULES_RAW}))
    assert [dict(r.labels) for r in rules] == [TRAINING, INFERENCE] and warnings == []
    rules, warnings = load_rules(Arguments({dn.GPU_EXCLUSIVE_RULES: [{"app": "training",
                                                                       1: "x"}]}))
    assert [dict(r.labels) for r in rules] == [{"app": "training"}]
    assert len(warnings) == 1 and "entry 0 drops [1]" in warnings[0]


@pytest.mark.parametrize("raw", [None, "not a slice", [], [{}]],
                         ids=["nil input", "wrong type", "empty slice", "empty map skipped"])
def test_parse_exclusive_rules_handles_edge_cases(raw: object) -> None:
    """TestParseExclusiveRulesHandlesEdgeCases: no rules from any of these. Here a value
    that was not empty says what was dropped."""
    rules, problems = parse_rules(raw)
    assert rules == []
    assert bool(problems) is (raw not in (None, []))


# --- capping and reservations ----------------------------------------------------------------

def test_cap_gpus_only_affects_specified_indices() -> None:
    """TestCapGPUsOnlyAffectsSpecifiedIndices: capping cards 0 and 1 sets their share count
    to the shares used (1); cards 2 and 3 keep 10; restoring gives every card 10 back."""
    wrapper = _cards(_card(0, 10, 1), _card(1, 10, 1), _card(2, 10, 0), _card(3, 10, 0))
    saved = wrapper.cap({0, 1})
    assert [c.number for c in wrapper.inner.cards] == [1, 1, 10, 10]
    wrapper.restore(saved)
    assert [c.number for c in wrapper.inner.cards] == [10, 10, 10, 10]


def _two_rules_placed() -> ExclusiveCards:
    """pod-a (rule 0) on card 0, pod-b (rule 1) on card 1, card 2 idle."""
    return _cards(_card(0, 10, 1, ("uid-pod-a",)), _card(1, 10, 1, ("uid-pod-b",)),
                  _card(2, 10, 0), placed={"uid-pod-a": TRAINING, "uid-pod-b": INFERENCE})


def test_reserved_gpus_for_pod() -> None:
    """TestReservedGPUsForPod: a new rule-0 pod sees card 0 closed, not card 1 (same-rule
    only); a pod of no rule sees nothing closed."""
    wrapper = _two_rules_placed()
    assert wrapper.rule_cards() == {0: {0}, 1: {1}}
    assert wrapper.reserved_for(TRAINING) == {0}
    assert wrapper.reserved_for({"app": "serving"}) == set()


def test_pod_matching_multiple_rules_sees_union_of_reserved_gpus() -> None:
    """TestPodMatchingMultipleRulesSeesUnionOfReservedGPUs: cards 0 and 1, not 2."""
    assert _two_rules_placed().reserved_for({**TRAINING, **INFERENCE}) == {0, 1}


def test_non_matching_pod_does_not_reserve() -> None:
    """TestNonMatchingPodDoesNotReserve: nothing closed, and nothing tracked for it."""
    wrapper = _cards(_card(0, 10, 0))
    assert wrapper.reserved_for({"app": "serving"}) == set()
    wrapper.track("uid-pod-x", {"app": "serving"})
    assert wrapper.pod_rules == {}


def test_end_to_end_exclusive() -> None:
    """TestEndToEndExclusive: with pod-a (rule 0) on card 0 and pod-b (rule 1) on card 1 of
    four, a training pod finds 3 cards with a share left (only card 0 closed); an unrelated
    pod closes nothing and every card keeps 10."""
    wrapper = _cards(_card(0, 10, 1, ("uid-pod-a",)), _card(1, 10, 1, ("uid-pod-b",)),
                     _card(2, 10, 0), _card(3, 10, 0),
                     placed={"uid-pod-a": TRAINING, "uid-pod-b": INFERENCE})
    saved = wrapper.cap(wrapper.reserved_for(TRAINING))
    available = sum(c.number > c.used_num for c in wrapper.inner.cards)
    wrapper.restore(saved)
    assert available == 3
    assert wrapper.reserved_for({"app": "serving"}) == set()
    assert [c.number for c in wrapper.inner.cards] == [10, 10, 10, 10]


VGPU = {dn.VGPU_ENABLE: "true"}
RULED = {**VGPU, dn.GPU_EXCLUSIVE_RULES: RULES_RAW}
TWO = [("GPU-a", 10, 16000, "NVIDIA-A100"), ("GPU-b", 10, 16000, "NVIDIA-A100")]


def test_on_session_open_wraps_devices() -> None:
    """TestOnSessionOpenWrapsDevices, through the session as it opens: pod-a (rule 0) runs
    on the node's first card (its vgpu-ids annotation); the node's cards are governed by
    the rules and rule 0 holds card 0 only. Without rules no node is governed."""
    running = pod_object("pod-a", [{dn.VGPU_NUMBER: "1"}], node="n1", running=True,
                         labels=TRAINING, annotations={dn.VGPU_IDS: "GPU-a,NVIDIA,16000,0:"})
    snapshot = cluster([vgpu_node("n1", TWO)], [running])
    state = open_session(snapshot, conf(RULED)).plugins[dn.PLUGIN_NAME].state  # type: ignore[attr-defined]
    assert state.exclusive["n1"].rule_cards() == {0: {0}}
    snapshot = cluster([vgpu_node("n1", TWO)], [running])
    state = open_session(snapshot, conf(VGPU)).plugins[dn.PLUGIN_NAME].state  # type: ignore[attr-defined]
    assert state.exclusive == {}


# --- the rules in a session ------------------------------------------------------------------

def _small(name: str, labels: Mapping[str, str] | None) -> dict[str, object]:
    return pod_object(name, [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000"}], labels=labels)


def test_pods_of_one_rule_take_separate_cards_and_the_next_is_refused_naming_the_rule() -> None:
    """Two cards of 10 shares. a and b (rule 0) get a card each (highest index first); c
    (rule 0 too) is refused, the reason naming the rule and the cards; d (no rule) shares.
    Without rules every pod shares GPU-b."""
    pods = [_small("a", TRAINING), _small("b", TRAINING), _small("c", TRAINING),
            _small("d", {"app": "serving"})]
    result = schedule(cluster([vgpu_node("n1", TWO)], pods), conf(RULED))
    assert placed(result) == {"a": "n1", "b": "n1", "d": "n1"}
    ids = {p: annotations_of(result, p)[dn.VGPU_IDS].split(",")[0] for p in ("a", "b", "d")}
    assert ids == {"a": "GPU-b", "b": "GPU-a", "d": "GPU-b"}
    message = result.pod_cause("ns1-c", "ns1/c")
    assert message is not None
    assert ("deviceshare: hami-vgpu GPU-exclusive rule {app=training, team=ml}: "
            "GPU 0, 1 already run pods of the same rule") in message
    off = schedule(cluster([vgpu_node("n1", TWO)], pods), conf(VGPU))
    assert placed(off) == {p: "n1" for p in "abcd"}
    assert {annotations_of(off, p)[dn.VGPU_IDS].split(",")[0] for p in "abcd"} == {"GPU-b"}


def test_a_running_pod_of_the_rule_closes_its_card() -> None:
    """An inference pod runs on GPU-b: the next inference pod takes GPU-a, a training pod
    GPU-b (different rules share). Without rules both take GPU-b."""
    running = pod_object("r", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000"}], node="n1",
                         running=True, labels=INFERENCE,
                         annotations={dn.VGPU_IDS: "GPU-b,NVIDIA,1000,0:"})
    pods = [running, _small("inf", INFERENCE), _small("train", TRAINING)]
    for arguments, expected in ((RULED, {"inf": "GPU-a", "train": "GPU-b"}),
                                (VGPU, {"inf": "GPU-b", "train": "GPU-b"})):
        result = schedule(cluster([vgpu_node("n1", TWO)], pods), conf(arguments))
        assert {p: annotations_of(result, p)[dn.VGPU_IDS].split(",")[0]
                for p in ("inf", "train")} == expected


def test_the_score_is_taken_with_the_cards_closed() -> None:
    """binpack, weight 10. n1: a training pod holds 8000 of GPU-b, GPU-a is idle; n2: a pod
    of no rule holds 6000 of its one card. A training pod of 4000 would fill n1's GPU-b most
    (75) but that card is closed to it: on GPU-a it scores 25, on n2 62.5, so it goes to n2
    (Volcano scores from its filter, which ran with the cards capped). Without rules: n1."""
    held = pod_object("h", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "8000"}], node="n1",
                      running=True, labels=TRAINING,
                      annotations={dn.VGPU_IDS: "GPU-b,NVIDIA,8000,0:"})
    other = pod_object("o", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "6000"}], node="n2",
                       running=True, annotations={dn.VGPU_IDS: "GPU-c,NVIDIA,6000,0:"})
    fresh = pod_object("p", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "4000"}], labels=TRAINING)
    score = {dn.SCHEDULE_POLICY: "binpack", dn.SCHEDULE_WEIGHT: 10}
    for arguments, node in (({**RULED, **score}, "n2"), ({**VGPU, **score}, "n1")):
        nodes = [vgpu_node("n1", TWO), vgpu_node("n2", [("GPU-c", 10, 16000, "NVIDIA-A100")])]
        result = schedule(cluster(nodes, [held, other, fresh]), conf(arguments))
        assert placed(result) == {"p": node}


def test_a_released_pod_reopens_its_card() -> None:
    """A pod given a card holds it for its rule until it gives it back (deallocate: its
    cards back to the node, then untracked)."""
    wrapper = _cards(_card(0, 10, 0), _card(1, 10, 0))
    devices = pod_object("x", [{dn.VGPU_NUMBER: "1", dn.VGPU_MEMORY: "1000"}])
    from koordqueue.kube.scheduler.convert import task_info

    request = task_info(devices).devices
    assert request is not None
    fitted = wrapper.fit(request, TRAINING, "", commit="uid-x")
    assert not isinstance(fitted, str)
    assert wrapper.reserved_for(TRAINING) == {1}
    wrapper.inner.remove("uid-x")
    wrapper.untrack("uid-x")
    assert wrapper.reserved_for(TRAINING) == set()
    assert all(not c.pods and c.used_num == 0 for c in wrapper.inner.cards)


def test_malformed_rules_are_named_in_a_session_warning() -> None:
    """A rule that is not a map and an empty one are dropped (as Volcano drops them) and a
    session warning names each; the good rule still applies."""
    arguments = {**VGPU, dn.GPU_EXCLUSIVE_RULES: ["app", {}, dict(TRAINING)]}
    session = open_session(cluster([vgpu_node("n1", TWO)], []), conf(arguments))
    warnings = [w for w in session.warnings if dn.GPU_EXCLUSIVE_RULES in w]
    assert len(warnings) == 2
    assert "entry 0 is not a map of labels ('app')" in warnings[0]
    assert "entry 1 has no labels" in warnings[1]
    state = session.plugins[dn.PLUGIN_NAME].state  # type: ignore[attr-defined]
    assert [dict(r.labels) for r in state.args.exclusive_rules] == [TRAINING]
