"""How long a test waits for a process, a thread or an event before it gives up: scaled to the
machine's load, so a busy CI runner (load 20 on 2 cores) never fails a test that passes alone.

A wait here is a bound on a hang, never a timing check (the suite has no timed tests), so a
larger bound costs nothing on a healthy run. ``patient(120)`` is 120 s times ``factor()``:
``SLAM_TEST_PATIENCE`` when set (e.g. ``3``), else the 1-minute load per core, at least 1 and at
most ``MOST``. Issue 51: one test failed on a fixed 120 s subprocess timeout while the machine
was busy; it passes alone in 19 s.
"""

from __future__ import annotations

import os

PATIENCE_ENV = "SLAM_TEST_PATIENCE"
MOST = 10.0  # a hang is still a failure, ten times later at worst


def factor() -> float:
    """How many times longer than on an idle machine a wait may take now."""
    given = os.environ.get(PATIENCE_ENV, "").strip()
    if given:
        return max(1.0, float(given))
    try:
        load = os.getloadavg()[0]
    except OSError:  # no load average (not Unix): the waits as written
        return 1.0
    return min(MOST, max(1.0, load / (os.cpu_count() or 1)))


def patient(seconds: float) -> float:
    """``seconds`` as this machine needs them now (read at each wait: the load changes)."""
    return seconds * factor()
