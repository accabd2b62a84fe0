"""Where a pytest-slam run spends its time, part by part, without a profiler's distortion.

    python bench/profile_run.py [--cases 1000] [--workers 0] [--pyspy | --cprofile]

Runs the overhead bench's suite (swap, golden replay, fuzzy, JSON and HTML reports) once in this
process, with wall-clock timers wrapped around the plugin's own steps (bench-only instrumentation:
the functions are wrapped in this process, never changed on disk), and prints each step's total
and its cost per case. cProfile would inflate pure-Python steps about twofold; these timers cost
about a microsecond a call. ``--pyspy`` instead samples a separate run with py-spy (all threads,
``pip install py-spy``) and prints the plugin's functions by share of the samples, which also
covers ``--workers N`` (pytest-xdist) runs. ``--cprofile`` profiles the test thread alone (cProfile
never follows the proxy's thread), sorted by own time: the in-process cost per case that is not the hop.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import cProfile
import importlib
import io
import os
import pstats
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import PYTHON, ROOT, clean_env, fake_server, footer, header, table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

# (module, attribute path, label): the steps timed; a missing one is listed, not fatal.
STEPS = [
    ("pytest_slam.run.start.startup", "configure", "configure: settings, specs, proxy start"),
    (
        "pytest_slam.swap.proxy",
        "Exchange.serve",
        "swap: one request, whole (test thread or worker)",
    ),
    (
        "pytest_slam.swap.router",
        "SwapRouter.chat",
        "  of which forward_chat: upstream stream, Call",
    ),
    ("pytest_slam.run.score.checks", "Checker.run", "after each test: price, golden pair, score"),
    (
        "pytest_slam.golden.reference",
        "ReferenceService.answer",
        "  of which golden lookup (key, store)",
    ),
    (
        "pytest_slam.run.score.checks",
        "Checker._score",
        "  of which scoring (scorer built per test, fuzzy)",
    ),
    ("pytest_slam.run.score.checks", "measure", "  of which measure: token counts, price"),
    (
        "pytest_slam.golden.reference",
        "request_key",
        "  of which request key: canonical JSON, sha256",
    ),
    ("pytest_slam.run.wired.wiring", "Swap.redirect", "before each test: redirect install"),
    ("pytest_slam.run.test.entry", "TestEntry.annotate", "each report: Outcome as plain data"),
    ("pytest_slam.run.test.outcomes", "build_outcome", "  of which build_outcome"),
    ("pytest_slam.report.junit_props", "attach", "  of which junit properties"),
    ("pytest_slam.run.test.outcomes", "keep_final", "each final Outcome kept (keep_final)"),
    ("pytest_slam.run.end.finish", "finish", "end of run, all of it"),
    ("pytest_slam.report.aggregate", "aggregate", "  aggregate per model and test"),
    ("pytest_slam.report.jsonreport", "write_json", "  JSON report"),
    ("pytest_slam.report.html", "write_html", "  HTML report"),
    ("pytest_slam.run.start.session", "SlamSession.close", "close: proxy stop, env restored"),
]
_lock = threading.Lock()


class Timers:
    """Wall time and call count per step; wrappers are installed on the live modules."""

    def __init__(self) -> None:
        self.total: dict[str, float] = collections.defaultdict(float)
        self.count: dict[str, int] = collections.defaultdict(int)
        self.missing: list[str] = []

    def wrap(self, module: str, path: str, label: str) -> None:
        owner: Any = importlib.import_module(module)
        *parents, name = path.split(".")
        for part in parents:
            owner = getattr(owner, part, None)
        original = getattr(owner, name, None) if owner is not None else None
        if original is None:
            self.missing.append(f"{module}.{path}")
            return
        setattr(owner, name, self._timed(original, label))

    def _timed(self, original: Callable[..., Any], label: str) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                with _lock:
                    self.total[label] += spent
                    self.count[label] += 1

        return timed


def run_in_process(
    root: Path, cases: int, profiler: cProfile.Profile | None = None
) -> tuple[Timers, float]:
    timers = Timers()
    if profiler is None:
        for module, path, label in STEPS:
            timers.wrap(module, path, label)
    import pytest

    os.environ.update(clean_env(BENCH_CASES=str(cases)))
    for name in [k for k in os.environ if k.startswith("OPENAI_")]:
        del os.environ[name]
    os.chdir(root)
    args = ["-q", "-p", "no:cacheprovider", "--slm-report=report.json", "--slm-html=report.html"]
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        if profiler is not None:
            profiler.enable()
        try:
            code = pytest.main(args)
        finally:
            if profiler is not None:
                profiler.disable()
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"bench: the suite failed (exit {code})")
    return timers, wall


def report_timers(timers: Timers, wall: float, cases: int) -> None:
    print(f"### {cases} cases in one process: {wall:.2f} s wall in pytest.main\n")
    rows = []
    for _module, _path, label in STEPS:
        if label in timers.total:
            total = timers.total[label]
            rows.append([label, timers.count[label], f"{total * 1000:.0f}",
                         f"{total / cases * 1000:.3f}", f"{total / wall * 100:.1f}%"])  # fmt: skip
    table(["step", "calls", "total ms", "ms per case", "share of the run"], rows)
    if timers.missing:
        print("\nnot found (renamed?): " + ", ".join(timers.missing))


def cprofile(root: Path, cases: int, save: str | None, limit: int = 40) -> None:
    """cProfile of the test thread only: pytest, the plugin's hooks and the client, not the proxy."""
    profiler = cProfile.Profile()
    _timers, wall = run_in_process(root, cases, profiler)
    if save:
        profiler.dump_stats(save)
    print(f"### cProfile, test thread only, {cases} cases: {wall:.2f} s wall (profiled)\n")
    print("```")
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(limit)
        print(out.getvalue().split("\n", 3)[-1].rstrip() + "\n")
    print("```")


