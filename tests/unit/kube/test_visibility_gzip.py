"""Answers gzip-encoded: one member whatever the pieces, the long pieces compressed once."""

from __future__ import annotations

import gzip
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordqueue.kube.visibility.gzip_answer import KEEP_FROM, GzipAnswers, accepts_gzip


def one_member(encoded: bytes) -> bytes:
    """The data of a single gzip member (fails on a second member or trailing bytes)."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    data = inflater.decompress(encoded)
    assert inflater.eof and inflater.unused_data == b""
    return data


CHUNKS = st.lists(
    st.one_of(st.binary(max_size=300),
              st.builds(lambda b, n: (b or b"x") * n, st.binary(max_size=40),
                        st.integers(KEEP_FROM // 8, KEEP_FROM // 2))),
    max_size=5,
)


@settings(max_examples=80, deadline=None)
@given(CHUNKS)
def test_any_pieces_make_one_member_of_their_concatenation(chunks: list[bytes]) -> None:
    encoder = GzipAnswers()
    encoded = b"".join(encoder.encode(tuple(chunks)))
    assert one_member(encoded) == b"".join(chunks)
    assert gzip.decompress(encoded) == b"".join(chunks)


def test_a_long_piece_is_compressed_once_while_the_same_object_is_sent() -> None:
    items = b",".join(b'{"name":"unit-%05d","position":%d}' % (i, i) for i in range(5000))
    assert len(items) >= KEEP_FROM
    encoder = GzipAnswers()
    for round_number in range(3):
        head = b'{"round":%d,"items":[' % round_number
        encoded = b"".join(encoder.encode((head, items, b"]}")))
        assert one_member(encoded) == head + items + b"]}"
    assert encoder.compressed == 1
    copy = bytes(bytearray(items))  # equal, another object: compressed again
    assert one_member(b"".join(encoder.encode((copy,)))) == items
    assert encoder.compressed == 2


@pytest.mark.parametrize(("header", "accepted"), [
    ("gzip", True), ("gzip, deflate, br", True), ("deflate, GZIP;q=0.5", True),
    ("gzip;q=0", False), ("identity", False), ("", False), (None, False), ("*", True),
    ("*;q=0", False), ("gzip;q=0, *", False), ("br, *;q=0.1", True), ("gzip;q=x", True),
])
def test_accept_encoding_is_read_as_http_means_it(header: str | None, accepted: bool) -> None:
    assert accepts_gzip(header) is accepted
