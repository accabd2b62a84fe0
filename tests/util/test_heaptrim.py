"""The heap's free pages go back to the system at the end of a run (glibc), and nothing is done
where there is no ``malloc_trim``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_slam.util import heaptrim

# 200 answers of 64 KiB on the C heap (under glibc's mmap threshold), all freed but the last,
# which keeps the heap's top where it was: the freed 12.5 MiB stay resident until a trim.
FRAGMENTED = """
import sys
from pytest_slam.util.heaptrim import trim_heap

def rss():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS"))

kept = [b"x" * 65536 for _ in range(200)]
last = kept.pop()
del kept
before = rss()
done = trim_heap()
print(done, before - rss())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_the_pages_a_run_freed_leave_the_process_when_the_heap_is_trimmed():
    out = subprocess.run(
        [sys.executable, "-c", FRAGMENTED], capture_output=True, text=True, check=True
    ).stdout.split()
    if out[0] != "True":
        pytest.skip("not glibc")
    assert int(out[1]) > 8 * 1024  # KiB handed back, of the 12.5 MiB freed


def test_without_malloc_trim_nothing_is_done(monkeypatch):
    monkeypatch.setattr(heaptrim, "_malloc_trim", lambda: None)
    assert heaptrim.trim_heap() is False