def pyspy(root: Path, cases: int, workers: int) -> None:
    out = root / "pyspy.txt"
    cmd = ["py-spy", "record", "-r", "200", "--threads", "-f", "raw", "-o", str(out)]
    cmd += ["--subprocesses"] if workers else []
    cmd += ["--", PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += [f"-n{workers}"] if workers else []
    subprocess.run(cmd, cwd=root, env=clean_env(BENCH_CASES=str(cases)), check=True,
                   capture_output=True)  # fmt: skip
    samples, total = collections.Counter(), 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        total += int(count)
        for frame in {re.sub(r":\d+\)$", ")", f) for f in stack.split(";")}:
            if "pytest_slam/" in frame:
                samples[frame] += int(count)
    print(f"### py-spy, {cases} cases, -n {workers}: {total} samples at 200 Hz, all threads\n")
    rows = [[frame, f"{n / total * 100:.1f}%", f"{n / 200 / cases * 1000:.3f}"]
            for frame, n in samples.most_common(25)]  # fmt: skip
    table(["plugin function (inclusive)", "share of samples", "ms per case"], rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=1000, help="Cases in the run")
    parser.add_argument("--workers", type=int, default=0, help="-n for the py-spy run")
    parser.add_argument("--pyspy", action="store_true", help="Sample with py-spy instead")
    parser.add_argument("--cprofile", action="store_true", help="cProfile the test thread")
    parser.add_argument("--save", help="With --cprofile: also write the pstats file here")
    args = parser.parse_args(argv)
    header("Where a run's time goes", "python bench/profile_run.py " + " ".join(argv))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-profile-"))
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            write_suite(root, candidate, reference)
            record = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--slm-record=new"]
            subprocess.run(record, cwd=root, env=clean_env(BENCH_CASES=str(args.cases)),
                           check=True, capture_output=True)  # fmt: skip
            if args.pyspy:
                pyspy(root, args.cases, args.workers)
            elif args.cprofile:
                cprofile(root, args.cases, args.save and os.path.abspath(args.save))
            else:
                report_timers(*run_in_process(root, args.cases), args.cases)
    finally:
        os.chdir(ROOT)
        shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
