"""What pytest and pytest-slam add per case, and what the plugin costs at start-up, by hand.

    python bench/bench_overhead.py [--cases 200] [--base 0] [--repeats 5] [--before OTHER_TREE]

The same requests go to a fast OpenAI-compatible server on loopback (FakeOpenAI in its own process):
(a) a plain loop with the openai client, (b) a pytest suite calling that client with the plugin
disabled (``-p no:slam``), (c) the same suite opted in to pytest-slam: the swap proxy, golden pairing
(recorded once first, then replayed), the fuzzy scorer, and the JSON and HTML reports. Two more
plugin arms split (c) up: the swap alone (``--slm-reference=none``), and goldens without the files.

Per case is the slope: (run with N cases - run with B cases) / (N - B), B from ``--base`` (0 by
default), timed inside each ``python -m pytest`` process by a conftest stopwatch from the end of
collection to the last unconfigure hook: interpreter start and imports (whose noise on a shared
machine would swamp a per-case figure) stay out, everything that grows with the cases counts, the
plugin's end-of-run reports included. With B = 0 the slope also carries what the plugin does once
in a run with tests (the first test's imports, the report template); ``--base 200`` leaves that
out of the slope and prints it as a row of its own, the once-per-run cost. (a) is
timed inside its process, around the loop only. Start-up is whole processes (wall and CPU). Wall
time is the figure; CPU time (the process's own threads, the swap proxy's included, not the
server's) moves much less when other work shares the machine, so it is shown beside it.

``--before OTHER_TREE`` (a folder holding another ``pytest_slam`` package) adds arm (c) run with
``PYTHONPATH=OTHER_TREE`` to every round, interleaved with the rest, and prints (c) against it: a
change's before and after, measured in the same run under the same load.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import PYTHON, Sample, clean_env, fake_server, footer, header, ratio, run_timed, table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

NO_TESTS = 5  # pytest's exit status when no test was collected
# Hypothesis's own plugin imports hypothesis (0.65 s) at the end of every run, plugin or not: the
# same in every arm, but its jitter would swamp a per-case slope, and this suite never uses it.
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]
REPORTS = ["--slm-report=report.json", "--slm-html=report.html"]
# arm: (extra pytest arguments, whether the plugin is on)
ARMS = {
    "pytest": (["-p", "no:slam"], False),
    "swap": (["--slm-reference=none"], True),
    "golden": ([], True),
    "slam": (REPORTS, True),
}
LABELS = {
    "pytest": "(b) pytest, plugin off (-p no:slam)",
    "swap": "pytest + slam, swap only (--slm-reference=none)",
    "golden": "pytest + slam, swap + golden replay + fuzzy",
    "slam": "(c) pytest + slam, all of it + JSON and HTML reports",
}
TARGETS_MS = {"plugin": 1.0, "pytest + plugin": 2.0}  # issue 14: the plugin <= 1 ms per case
STARTUP_TARGET_S = 0.3


class Bench:
    """The suite in a temp folder and a command per arm; every figure is a list of samples."""

    def __init__(
        self, root: Path, candidate_url: str, cases: int, base: int, before: str | None
    ) -> None:
        self.root, self.cases, self.base, self.before = root, cases, base, before
        self.direct = {"OPENAI_BASE_URL": candidate_url, "OPENAI_API_KEY": "sk-bench"}
        self.samples: dict[str, Sample] = {}

    def env(self, cases: int, plugin: bool, tree: str | None = None) -> dict[str, str]:
        env = clean_env(BENCH_CASES=str(cases), **({} if plugin else self.direct))
        if tree is not None:
            env["PYTHONPATH"] = tree
        return env

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, Sample()).add(value)

    def record_goldens(self) -> None:
        timing = run_timed([*PYTEST, "--slm-record=new"], self.root, self.env(self.cases, True))
        self.add("record", timing.wall)

    def loop(self) -> None:
        out = subprocess.run([PYTHON, "loop.py"], cwd=self.root, env=self.env(self.cases, False),
                             capture_output=True, text=True, check=True)  # fmt: skip
        wall, cpu = map(float, out.stdout.split())
        self.add("loop.wall", wall / self.cases * 1000)
        self.add("loop.cpu", cpu / self.cases * 1000)

    def arm(self, name: str, tree: str | None = None, as_name: str | None = None) -> None:
        """Runs with N cases, with B cases (when B > 0) and with none; the slope of the in-run
        clock between N and B is per case, and what B's run took beyond B cases is once per run."""
        extra, plugin = ARMS[name]
        env, env_empty = self.env(self.cases, plugin, tree), self.env(0, plugin, tree)
        name = as_name or name
        full, full_clock = self.timed([*PYTEST, *extra], env, (0,))
        empty, empty_clock = self.timed([*PYTEST, *extra], env_empty, (NO_TESTS,))
        base_clock = empty_clock
        if self.base:
            _, base_clock = self.timed([*PYTEST, *extra], self.env(self.base, plugin, tree), (0,))
        self.add(f"{name}.full", full.wall)
        self.add(f"{name}.empty", empty.wall)
        self.add(f"{name}.empty_cpu", empty.cpu)
        for unit in ("wall", "cpu"):
            per_case = (full_clock[unit] - base_clock[unit]) / (self.cases - self.base)
            self.add(f"{name}.{unit}", per_case * 1000)
            once = base_clock[unit] - empty_clock[unit] - per_case * self.base
            self.add(f"{name}.once_{unit}", once)

    def timed(self, args: list[str], env: dict[str, str], ok: tuple[int, ...]) -> tuple[Any, dict]:
        """The process's timing, and the suite's stopwatch (end of collection to unconfigure)."""
        clock = self.root / "clock.json"
        clock.unlink(missing_ok=True)
        timing = run_timed(args, self.root, dict(env, BENCH_CLOCK=str(clock)), ok)
        return timing, json.loads(clock.read_text())

    def collect(self, plugin: bool) -> None:
        args = [*PYTEST, "--collect-only"] + ([] if plugin else ["-p", "no:slam"])
        timing = run_timed(args, self.root, self.env(self.cases, plugin))
        self.add(f"collect_{'slam' if plugin else 'pytest'}", timing.wall)

    def round(self, index: int) -> None:
        """Every arm once; the order rotates so a load spike does not always land on one arm."""
        steps = [self.loop, *(lambda n=n: self.arm(n) for n in ARMS)]
        steps += [lambda: self.collect(False), lambda: self.collect(True)]
        if self.before is not None:
            steps.append(lambda: self.arm("slam", self.before, "before"))
        for step in steps[index % len(steps) :] + steps[: index % len(steps)]:
            step()

    def diff(self, a: str, b: str) -> Sample:
        """Round by round ``a - b``: runs close together in time share the machine's load."""
        pairs = zip(self.samples[a].values, self.samples[b].values, strict=True)
        return Sample([x - y for x, y in pairs])


