"""Throughput with pytest-xdist workers against a serial run, by hand.

    python bench/bench_scaling.py [--cases 400] [--latency-ms 50] [--repeats 3]
    python bench/bench_scaling.py --sizes 1000,10000,50000   # memory and time at size (issue 53)

400 calls to a server that answers every request after a fixed 50 ms (FakeOpenAI in its own
process serves requests concurrently, on threads), run by the overhead bench's suite opted in to
pytest-slam (swap, golden replay, fuzzy, JSON and HTML reports) serially and with ``-n 1/2/4``.
The same suite with the plugin off (``-p no:slam``) is the baseline at each worker count, so
the table shows what xdist gives by itself and what the plugin keeps of it. Throughput is calls
per second of wall time for the whole ``python -m pytest`` process, start-up and reports included.
Each arm is also run with no tests: that fixed cost (interpreters, imports, workers starting) is
what 2 cores cannot hide, and the last column is the speed-up once it is taken off both sides.

``--sizes`` instead measures one serial run per arm at each case count, zero latency: peak memory,
wall and CPU of the raw loop, ``-p no:slam`` and the plugin with its JSON report, the plugin's
KiB a test over ``-p no:slam`` and the growth per step (bench/_at_size.py).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from _common import PYTHON, Sample, clean_env, fake_server, footer, header, ratio, run_timed, table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
REPORTS = ["--slm-report=report.json", "--slm-html=report.html"]
WORKERS = (0, 1, 2, 4)  # 0: serial, no xdist workers
TARGET_AT_4 = 3.0
NO_TESTS = 5  # pytest's exit status when no test was collected


def run(root: Path, env: dict[str, str], workers: int, plugin: bool) -> float:
    args = [*PYTEST, *(REPORTS if plugin else ["-p", "no:slam"])]
    args += [f"-n{workers}"] if workers else []
    return run_timed(args, root, env, ok=(0, NO_TESTS)).wall


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=400, help="Calls (one per test)")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="Server latency per call")
    parser.add_argument("--repeats", type=int, default=3, help="Rounds of every arm")
    parser.add_argument("--sizes", help="Case counts (1000,10000,50000): memory at size instead")
    args = parser.parse_args(argv)
    if args.sizes:
        return at_size([int(n) for n in args.sizes.split(",")], argv)
    header("Scaling with xdist workers", "python bench/bench_scaling.py " + " ".join(argv))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-scaling-"))
    walls: dict[tuple[bool, int, int], Sample] = {}
    try:
        with fake_server(args.latency_ms, CANDIDATE_ANSWER, "small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            write_suite(root, candidate, reference)
            direct = {"OPENAI_BASE_URL": candidate, "OPENAI_API_KEY": "sk-bench"}
            envs = {
                (plugin, n): clean_env(BENCH_CASES=str(n), **({} if plugin else direct))
                for plugin in (False, True)
                for n in (0, args.cases)
            }
            run_timed([*PYTEST, "-n4", "--slm-record=new"], root, envs[(True, args.cases)])
            for index in range(args.repeats):
                arms = [(p, w, n) for w in WORKERS for p in (False, True) for n in (args.cases, 0)]
                shift = index % len(arms)
                for plugin, workers, n in arms[shift:] + arms[:shift]:
                    wall = run(root, envs[(plugin, n)], workers, plugin)
                    walls.setdefault((plugin, workers, n), Sample()).add(wall)
        report(walls, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


def at_size(sizes: list[int], argv: list[str]) -> int:
    """One serial run of each arm at each size, smallest first (bench/_at_size.py)."""
    import _at_size

    header("Memory and time at size", "python bench/bench_scaling.py " + " ".join(argv))
    root = Path(tempfile.mkdtemp(prefix="slam-bench-size-"))
    try:
        with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference:  # fmt: skip
            write_suite(root, candidate, reference)
            direct = {"OPENAI_BASE_URL": candidate, "OPENAI_API_KEY": "sk-bench"}
            env_on, env_off = clean_env(), clean_env(**direct)
            recorded = {**env_on, "BENCH_CASES": str(max(sizes))}
            run_timed([*PYTEST, "--slm-record=new"], root, recorded)
            found = _at_size.measure(root, sizes, env_on, env_off)
        print("\n### One run per arm at each size (zero latency, serial)\n")
        _at_size.show(found)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


def report(walls: dict[tuple[bool, int, int], Sample], args: argparse.Namespace) -> None:
    n = args.cases
    print(f"### {n} calls at {args.latency_ms:.0f} ms each; median (min-max) of {args.repeats} "
          "rounds\n")  # fmt: skip
    rows = []
    for plugin in (False, True):
        serial, serial_fixed = walls[(plugin, 0, n)].median, walls[(plugin, 0, 0)].median
        for workers in WORKERS:
            wall, fixed = walls[(plugin, workers, n)], walls[(plugin, workers, 0)]
            speedup = serial / wall.median
            busy = wall.median - fixed.median
            steady = f"{(serial - serial_fixed) / busy:.2f}x" if busy > 0 else "n/a (noise)"
            label = "pytest + slam" if plugin else "pytest, plugin off"
            target = f">= {TARGET_AT_4:.0f}x" if plugin and workers == 4 else "-"
            met = ("yes" if speedup >= TARGET_AT_4 else "no") if target != "-" else "-"
            rows.append([label, f"-n {workers}" if workers else "serial", wall.show(),
                         f"{n / wall.median:.1f}", f"{speedup:.2f}x", target, met, fixed.show(),
                         steady])  # fmt: skip
    table(["suite", "workers", "wall (s)", "calls/s", "vs serial", "target", "met",
           "wall with 0 tests (s)", "vs serial, 0-test wall taken off both"], rows)  # fmt: skip
    print("\nThe plugin against the plugin-off suite at the same worker count (wall ratio): "
          + ", ".join(f"{'serial' if w == 0 else f'-n {w}'} "
                      f"{ratio(walls[(True, w, n)].median, walls[(False, w, n)].median)}"
                      for w in WORKERS))  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
