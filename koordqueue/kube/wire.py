"""JSON on the wire: the API server's answers and watch events decoded, request bodies encoded.

Every answer and event goes through `loads` and every body through `dumps` (api.py,
informer.py, the scheduler's batch writes); both are orjson with the standard library's
results kept exactly where orjson refuses.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads", "without_managed_fields"]


def loads(data: bytes | str) -> Any:
    """`json.loads`, 2-3x faster: orjson first, the standard library when orjson refuses.

    Decoding the API server's answers and watch events was the largest CPU cost after the HTTP
    calls themselves (bench/HISTORY.md, bench_decode). orjson refuses what the standard
    library accepts (NaN/Infinity literals, a BOM, lone surrogates, UTF-16) or rejects with
    another class (invalid UTF-8: UnicodeDecodeError); falling back on any refusal keeps every
    result and every exception exactly json.loads'. The one difference left: an integer outside
    the 64-bit range decodes as a float (the API server never writes one: Go's int64/float64).
    """
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def without_managed_fields(obj: Any) -> Any:
    """`obj` without metadata.managedFields (and each of its `items`, for a list), in place.

    Server-side apply's record of who owns which field: nothing here reads it, and it was
    a large part of every Job and QueueUnit the controller holds (bench/bench_memory.py).
    client-go's informers drop it for the same reason (cache.TransformStripManagedFields);
    a write never needs it back (a patch leaves it alone, an apply must not carry it).
    """
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
        items = obj.get("items")
        if isinstance(items, list):
            for item in items:
                without_managed_fields(item)
    return obj


def dumps(body: object) -> bytes:
    """A request body as JSON bytes: orjson (~10x the standard library on a Job-sized body),
    the standard library when orjson refuses (an integer past 64 bits, a key that is not a
    string, str, int, float, bool or None), so every body json.dumps wrote is still written
    (compact, UTF-8 rather than \\u escapes: the same JSON to the API server; NaN, which
    the standard library wrote as an invalid literal the API server refused, is null)."""
    try:
        return orjson.dumps(body, option=orjson.OPT_NON_STR_KEYS)
    except TypeError:  # (orjson.JSONEncodeError is a TypeError)
        return json.dumps(body).encode()
