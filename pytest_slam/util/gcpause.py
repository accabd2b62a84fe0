"""The cyclic garbage collector paused while a burst of long-lived objects is built.

A golden file parsed, a report loaded or merged, the end of a run's verdict and files: each
allocates containers by the hundred thousand, none of them garbage, and every allocation burst
triggers a collection that walks the whole heap again (45% of the load time of a 100k-entry golden
file, bench/bench_golden.py; a full collection of a 2,000-test run's records while its report was
built, bench/README.md section 20). What such a burst leaves unreferenced is freed by reference
counting as usual; only cycles wait for the next collection after the pause.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the block, and restored afterwards whatever happens (nested pauses
    leave it off until the outermost one ends)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
