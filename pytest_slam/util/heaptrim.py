"""Freed memory handed back to the system before the end of a run builds its report.

A run's tests leave the C heap with free pages between live ones (answers, requests, the golden
file's bytes kept for replay until ``GoldenStore.release``): glibc keeps them resident, and
Python's own allocator never reuses them (it takes its arenas by ``mmap``), so the report's
records at the end of a run were built on top of them. At 5,000 cases that was 6 MiB of the run's
peak (issue 53, bench/history/41-the-end-of-a-run-on-a-trimmed-heap.md). Elsewhere than glibc
(macOS, musl) there is no ``malloc_trim`` and nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        trim: Callable[[int], int] = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError, TypeError):  # no C library by that name, or not glibc's
        return None
    return trim


def trim_heap() -> bool:
    """Give the C heap's free pages back to the system; whether the platform could (glibc)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
