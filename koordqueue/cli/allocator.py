"""glibc's malloc arenas, capped for the long-lived commands (`run`, `schedule`).

Why: glibc gives each thread that allocates its own arena, up to eight per core, and memory
freed in one arena serves only that arena's threads. A controller runs ~110 threads that call
the API (64 writers, informers, handlers), each decoding answers and holding libcurl and
OpenSSL buffers, so freed memory scatters over 16 arenas on a 2-core box and the process's
resident set grows with the thread count, not with what it holds. Two arenas is what
Python services commonly set through `MALLOC_ARENA_MAX` (CPython's own small objects come
from its arenas, not malloc's, so the lock the threads share is taken rarely). An operator's
own `MALLOC_ARENA_MAX` wins: glibc read it at start-up, and it is left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Callable, Mapping
from typing import Final

ARENAS: Final = 2
M_ARENA_MAX: Final = -8
"""mallopt's parameter number (malloc.h)."""


def _libc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's mallopt, or None where the C library has none (musl, macOS)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    found: Callable[[int, int], int] = mallopt
    return found


def cap_malloc_arenas(
    environ: Mapping[str, str],
    find: Callable[[], Callable[[int, int], int] | None] = _libc_mallopt,
    arenas: int = ARENAS,
) -> bool:
    """Cap glibc's arenas at `arenas` unless `MALLOC_ARENA_MAX` is set; True when capped.
    Called before the process starts its threads (those started earlier keep their arena).
    `find`: the C library's mallopt, or None where it has none."""
    if "MALLOC_ARENA_MAX" in environ:
        return False
    mallopt = find()
    return mallopt is not None and bool(mallopt(M_ARENA_MAX, arenas))
