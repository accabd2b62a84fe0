"""Merging sharded reports, by hand: ``python bench/bench_merge.py [--shards S] [--cases N]
[--repeats R] [--words MIN-MAX]``.

Writes S synthetic shard reports (20 by default) of N cases x 3 candidate models each (5,000: 15,000
outcomes a shard, 300,000 in all), built from real records (``html_size.outcomes``: one call and
one answer pair with a banded score per outcome) and written by the real report code
(``aggregate``, the gate, ``write_json`` with the shard's ``visits``). Then, each arm in a fresh
process so its peak memory (``ru_maxrss``) is its own, R times interleaved:

- merge: ``slam report merge``'s work, ``load_shards`` + ``merge`` + ``write_json`` of the result;
- baseline "json load": ``json.load`` of every shard file, nothing else;
- baseline "aggregate in memory": ``aggregate`` and the gate over the same outcomes held as one
  list of records in memory (built before the clock starts): what one unsharded run pays.

Prints the median (min-max) time and peak memory of each arm with the merge's ratio to each
baseline, and the report sizes.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Sample, footer, header, ratio, table
from html_size import outcomes as synthetic_outcomes

from pytest_slam.records import Outcome, records
from pytest_slam.report.aggregate import RunInfo, aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.visits import Visits

GATE = {"min_mean_equivalence": 0.5, "allow_undecided": True}


def run_info() -> RunInfo:
    models = [{"name": m} for m in ("qwen2.5-7b", "llama-3.2-3b", "smollm2-135m")]
    return RunInfo.from_dict({"models": models, "reference": "gpt-4o",
                              "settings": {"gate": GATE, "reference": "openai:gpt-4o"},
                              "started": "2026-12-01T10:00:00Z",
                              "finished": "2026-12-01T10:30:00Z"})  # fmt: skip


def all_outcomes(shards: int, cases: int, words: tuple[int, int]) -> list[dict[str, Any]]:
    """Every shard's outcomes in shard order (one generator, so shards never share a test)."""
    return synthetic_outcomes(shards * cases, words)


def gated(outcomes: list[Outcome]) -> Any:
    verdict = aggregate(outcomes, run_info())
    apply_gate(verdict, evaluate(Gate.from_config(GATE), verdict))
    return verdict


def write_shards(folder: Path, shards: int, cases: int, words: tuple[int, int]) -> list[Path]:
    everything = all_outcomes(shards, cases, words)
    per = cases * 3
    paths = []
    for s in range(shards):
        mine = records(Outcome, everything[s * per : (s + 1) * per])
        ids = sorted({o.nodeid for o in mine})
        visits = Visits(visited={}, modules=[], complete=True, collected=ids, selected=ids)
        path = folder / f"shard{s:02d}.json"
        write_json(path, gated(mine), mine, visits)
        paths.append(path)
    return paths


def arm(name: str, folder: Path, shards: int, cases: int, words: tuple[int, int]) -> None:
    """One measured arm, in this (fresh) process; prints {"seconds", "peak_mb"} as JSON."""
    paths = sorted(folder.glob("shard*.json"))
    held: list[Outcome] = []
    if name == "aggregate":
        held = records(Outcome, all_outcomes(shards, cases, words))
    start = time.perf_counter()
    if name == "merge":
        from pytest_slam.report.merge import Trust, load_shards, merge

        merged = merge(load_shards(paths, Trust(unsigned=True)))
        write_json(
            folder / "merged.json",
            merged.verdict,
            merged.outcomes,
            merged.visits,
            lines=merged.lines,
        )
    elif name == "load":
        for path in paths:
            with path.open(encoding="utf-8") as fh:
                json.load(fh)
    else:
        gated(held)
    seconds = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "peak_mb": peak_mb}))


def measure(name: str, folder: Path, args: argparse.Namespace) -> dict[str, float]:
    cmd = [sys.executable, __file__, "--arm", name, "--dir", str(folder), "--shards",
           str(args.shards), "--cases", str(args.cases), "--words", args.words]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"bench: arm {name} exited {done.returncode}: {done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shards", type=int, default=20)
    parser.add_argument("--cases", type=int, default=5000, help="cases per shard (x 3 models)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--words", default="15-60", help="words per answer, MIN-MAX")
    parser.add_argument("--arm", choices=("merge", "load", "aggregate"), help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    low, high = (int(x) for x in args.words.split("-"))
    if args.arm:
        arm(args.arm, args.dir, args.shards, args.cases, (low, high))
        return
    command = (
        f"python bench/bench_merge.py --shards {args.shards} --cases {args.cases} "
        f"--repeats {args.repeats} --words {args.words}"
    )
    header("Merging sharded reports", command)
    with tempfile.TemporaryDirectory(prefix="slam-bench-merge-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        paths = write_shards(folder, args.shards, args.cases, (low, high))
        print(f"- {args.shards} shard reports written in {time.perf_counter() - start:.1f} s "
              f"(setup, not timed below)\n")  # fmt: skip
        times = {a: Sample() for a in ("merge", "load", "aggregate")}
        peaks = {a: Sample() for a in times}
        for _ in range(args.repeats):
            for name in times:
                result = measure(name, folder, args)
                times[name].add(result["seconds"])
                peaks[name].add(result["peak_mb"])
        sizes = [p.stat().st_size for p in paths]
        merged_size = (folder / "merged.json").stat().st_size
    outcomes = args.shards * args.cases * 3
    merge_s, merge_mb = times["merge"].median, peaks["merge"].median
    table(
        ["arm", "time, s", "peak memory, MB", "merge / arm (time)", "merge / arm (memory)"],
        [
            [f"merge {args.shards} shards ({outcomes:,} outcomes)", times["merge"].show(),
             peaks["merge"].show("{:.0f}"), "1.00x", "1.00x"],
            ["baseline: json.load of the shards", times["load"].show(),
             peaks["load"].show("{:.0f}"), ratio(merge_s, times["load"].median),
             ratio(merge_mb, peaks["load"].median)],
            ["baseline: aggregate + gate, one in-memory list", times["aggregate"].show(),
             peaks["aggregate"].show("{:.0f}"), ratio(merge_s, times["aggregate"].median),
             ratio(merge_mb, peaks["aggregate"].median)],
        ],
    )  # fmt: skip
    print()
    table(
        ["report", "size"],
        [
            ["one shard (median)", f"{statistics.median(sizes) / 1e6:.2f} MB"],
            ["all shards together", f"{sum(sizes) / 1e6:.1f} MB"],
            ["merged report", f"{merged_size / 1e6:.1f} MB"],
            ["per outcome (merged)", f"{merged_size / outcomes:.0f} bytes"],
        ],
    )
    footer()


if __name__ == "__main__":
    main()
