"""SPEC 1: quantities use Kubernetes syntax, parse exactly, and bad ones name the field."""

from __future__ import annotations

import pytest

from koordqueue.domain import InvalidQuantityError, format_nanos, parse_quantity
from koordqueue.domain.quantity import NANO, parse_nanos


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("500m", 500_000_000),
        ("1", NANO),
        ("2.5", 2_500_000_000),
        ("0.1", 100_000_000),
        ("100n", 100),
        ("3u", 3_000),
        ("1k", 1_000 * NANO),
        ("1M", 10**6 * NANO),
        ("1G", 10**9 * NANO),
        ("1T", 10**12 * NANO),
        ("1P", 10**15 * NANO),
        ("1E", 10**18 * NANO),
        ("1e3", 1_000 * NANO),
        ("1E3", 1_000 * NANO),
        ("1e-3", 1_000_000),
        ("+1", NANO),
        ("-1", -NANO),
        ("0", 0),
        (".5", 500_000_000),
    ],
)
def test_decimal_quantity_parses_to_exact_nano_units(text: str, nanos: int) -> None:
    assert parse_nanos(text) == nanos


@pytest.mark.parametrize(
    ("text", "nanos"),
    [
        ("1Ki", 1024 * NANO),
        ("8Gi", 8 * 2**30 * NANO),
        ("1.5Mi", 3 * 2**19 * NANO),
        ("0.1Ki", 1024 * NANO // 10 + (1 if 1024 * NANO % 10 else 0)),
        ("1Ti", 2**40 * NANO),
        ("1Pi", 2**50 * NANO),
        ("1Ei", 2**60 * NANO),
    ],
)
def test_binary_quantity_parses_to_exact_nano_units(text: str, nanos: int) -> None:
    assert parse_nanos(text) == nanos


def test_parsing_has_no_float_drift() -> None:
    # 0.1 + 0.2 != 0.3 in binary floating point; quantities must add exactly.
    assert parse_nanos("0.1") + parse_nanos("0.2") == parse_nanos("0.3")
    assert parse_nanos("100m") * 3 == parse_nanos("300m")


def test_amount_finer_than_a_nano_unit_rounds_up_away_from_zero() -> None:
    assert parse_nanos("0.1n") == 1
    assert parse_nanos("1.0000000001") == NANO + 1
    assert parse_nanos("-0.1n") == -1


def test_format_of_suffix_is_recorded() -> None:
    assert parse_quantity("1Gi").format == "BinarySI"
    assert parse_quantity("1G").format == "DecimalSI"
    assert parse_quantity("1e9").format == "DecimalExponent"


def test_integer_quantity_means_whole_units() -> None:
    assert parse_nanos(4) == 4 * NANO


def test_exact_decimal_float_is_accepted_without_binary_error() -> None:
    assert parse_nanos(0.1) == 100_000_000


@pytest.mark.parametrize(
    ("nanos", "fmt", "text"),
    [
        (0, "DecimalSI", "0"),
        (500_000_000, "DecimalSI", "500m"),
        (2 * NANO, "DecimalSI", "2"),
        (3000 * NANO, "DecimalSI", "3k"),
        (1, "DecimalSI", "1n"),
        (8 * 2**30 * NANO, "BinarySI", "8Gi"),
        (1536 * NANO, "BinarySI", "1536"),
        (1025 * NANO, "BinarySI", "1025"),
        (500_000_000, "BinarySI", "500m"),
        (-2 * NANO, "DecimalSI", "-2"),
    ],
)
def test_format_nanos_gives_canonical_text(nanos: int, fmt: str, text: str) -> None:
    assert format_nanos(nanos, fmt) == text  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad",
    [
        "12xyz",
        "1.2.3",
        "",
        " 1",
        "1 ",
        "1\n",
        "1e999",
        "1e-999",
        "abc",
        "1K",  # kilo is lower-case k
        "1ki",
        "1..",
        ".",
        "+",
        "-",
        "1e",
        "Gi",
        "1 Gi",
        "１",  # full-width digit
        "1_000",
        "0x10",
        "9" * 5000,  # beyond int()'s 4300-digit limit: must still be a typed error
        "0." + "0" * 5000 + "1",
    ],
)
def test_malformed_quantity_string_raises_typed_error_naming_field_and_value(bad: str) -> None:
    with pytest.raises(InvalidQuantityError) as info:
        parse_quantity(bad, "spec.max.cpu")
    assert info.value.field == "spec.max.cpu"
    assert info.value.value == bad
    assert "spec.max.cpu" in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [True, False, None, [], ["1"], {"cpu": "1"}, object(), float("nan"), float("inf"), 1e300],
)
def test_non_quantity_value_raises_typed_error(bad: object) -> None:
    with pytest.raises(InvalidQuantityError) as info:
        parse_quantity(bad, "spec.max.memory")
    assert info.value.field == "spec.max.memory"
    assert info.value.reason


def test_boolean_is_not_an_integer_quantity() -> None:
    with pytest.raises(InvalidQuantityError, match="boolean"):
        parse_quantity(True, "spec.max.cpu")
