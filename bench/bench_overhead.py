"""What pytest and pytest-slam add per case, and what the plugin costs at start-up, by hand.

    python bench/bench_overhead.py [--cases 200] [--repeats 5]

The same requests go to a fast OpenAI-compatible server on loopback (FakeOpenAI in its own process):
(a) a plain loop with the openai client, (b) a pytest suite calling that client with the plugin
disabled (``-p no:slam``), (c) the same suite opted in to pytest-slam: the swap proxy, golden pairing
(recorded once first, then replayed), the fuzzy scorer, and the JSON and HTML reports.

Per case is the slope of wall time: (run with N cases - run with 0 cases) / N, each a whole
``python -m pytest`` process, so start-up cancels and everything that grows with the cases counts,
the end-of-run reports included. (a) is timed inside its process, around the loop only.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import tempfile
from pathlib import Path

from _common import PYTHON, Sample, clean_env, fake_server, footer, header, ratio, run_wall, table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

NO_TESTS = 5  # pytest's exit status when no test was collected
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
PLUGIN_ARGS = ["--slm-report=report.json", "--slm-html=report.html"]
TARGETS_MS = {"plugin": 0.5, "pytest + plugin": 2.0}
STARTUP_TARGET_S = 0.3


class Bench:
    """The suite in a temp folder and the commands for each arm; every run appends to a Sample."""

    def __init__(self, root: Path, candidate_url: str, cases: int) -> None:
        self.root, self.cases = root, cases
        direct = {"OPENAI_BASE_URL": candidate_url, "OPENAI_API_KEY": "sk-bench"}
        self.direct_env = lambda n: clean_env(BENCH_CASES=str(n), **direct)
        self.slam_env = lambda n: clean_env(BENCH_CASES=str(n))
        self.samples: dict[str, Sample] = {}

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, Sample()).add(value)

    def record_goldens(self) -> None:
        wall = run_wall([*PYTEST, "--slm-record=new"], self.root, self.slam_env(self.cases))
        self.add("record", wall)

    def loop(self) -> None:
        out = subprocess.run([PYTHON, "loop.py"], cwd=self.root, env=self.direct_env(self.cases),
                             capture_output=True, text=True, check=True)  # fmt: skip
        self.add("loop_ms", float(out.stdout) / self.cases * 1000)

    def suite(self, name: str, extra: list[str], plugin: bool) -> None:
        """Wall time with N cases and with none; the slope is the per-case figure."""
        env = self.slam_env if plugin else self.direct_env
        args = [*PYTEST, *extra] + ([] if plugin else ["-p", "no:slam"])
        full = run_wall(args, self.root, env(self.cases))
        empty = run_wall(args, self.root, env(0), ok=(NO_TESTS,))
        self.add(f"{name}_full", full)
        self.add(f"{name}_empty", empty)
        self.add(f"{name}_ms", (full - empty) / self.cases * 1000)

    def collect(self, name: str, plugin: bool) -> None:
        env = self.slam_env if plugin else self.direct_env
        args = [*PYTEST, "--collect-only"] + ([] if plugin else ["-p", "no:slam"])
        self.add(name, run_wall(args, self.root, env(self.cases)))

    def repeat(self, index: int) -> None:
        """One round of every arm; the order rotates so a load spike does not always hit one arm."""
        steps = [
            self.loop,
            lambda: self.suite("pytest", [], plugin=False),
            lambda: self.suite("slam", PLUGIN_ARGS, plugin=True),
            lambda: self.collect("collect_pytest", plugin=False),
            lambda: self.collect("collect_slam", plugin=True),
        ]
        for step in steps[index % len(steps) :] + steps[: index % len(steps)]:
            step()


def differences(bench: Bench) -> dict[str, Sample]:
    """Per-round differences (the rounds pair runs made close together in time)."""
    s = bench.samples
    out: dict[str, Sample] = {}
    pairs = {
        "pytest": ("pytest_ms", "loop_ms"),
        "plugin": ("slam_ms", "pytest_ms"),
        "pytest + plugin": ("slam_ms", "loop_ms"),
        "startup": ("slam_empty", "pytest_empty"),
        "collect": ("collect_slam", "collect_pytest"),
    }
    for name, (a, b) in pairs.items():
        out[name] = Sample([x - y for x, y in zip(s[a].values, s[b].values, strict=True)])
    return out


def report(bench: Bench) -> None:
    s, d, n = bench.samples, differences(bench), bench.cases
    base = s["loop_ms"].median
    print(f"### Per case ({n} cases; median (min-max) of {len(s['loop_ms'].values)} rounds)\n")
    table(
        ["arm", f"wall, {n} cases (s)", "wall, 0 cases (s)", "ms per case", "vs plain loop"],
        [
            ["(a) plain loop, openai client", "-", "-", s["loop_ms"].show(), "1.00x"],
            ["(b) pytest, plugin off (-p no:slam)", s["pytest_full"].show(),
             s["pytest_empty"].show(), s["pytest_ms"].show(), ratio(s["pytest_ms"].median, base)],
            ["(c) pytest + slam: swap, goldens, fuzzy, JSON+HTML", s["slam_full"].show(),
             s["slam_empty"].show(), s["slam_ms"].show(), ratio(s["slam_ms"].median, base)],
        ],
    )  # fmt: skip
    print("\n### Added per case, and start-up\n")
    rows = []
    for name, label in (("pytest", "pytest adds (b - a)"), ("plugin", "plugin adds (c - b)"),
                        ("pytest + plugin", "pytest + plugin add (c - a)")):  # fmt: skip
        target = TARGETS_MS.get(name)
        verdict = "-" if target is None else _met(d[name].median, target)
        rows.append([label, d[name].show() + " ms", f"<= {target} ms" if target else "-", verdict])
    for name, label in (("startup", "plugin start-up: empty opted-in run, c - b"),
                        ("collect", f"plugin cost of --collect-only, {n} cases")):  # fmt: skip
        rows.append([label, d[name].show() + " s", f"<= {STARTUP_TARGET_S} s",
                     _met(d[name].median, STARTUP_TARGET_S)])  # fmt: skip
    rows.append(["recording the goldens (c with --slm-record=new, once)", s["record"].show() + " s",
                 "-", "-"])  # fmt: skip
    table(["figure", "median (min-max)", "target", "met"], rows)


def _met(value: float, target: float) -> str:
    return "yes" if value <= target else "no"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=200, help="Chat requests per run")
    parser.add_argument("--repeats", type=int, default=5, help="Rounds of every arm")
    parser.add_argument("--keep", action="store_true", help="Keep the temp suite folder")
    args = parser.parse_args(argv)
    header("Per-case overhead and start-up", "python bench/bench_overhead.py " + " ".join(argv or []))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-overhead-"))
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            bench = Bench(write_suite(root, candidate, reference), candidate, args.cases)
            bench.record_goldens()
            for index in range(args.repeats):
                bench.repeat(index)
        report(bench)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
