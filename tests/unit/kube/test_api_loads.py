"""KubeApi decodes answers with orjson (issue 11/19: JSON decoding was ~16 % of the controller's
CPU); `api.loads` must give json.loads' results and exceptions, whatever the body."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.kube.api import JOB, KubeApi, dumps, loads

_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
_JSON = st.recursive(
    st.none() | st.booleans() | _INT64 | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=_JSON, ascii_only=st.booleans(), as_text=st.booleans())
def test_loads_equals_json_loads(value: Any, ascii_only: bool, as_text: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii_only)  # Infinity too: orjson refuses it
    body: bytes | str = text if as_text else text.encode()
    assert loads(body) == json.loads(body)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{", b"", b'{"a": 1} trailing', b'"\xff"'],
)
def test_a_bad_body_raises_what_json_loads_raises(body: bytes) -> None:
    with pytest.raises(ValueError) as expected:
        json.loads(body)
    with pytest.raises(ValueError) as got:
        loads(body)
    assert type(got.value) is type(expected.value)
    assert str(got.value) == str(expected.value)


def test_what_only_the_standard_library_reads_is_still_read() -> None:
    assert math.isnan(loads(b'{"x": NaN}')["x"])
    assert loads(b"[Infinity]") == [math.inf]
    assert loads('"\\ud800"') == "\ud800"
    assert loads("{}".encode("utf-16")) == {}
    assert loads(b"\xef\xbb\xbf{}") == {}  # a BOM


class _Response:
    def __init__(self, data: bytes, status: int = 200) -> None:
        self.data, self.status, self.reason = data, status, "OK"


class _Transport:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.headers: dict[str, str] = {}

    def send(self, method: str, path: str, body: Any, headers: Any) -> _Response:
        return _Response(self.data)


def _api(data: bytes) -> KubeApi:
    api = KubeApi(object())  # type: ignore[arg-type]
    api._generated = False
    api._transport = _Transport(data)  # type: ignore[assignment]
    return api


def test_a_request_returns_the_decoded_answer() -> None:
    assert _api(b'{"metadata": {"name": "j", "n": 1.5}}').get(JOB, "j", "ns") == {
        "metadata": {"name": "j", "n": 1.5}
    }


def test_a_request_with_a_bad_2xx_body_raises_json_decode_error_as_before() -> None:
    with pytest.raises(json.JSONDecodeError) as info:
        _api(b"<html>proxy error</html>").get(JOB, "j", "ns")
    assert type(info.value) is json.JSONDecodeError  # not orjson's subclass


_BODY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text() | st.integers(min_value=-(2**63), max_value=2**63 - 1), inner,
                      max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=_BODY)
def test_a_request_body_is_the_json_the_standard_library_wrote(value: Any) -> None:
    """api.dumps (orjson, the standard library on a refusal: integers past 64 bits) writes
    what json.dumps wrote, read back the same (its spacing and escapes aside)."""
    assert json.loads(dumps(value)) == json.loads(json.dumps(value))


def test_a_body_with_nan_is_valid_json() -> None:
    assert json.loads(dumps({"a": math.nan, "b": math.inf})) == {"a": None, "b": None}