def per_case_table(bench: Bench) -> None:
    s, n = bench.samples, bench.cases
    base = s["loop.wall"].median
    rounds = len(s["loop.wall"].values)
    slope = f"slope from {bench.base} to {n} cases" if bench.base else f"{n} cases"
    print(f"### Per case ({slope}; median (min-max) of {rounds} rounds)\n")
    rows = [["(a) plain loop, openai client", "-", s["loop.wall"].show(), s["loop.cpu"].show(),
             "1.00x"]]  # fmt: skip
    for arm in ARMS:
        rows.append([LABELS[arm], s[f"{arm}.full"].show(), s[f"{arm}.wall"].show(),
                     s[f"{arm}.cpu"].show(), ratio(s[f"{arm}.wall"].median, base)])  # fmt: skip
    table(["arm", f"wall, {n} cases (s)", "wall ms/case", "CPU ms/case", "wall vs (a)"], rows)


def split_table(bench: Bench) -> None:
    print("\n### Where the plugin's time per case goes (each row: the arm minus the one before)\n")
    rows = []
    for label, a, b in (("the swap: proxy hop, streaming, Call record, outcome", "swap", "pytest"),
                        ("golden replay, pairing, fuzzy score", "golden", "swap"),
                        ("JSON and HTML reports", "slam", "golden")):  # fmt: skip
        rows.append([label, bench.diff(f"{a}.wall", f"{b}.wall").show(),
                     bench.diff(f"{a}.cpu", f"{b}.cpu").show()])  # fmt: skip
    table(["part", "wall ms/case", "CPU ms/case"], rows)


