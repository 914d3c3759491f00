"""The quantity-string cache (issue 11 follow-up) changes nothing but the cost: a cached
parse equals the uncached one, and a refused string raises the same error every time (it is
never remembered as a value)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordqueue.domain.quantity import (
    InvalidQuantityError,
    ParsedQuantity,
    _parse_cached,
    parse_quantity,
    parse_quantity_uncached,
)

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SUFFIXES = ("", "n", "u", "m", "k", "M", "G", "T", "P", "E",
             "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "e3", "E-2", "e+1", "e70")

valid_like = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{frac}{suffix}",
    st.sampled_from(("", "+", "-")),
    st.from_regex(r"[0-9]{0,12}", fullmatch=True),
    st.sampled_from(("", ".")) | st.from_regex(r"\.[0-9]{1,10}", fullmatch=True),
    st.sampled_from(_SUFFIXES),
)
"""Mostly valid quantity strings; some (no digits, e70, a bare '.') are refused."""

anything = st.text(alphabet=st.sampled_from("0123456789.+-eEmkKiMGn \t"), max_size=12)


def _outcome(parse: object, text: str) -> ParsedQuantity | str:
    assert callable(parse)
    try:
        result = parse(text, "spec.max.cpu")
    except InvalidQuantityError as exc:
        return f"error: {exc}"
    assert isinstance(result, ParsedQuantity)
    return result


@FAST
@given(st.one_of(valid_like, anything))
def test_a_cached_parse_equals_the_uncached_one_every_time(text: str) -> None:
    expected = _outcome(parse_quantity_uncached, text)
    assert _outcome(parse_quantity, text) == expected
    assert _outcome(parse_quantity, text) == expected  # the second read comes from the cache


@FAST
@given(anything.filter(lambda t: isinstance(_outcome(parse_quantity_uncached, t), str)))
def test_a_refused_string_is_not_cached_and_raises_naming_each_callers_field(text: str) -> None:
    before = _parse_cached.cache_info().currsize
    for field in ("spec.max.cpu", "spec.resource.memory"):
        with pytest.raises(InvalidQuantityError) as caught:
            parse_quantity(text, field)
        assert caught.value.field == field
        assert caught.value.value == text
    assert _parse_cached.cache_info().currsize == before


def test_identical_strings_parse_once() -> None:
    text = "123457m"  # a string no other test parses
    hits = _parse_cached.cache_info().hits
    first = parse_quantity(text)
    assert parse_quantity(text, "other.field") is first
    assert _parse_cached.cache_info().hits == hits + 1


def test_a_long_string_is_parsed_without_the_cache() -> None:
    text = "1" * 100 + "m"
    before = _parse_cached.cache_info().currsize
    assert parse_quantity(text).nanos == int("1" * 100) * 10**6
    assert _parse_cached.cache_info().currsize == before
