"""cli/allocator.py: glibc's arenas capped for `run` / `schedule`, the operator's
MALLOC_ARENA_MAX respected, a C library without mallopt tolerated."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from koordqueue.cli.allocator import ARENAS, M_ARENA_MAX, _libc_mallopt, cap_malloc_arenas


def test_the_cap_is_asked_of_mallopt_when_the_operator_set_none() -> None:
    calls: list[tuple[int, int]] = []
    assert cap_malloc_arenas({}, lambda: lambda p, v: calls.append((p, v)) or 1)
    assert calls == [(M_ARENA_MAX, ARENAS)]


def test_the_operators_own_setting_is_left_alone() -> None:
    calls: list[tuple[int, int]] = []
    assert not cap_malloc_arenas(
        {"MALLOC_ARENA_MAX": "8"}, lambda: lambda p, v: calls.append((p, v)) or 1
    )
    assert calls == []


def test_a_c_library_without_mallopt_or_refusing_it_is_no_error() -> None:
    assert not cap_malloc_arenas({}, lambda: None)
    assert not cap_malloc_arenas({}, lambda: lambda p, v: 0)  # mallopt's refusal is 0


CHILD = textwrap.dedent("""
    import ctypes, os, sys, threading
    from koordqueue.cli.allocator import cap_malloc_arenas
    if sys.argv[1] == "cap":
        assert cap_malloc_arenas({})
    barrier = threading.Barrier(16)
    def work():
        barrier.wait()
        keep = [bytearray(4096) for _ in range(64)]  # malloc'd: over pymalloc's 512 bytes
        barrier.wait()
    threads = [threading.Thread(target=work) for _ in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    ctypes.CDLL(None).malloc_stats()  # one "Arena N:" block per arena, on stderr
""")


def arenas_used(*argv: str) -> int:
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True,
                          text=True, check=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join(sys.path)})
    return done.stderr.count("Arena ")


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's mallopt")
def test_glibc_takes_the_cap_for_threads_started_after_it() -> None:
    assert _libc_mallopt() is not None
    assert arenas_used("cap") <= ARENAS < arenas_used("default")
