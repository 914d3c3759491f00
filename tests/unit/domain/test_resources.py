"""SPEC 1 / issue 2: Resources — exact arithmetic over cpu, memory and any extended resource."""

from __future__ import annotations

import pytest

from koordqueue.domain import InvalidQuantityError, Resources
from koordqueue.domain.quantity import NANO

from .helpers import GPU, res


def test_cpu_is_held_in_millicores_exactly() -> None:
    assert res(cpu="1500m").milli("cpu") == 1500
    assert res(cpu="1.5").milli("cpu") == 1500


def test_memory_is_held_in_bytes_exactly() -> None:
    assert res(memory="8Gi").value("memory") == 8 * 2**30
    assert res(memory="1G").value("memory") == 10**9


def test_extended_resource_is_a_first_class_resource() -> None:
    r = res({GPU: "2"})
    assert r.value(GPU) == 2
    assert (r + res({GPU: 1})).value(GPU) == 3


def test_addition_sums_per_resource_over_the_union_of_names() -> None:
    total = res(cpu="500m") + res(cpu="1", memory="1Gi")
    assert total == res(cpu="1500m", memory="1Gi")


def test_subtraction_is_exact_and_may_go_negative() -> None:
    assert (res(cpu="1") - res(cpu="1500m")).get_nanos("cpu") == -NANO // 2


def test_absent_and_zero_amounts_compare_equal() -> None:
    assert res(cpu="0") == Resources()
    assert hash(res(cpu="0")) == hash(Resources())


def test_parse_names_the_exact_field_of_a_bad_quantity() -> None:
    with pytest.raises(InvalidQuantityError) as info:
        Resources.parse({"cpu": "1", "memory": "12xyz"}, "spec.max")
    assert info.value.field == "spec.max.memory"
    assert info.value.value == "12xyz"


def test_parse_rejects_negative_amounts() -> None:
    with pytest.raises(InvalidQuantityError, match="negative"):
        Resources.parse({"cpu": "-1"}, "spec.max")


@pytest.mark.parametrize("bad", [["cpu", "1"], "cpu=1", 5, True])
def test_parse_rejects_a_resource_list_that_is_not_a_map(bad: object) -> None:
    with pytest.raises(InvalidQuantityError) as info:
        Resources.parse(bad, "spec.max")
    assert info.value.field == "spec.max"


@pytest.mark.parametrize("bad_name", ["", 7, None])
def test_parse_rejects_invalid_resource_names(bad_name: object) -> None:
    with pytest.raises(InvalidQuantityError, match="invalid resource name"):
        Resources.parse({bad_name: "1"}, "spec.max")


def test_parse_of_none_is_the_empty_list() -> None:
    assert Resources.parse(None).is_empty()


def test_empty_and_zero_are_distinguished() -> None:
    assert Resources().is_empty()
    assert not res(cpu="0").is_empty()
    assert res(cpu="0").is_zero()


def test_to_quantities_uses_binary_suffix_for_memory() -> None:
    assert res(cpu="1500m", memory="8Gi").to_quantities() == {"cpu": "1500m", "memory": "8Gi"}


def test_resources_are_immutable() -> None:
    r = res(cpu="1")
    with pytest.raises(TypeError):
        r["cpu"] = 5  # type: ignore[index]
    r + res(cpu="1")
    assert r == res(cpu="1")