def target_table(bench: Bench) -> None:
    print("\n### Targets\n")
    d = bench.diff
    rows = []
    for name, label, a, b in (
        ("pytest", "pytest adds, (b) - (a)", "pytest", "loop"),
        ("plugin", "plugin adds, (c) - (b)", "slam", "pytest"),
        ("pytest + plugin", "pytest and plugin add, (c) - (a)", "slam", "loop"),
    ):
        target = TARGETS_MS.get(name)
        wall, cpu = d(f"{a}.wall", f"{b}.wall"), d(f"{a}.cpu", f"{b}.cpu")
        rows.append([label, wall.show() + " ms", cpu.show() + " ms",
                     f"<= {target} ms" if target else "-", _met(wall.median, target)])  # fmt: skip
    startup, startup_cpu = d("slam.empty", "pytest.empty"), d("slam.empty_cpu", "pytest.empty_cpu")
    rows.append(["plugin start-up: empty opted-in run, (c) - (b)", startup.show() + " s",
                 startup_cpu.show() + " s", f"<= {STARTUP_TARGET_S} s",
                 _met(startup.median, STARTUP_TARGET_S)])  # fmt: skip
    collect = d("collect_slam", "collect_pytest")
    rows.append([f"plugin cost of --collect-only, {bench.cases} cases", collect.show() + " s", "-",
                 f"<= {STARTUP_TARGET_S} s", _met(collect.median, STARTUP_TARGET_S)])  # fmt: skip
    if bench.base:
        once, once_cpu = (
            d("slam.once_wall", "pytest.once_wall"),
            d("slam.once_cpu", "pytest.once_cpu"),
        )
        rows.append(["plugin's once-per-run cost in a run with tests (first test's imports, "
                     "report set-up), (c) - (b)", once.show() + " s", once_cpu.show() + " s", "-",
                     "-"])  # fmt: skip
    rows.append(["recording the goldens first (--slm-record=new, once)",
                 bench.samples["record"].show() + " s", "-", "-", "-"])  # fmt: skip
    table(["figure", "wall, median (min-max)", "CPU", "target", "met (wall)"], rows)


def before_table(bench: Bench) -> None:
    print(f"\n### This tree against {bench.before} (arm (c), interleaved in every round)\n")
    s, d = bench.samples, bench.diff
    rows = [[f"(c) {name}", s[f"{arm}.wall"].show(), s[f"{arm}.cpu"].show()]
            for name, arm in (("this tree", "slam"), ("before", "before"))]  # fmt: skip
    rows.append(["this tree minus before", d("slam.wall", "before.wall").show(),
                 d("slam.cpu", "before.cpu").show()])  # fmt: skip
    rows.append(["plugin adds, before: (c) before - (b)", d("before.wall", "pytest.wall").show(),
                 d("before.cpu", "pytest.cpu").show()])  # fmt: skip
    table(["figure", "wall ms/case", "CPU ms/case"], rows)


def _met(value: float, target: float | None) -> str:
    if target is None:
        return "-"
    return "yes" if value <= target else "no"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="Chat requests per run")
    parser.add_argument("--base", type=int, default=0, help="Cases of the slope's smaller run")
    parser.add_argument("--repeats", type=int, default=5, help="Rounds of every arm")
    parser.add_argument("--keep", action="store_true", help="Keep the temp suite folder")
    parser.add_argument("--before", help="Also run (c) with PYTHONPATH=BEFORE, interleaved")
    args = parser.parse_args(argv)
    header("Per-case overhead and start-up", "python bench/bench_overhead.py " + " ".join(argv))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-overhead-"))
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            suite = write_suite(root, candidate, reference)
            before = str(Path(args.before).resolve()) if args.before else None
            if not 0 <= args.base < args.cases:
                parser.error("--base must be at least 0 and below --cases")
            bench = Bench(suite, candidate, args.cases, args.base, before)
            bench.record_goldens()
            for index in range(args.repeats):
                bench.round(index)
        per_case_table(bench)
        split_table(bench)
        target_table(bench)
        if bench.before is not None:
            before_table(bench)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
