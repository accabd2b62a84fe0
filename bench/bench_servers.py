"""The servers users actually have: the run's calls in flight against each shape (issue 49 (a)-(c)).

    python bench/bench_servers.py [--cases 200] [--rounds 1] [--shapes batch,capped,slowing]

The benches' suite (bench/_suite.py: one call per test, a ``contains`` check) runs as whole
``python -m pytest --slm-report=r.json`` processes against a loopback server of each shape, each in
its own process (bench/_shapes.py); its goldens are recorded first from an instant candidate. Per
arm: the wall, the pytest process's CPU, and the server's own counters (requests, refusals, peak
and time-weighted mean in flight, the batching engine's mean batch), the summary's line of where the
limit settled, and the report's E2E p95 (the alone sample where there is one) beside the latency
under load. Each ideal is computed from the server's shape and the plugin's start-up (an empty
opted-in run) measured in the same round.

(a) **A batching engine**: 32 requests a step of 20 ms, answers of 100 and 300 tokens (by prompt).
    Arms: the default (adaptive), ``--slm-concurrency 16`` (the old default), 32 (the batch).
    Ideal: the tokens the server served x 20 ms / 32, plus start-up. Target: mean batch >= 24.
(b) **A server capped at 8** answering 429 beyond, 300 ms a call, without and with
    ``Retry-After: 5``; and ``--slm-concurrency 8``. Ideal: cases x 0.3 s / 8, plus start-up.
    Targets at the default: <= 4 refusals, >= 6 of 8 in flight on average; N never exceeded.
(c) **A server that slows with load**: 300 ms alone, 10% longer per other request in flight.
    Arm: the default. Ideal: cases at the limit the run settled on (its own latency there), plus
    start-up. Target: the report's E2E p95 within 1.3x of 300 ms while the server kept >= 4 in
    flight on average.
(zero) ``--shapes zero``: a server answering at once, the default against ``--slm-concurrency
    16``: the CPU the adaptive limit's places (64 fetching threads at most) cost over 16.

Every pytest run must pass (a failed run stops the bench with its output).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _common import PYTHON, Sample, clean_env, fake_server, fake_stats, footer, header, table
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

HERE = Path(__file__).resolve().parent
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--slm-report=r.json"]
SETTLED = re.compile(r"small-model: (?:the server refused|calls in flight) .*?(?=\n\S|\Z)", re.S)


@contextlib.contextmanager
def shaped(*flags: str) -> Iterator[str]:
    """A bench/_shapes.py server in its own process; yields its URL."""
    cmd = [PYTHON, str(HERE / "_shapes.py"), *flags]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, cwd=HERE, env=clean_env())
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"bench: the {flags} server did not start ({url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class Run:
    wall: float
    cpu: float
    stats: dict[str, Any]
    settled: str
    row: dict[str, Any]


@dataclass
class Arm:
    name: str
    runs: list[Run] = field(default_factory=list)
    ideal: list[float] = field(default_factory=list)

    def med(self, pick: Any) -> float:
        return statistics.median(pick(r) for r in self.runs)


def run_arm(
    root: Path, cases: int, url: str | None, flags: list[str], ok: tuple[int, ...] = (0,)
) -> Run:
    """One pytest run of ``cases`` cases against ``url`` (None: the suite's own, an empty run)."""
    models = [f"--slm-models={url}#small-model"] if url else []
    if url:
        fake_stats(url, reset=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run([*PYTEST, *models, *flags], cwd=root, capture_output=True, text=True,
                          env=clean_env(BENCH_CASES=str(cases)))  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        sys.stderr.write(proc.stdout[-6000:] + proc.stderr[-3000:])
        raise SystemExit(f"bench: pytest {' '.join(flags)} exited {proc.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stats = fake_stats(url) if url else {}
    found = SETTLED.search(proc.stdout)
    settled = " ".join(found.group(0).split()) if found else ""
    row: dict[str, Any] = {}
    report = root / "r.json"
    if url and report.exists():
        rows = json.loads(report.read_text())["models"]
        row = next((r for r in rows if r["model"] == "small-model"), {})
    return Run(wall, cpu, stats, settled, row)


def ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def show(arm: Arm, shape: str) -> list[object]:
    last = arm.runs[-1]
    s, r = last.stats, last.row
    wall, ideal = arm.med(lambda x: x.wall), statistics.median(arm.ideal)
    batch = f"{s['mean_batch']:.1f} (peak {s['peak_batch']})" if shape == "batch" else "-"
    p95 = ms(r.get("e2e_p95_ms"))
    if r.get("latency_alone"):
        p95 += f" alone ({r['latency_alone']}), {ms(r.get('e2e_p95_loaded_ms'))} loaded"
    return [
        arm.name, Sample([x.wall for x in arm.runs]).show(), Sample([x.cpu for x in arm.runs]).show(),
        f"{ideal:.2f}", f"{wall / ideal:.2f}x", s["chat_requests"], s["refusals"],
        f"{s['mean_in_flight']:.1f}", s["peak_in_flight"], batch, p95, last.settled or "-",
    ]  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python bench/bench_servers.py")
    parser.add_argument("--cases", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--shapes", default="batch,capped,slowing")
    args = parser.parse_args(argv)
    shapes = args.shapes.split(",")
    header("The servers users have: batching, capped, slowing", "python bench/bench_servers.py "
           + " ".join(argv))  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="slam-bench-servers-"))
    arms: dict[str, dict[str, Arm]] = {}
    try:
        with fake_server(answer=REFERENCE_ANSWER) as reference, \
                fake_server(answer=CANDIDATE_ANSWER, model="small-model") as instant:  # fmt: skip
            write_suite(root, instant, reference)
            run_arm(root, args.cases, instant, ["--slm-record=new"])
            for _ in range(args.rounds):
                start = run_arm(root, 0, None, [], ok=(0, 5)).wall
                if "batch" in shapes:
                    one_shape(root, args, arms, "batch", ["--shape", "batch"], start)
                if "capped" in shapes:
                    one_shape(root, args, arms, "capped", ["--shape", "capped"], start)
                    after = ["--shape", "capped", "--retry-after", "5"]
                    one_shape(root, args, arms, "capped", after, start, "Retry-After: 5")
                if "slowing" in shapes:
                    one_shape(root, args, arms, "slowing", ["--shape", "slowing"], start)
                if "zero" in shapes:
                    zero = ["--shape", "plain", "--latency-ms", "0"]
                    one_shape(root, args, arms, "zero", zero, start)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    heads = ["arm", "wall (s)", "CPU (s)", "ideal (s)", "wall / ideal", "requests", "refusals",
             "mean in flight", "peak", "mean batch", "report E2E p95 (ms)", "the summary said"]  # fmt: skip
    for shape, by_arm in arms.items():
        print(f"\n### {shape}, {args.cases} cases; median (min-max) of {args.rounds} round(s)\n")
        table(heads, [show(arm, shape.split(" ")[0]) for arm in by_arm.values()])
    footer()
    return 0


def one_shape(
    root: Path, args: argparse.Namespace, arms: dict[str, dict[str, Arm]], shape: str,
    flags: list[str], start: float, label: str = "",
) -> None:  # fmt: skip
    """The arms of one server shape: the default, and the fixed limits that show its ideal."""
    title = f"{shape} {label}".strip()
    fixed = {"batch": ["16", "32"], "capped": ["8"], "slowing": [], "zero": ["16"]}[shape]
    fixed = [] if label else fixed
    with shaped(*flags) as url:
        for n in [None, *fixed]:
            name = "default" if n is None else f"--slm-concurrency {n}"
            arm = arms.setdefault(title, {}).setdefault(name, Arm(name))
            run = run_arm(root, args.cases, url, [] if n is None else ["--slm-concurrency", n])
            arm.runs.append(run)
            arm.ideal.append(ideal(shape, args.cases, run) + start)


def ideal(shape: str, cases: int, run: Run) -> float:
    """The server's best: its own work at its best concurrency, without start-up."""
    if shape == "batch":  # every step full: the tokens it served, 32 a step of 20 ms
        return run.stats["tokens"] * 0.020 / 32
    if shape == "capped":
        return cases * 0.300 / 8
    if shape == "zero":
        return 0.0
    # slowing: cases at the limit the run settled on, its own latency there
    limit = (
        int(m.group(1)) if (m := re.search(r"(?:settled at|reached) (\d+)", run.settled)) else 16
    )
    return cases * 0.300 * (1 + 0.1 * (limit - 1)) / limit


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
