"""Answers sent gzip-encoded to a client that asks for it (kubectl and client-go do).

An answer of 15,000 pending units is ~5 MB of JSON, ~0.25 MB gzipped: every process on its
way (this server's TLS, the aggregator that proxies it, the client) handles a twentieth of
it. Compressing 5 MB costs ~11 ms of CPU (zlib level 1), so an answer's kept pieces (its
items, the same bytes object round after round while the pending order holds) are
compressed once: a deflate stream cut at a sync flush may be followed by another one, so an
answer is its header's stream, the kept items' stream and its tail's, in one gzip member
(one member: not every client reads concatenated members). The CRC is computed over the
whole answer each time, in C and without the interpreter.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

KEEP_FROM: Final = 64 * 1024
"""A chunk at least this long is compressed once and kept (the items); shorter ones (the
header naming the round, the closing brackets) are compressed per answer."""
KEPT: Final = 8
"""Compressed chunks kept: a few distinct queries polled at once."""
LEVEL: Final = 1
"""zlib's fastest: on this JSON 20x smaller at level 1 and at 6, 3x the CPU at 6."""
HEADER: Final = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""gzip, deflate, no flags, no mtime, no extra flags, OS unknown (RFC 1952)."""


def accepts_gzip(header: str | None) -> bool:
    """Whether an Accept-Encoding header allows gzip: named (or `*` when it is not named)
    with a q above 0."""
    star = False
    for part in (header or "").split(","):
        coding, _, params = part.strip().partition(";")
        coding = coding.strip().lower()
        q = params.strip().lower()
        allowed = not (q.startswith("q=") and _zero(q[2:]))
        if coding in ("gzip", "x-gzip"):
            return allowed
        if coding == "*":
            star = allowed
    return star


def _zero(value: str) -> bool:
    try:
        return float(value) == 0.0
    except ValueError:
        return False


class GzipAnswers:
    """Encodes answers as one gzip member each, keeping the deflated form of long chunks by
    identity (shared by the server's request threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[int, tuple[bytes, bytes]] = OrderedDict()
        """id(chunk) -> (the chunk, its deflate stream up to a sync flush)."""
        self.compressed = 0
        """Long chunks compressed so far (tests, profiles)."""

    def encode(self, chunks: Sequence[bytes]) -> tuple[bytes, ...]:
        """The gzip member of the chunks' concatenation, as pieces to send in order."""
        out = [HEADER]
        crc, size = 0, 0
        last = len(chunks) - 1
        for n, chunk in enumerate(chunks):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
            if len(chunk) >= KEEP_FROM:
                out.append(self._deflated(chunk))
                if n == last:
                    out.append(_deflate(b"", zlib.Z_FINISH))
            else:
                out.append(_deflate(chunk, zlib.Z_FINISH if n == last else zlib.Z_SYNC_FLUSH))
        if not chunks:
            out.append(_deflate(b"", zlib.Z_FINISH))
        out.append(struct.pack("<II", crc, size & 0xFFFFFFFF))
        return tuple(out)

    def _deflated(self, chunk: bytes) -> bytes:
        key = id(chunk)
        with self._lock:
            hit = self._kept.get(key)
            if hit is not None and hit[0] is chunk:
                self._kept.move_to_end(key)
                return hit[1]
        deflated = _deflate(chunk, zlib.Z_SYNC_FLUSH)  # (outside the lock: in C, GIL free)
        with self._lock:
            self._kept[key] = (chunk, deflated)
            self._kept.move_to_end(key)
            while len(self._kept) > KEPT:
                self._kept.popitem(last=False)
            self.compressed += 1
        return deflated


def _deflate(data: bytes, flush: int) -> bytes:
    """A raw deflate stream of `data` ending at `flush` (Z_SYNC_FLUSH: byte-aligned and not
    final, so another stream may follow; Z_FINISH: the final block)."""
    compressor = zlib.compressobj(LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
    return compressor.compress(data) + compressor.flush(flush)
