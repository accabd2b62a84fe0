"""Memory and time at 1k / 10k / 50k cases (issue 53), for ``bench_scaling.py --sizes``.

Each arm is one ``python -m pytest`` process (or the raw loop) against a zero-latency FakeOpenAI,
its peak resident memory read from ``os.wait4`` (``ru_maxrss``: the process's own, its children
never counted) and its wall and CPU time. The arms at each size:

- the raw loop: the product's function called N times in one process, no pytest;
- pytest with the plugin off (``-p no:slam``), the product straight to the server;
- pytest with the plugin on: swap, golden replay, the fuzzy scorer and the JSON report.

Per test: (plugin peak - plugin-off peak) / N, the target <= 10 KiB; the growth per step is the
slope between two sizes, (peak_b - peak_a) / (N_b - N_a), which takes the fixed cost (imports,
the plugin's start) off. The JSON report's bytes per case come from the file the run wrote.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from _common import PYTHON, table

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
TARGET_KIB = 10.0


@dataclass
class Peak:
    """One process: its peak resident memory (MiB), wall and CPU seconds."""

    mib: float
    wall: float
    cpu: float


def run_peak(cmd: list[str], cwd: Path, env: dict[str, str], ok: tuple[int, ...] = (0,)) -> Peak:
    """Run ``cmd`` to its end; its own peak memory from ``wait4`` (a failure stops the bench)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) not in ok:
        raise SystemExit(f"bench: `{' '.join(cmd)}` failed:\n{out[-3000:].decode()}")
    return Peak(usage.ru_maxrss / 1024, wall, usage.ru_utime + usage.ru_stime)


def measure(root: Path, sizes: list[int], env_on: dict[str, str],
            env_off: dict[str, str]) -> dict[int, dict[str, Peak | int]]:  # fmt: skip
    """Every arm at every size, smallest first: ``{cases: {arm: Peak, "report_bytes": n}}``."""
    found: dict[int, dict[str, Peak | int]] = {}
    for cases in sizes:
        n = {"BENCH_CASES": str(cases)}
        loop = run_peak([PYTHON, "loop.py"], root, {**env_off, **n})
        off = run_peak([*PYTEST, "-p", "no:slam"], root, {**env_off, **n})
        on = run_peak([*PYTEST, "--slm-report=report.json"], root, {**env_on, **n})
        size = (root / "report.json").stat().st_size
        found[cases] = {"loop": loop, "off": off, "on": on, "report_bytes": size}
        print(f"  {cases}: loop {loop.mib:.0f} MiB, off {off.mib:.0f} MiB, on {on.mib:.0f} MiB",
              flush=True)  # fmt: skip
    return found


def show(found: dict[int, dict[str, Peak | int]]) -> None:
    """The table: per size, each arm's peak, wall and CPU, the plugin's KiB a test over off."""
    rows, sizes = [], sorted(found)
    for cases in sizes:
        arms = found[cases]
        loop, off, on = (arms[a] for a in ("loop", "off", "on"))
        assert isinstance(loop, Peak) and isinstance(off, Peak) and isinstance(on, Peak)
        per_test = (on.mib - off.mib) * 1024 / cases
        met = "yes" if per_test <= TARGET_KIB else "no"
        report = int(arms["report_bytes"]) / cases
        rows.append([f"{cases:,}", f"{loop.mib:.0f} / {loop.wall:.1f} / {loop.cpu:.1f}",
                     f"{off.mib:.0f} / {off.wall:.1f} / {off.cpu:.1f}",
                     f"{on.mib:.0f} / {on.wall:.1f} / {on.cpu:.1f}",
                     f"{per_test:.1f} (<= {TARGET_KIB:.0f}: {met})", f"{report:,.0f}"])  # fmt: skip
    table(["cases", "raw loop: MiB / wall s / CPU s", "pytest -p no:slam: MiB / wall s / CPU s",
           "pytest + slam (JSON report): MiB / wall s / CPU s",
           "plugin KiB a test over -p no:slam", "JSON report bytes a case"], rows)  # fmt: skip
    if len(sizes) < 2:
        return
    print("\nGrowth per step (slope: the extra memory and time of each added case):\n")
    steps = []
    for a, b in itertools.pairwise(sizes):
        step = []
        for arm in ("loop", "off", "on"):
            pa, pb = found[a][arm], found[b][arm]
            assert isinstance(pa, Peak) and isinstance(pb, Peak)
            kib = (pb.mib - pa.mib) * 1024 / (b - a)
            ms = (pb.wall - pa.wall) * 1000 / (b - a)
            step.append(f"{kib:.2f} KiB / {ms:.2f} ms")
        steps.append([f"{a:,} -> {b:,}", *step])
    table(["step", "raw loop: per case", "-p no:slam: per case", "plugin on: per case"], steps)
