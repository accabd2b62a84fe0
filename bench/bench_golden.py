"""The golden store at 1k, 10k and 100k entries: recording, loading, lookup and memory, by hand.

    python bench/bench_golden.py [--sizes 1000,10000,100000] [--repeats 3]

All entries sit in one test module's file (the worst case: the store loads a file whole, the first
time a test of that module asks). Records look like a support-triage golden answer (a system and a
user message, a three-sentence answer, tokens and timings, one test name); they come from a fixed
seed. Each figure is measured in a fresh process (so peak memory is that step's own) and set
against a baseline doing the least the step must do, in the same process:
- record: ``GoldenStore.record`` for every entry, then ``flush`` (canonical key, scrub, sorted
  indented JSON, lock, atomic write) / ``json.dumps(indent=2)`` of the same entries and a write;
- load: ``GoldenStore.load`` (read, validate, build records) / ``json.loads`` of the file;
- lookup: ``request_key`` + ``GoldenStore.lookup`` per request, as a replayed call does /
  a dict lookup by a precomputed key.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import PYTHON, Sample, footer, header, ratio, table

MODULE = "tests/test_triage.py"
REFERENCE = "openai:gpt-4"
LOAD_TARGET_S = 1.0
VOCABULARY = (
    "billing login crash export search timeout refund invoice customer error page user team "
    "release fix bug feature request report slow fails update mobile web plan charge"
)
WORDS = VOCABULARY.split()
SYSTEM = "You triage support tickets. Answer with the category, the priority and the next step."


def request(i: int, rng: random.Random) -> dict[str, Any]:
    ticket = " ".join(rng.choice(WORDS) for _ in range(18))
    return {
        "model": "gpt-4",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Ticket {i}: {ticket}"},
        ],
        "temperature": 0,
        "max_tokens": 128,
    }


def answer(rng: random.Random) -> dict[str, Any]:
    text = " ".join(rng.choice(WORDS) for _ in range(40))
    return {"text": f"Category: billing. Priority: high. {text}.", "model": "gpt-4-0613",
            "recorded_at": "2026-11-29T12:00:00Z", "finish_reason": "stop", "prompt_tokens": 61,
            "completion_tokens": 52, "ttft_ms": 412.5, "e2e_ms": 1630.2,
            "system_fingerprint": "fp_fake"}  # fmt: skip


def records(n: int) -> list[Any]:
    from pytest_slam.records import GoldenAnswer, GoldenRecord

    rng = random.Random(7)
    return [GoldenRecord(key="", request=request(i, rng), answers=[GoldenAnswer(**answer(rng))],
                         tests=[f"{MODULE}::test_triage[{i}]"]) for i in range(n)]  # fmt: skip


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- steps, each run in its own process: python bench_golden.py --step NAME ROOT N ------------------


def step_record(root: Path, n: int) -> dict[str, float]:
    from pytest_slam.golden.store import GoldenStore

    recs = records(n)
    base_mem = peak_mb()
    start = time.perf_counter()
    store = GoldenStore(root, REFERENCE)
    for rec in recs:
        store.record(MODULE, rec, rec.tests[0])
    store.flush()
    took = time.perf_counter() - start
    slam_mem = peak_mb() - base_mem
    doc = {"entries": {str(i): rec.as_dict() for i, rec in enumerate(recs)}}
    start = time.perf_counter()
    (root / "baseline.json").write_text(json.dumps(doc, indent=2, sort_keys=True))
    return {"slam": took, "base": time.perf_counter() - start, "slam_mb": slam_mem,
            "bytes": store.path_for(MODULE).stat().st_size}  # fmt: skip


def step_load(root: Path, n: int) -> dict[str, float]:
    from pytest_slam.golden.store import GoldenStore

    store = GoldenStore(root, REFERENCE)
    before = peak_mb()
    start = time.perf_counter()
    golden = store.load(MODULE)
    took = time.perf_counter() - start
    assert len(golden.entries) == n, len(golden.entries)
    return {"slam": took, "slam_mb": peak_mb() - before}


def step_load_base(root: Path, n: int) -> dict[str, float]:
    """The floor for loading, in a process of its own so its peak memory is its own too."""
    from pytest_slam.golden.store import GoldenStore

    path = GoldenStore(root, REFERENCE).path_for(MODULE)
    before = peak_mb()
    start = time.perf_counter()
    data = json.loads(path.read_text(encoding="utf-8"))
    took = time.perf_counter() - start
    assert len(data["entries"]) == n
    return {"base": took, "base_mb": peak_mb() - before}


def step_lookup(root: Path, n: int) -> dict[str, float]:
    from pytest_slam.golden.keys import request_key
    from pytest_slam.golden.store import GoldenStore

    store = GoldenStore(root, REFERENCE)
    store.load(MODULE)
    bodies = [rec.request for rec in records(n)][:: max(1, n // 10_000)]  # at most ~10k lookups
    start = time.perf_counter()
    hits = sum(store.lookup(MODULE, request_key(b)) is not None for b in bodies)
    took = time.perf_counter() - start
    assert hits == len(bodies), (hits, len(bodies))
    keys = [request_key(b) for b in bodies]
    entries = store.load(MODULE).entries
    start = time.perf_counter()
    sum(k in entries for k in keys)
    base = time.perf_counter() - start
    return {"slam": took / len(bodies), "base": base / len(bodies)}


STEPS = {
    "record": step_record,
    "load": step_load,
    "load_base": step_load_base,
    "lookup": step_lookup,
}


def in_process(name: str, root: Path, n: int) -> dict[str, float]:
    out = subprocess.run([PYTHON, __file__, "--step", name, str(root), str(n)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--step"]:
        print(json.dumps(STEPS[argv[1]](Path(argv[2]), int(argv[3]))))
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000,100000", help="Entry counts")
    parser.add_argument("--repeats", type=int, default=3, help="Runs per figure")
    args = parser.parse_args(argv)
    header("Golden store", "python bench/bench_golden.py " + " ".join(argv))
    results: dict[int, dict[str, dict[str, Sample]]] = {}
    for n in (int(s) for s in args.sizes.split(",")):
        results[n] = {}
        for _ in range(args.repeats):
            root = Path(tempfile.mkdtemp(prefix="slam-bench-golden-"))
            try:
                for name in STEPS:
                    for key, value in in_process(name, root, n).items():
                        results[n].setdefault(name, {}).setdefault(key, Sample()).add(value)
            finally:
                shutil.rmtree(root, ignore_errors=True)
    report(results, args.repeats)
    footer()
    return 0


def report(results: dict[int, dict[str, dict[str, Sample]]], repeats: int) -> None:
    print(
        f"### One module file; median (min-max) of {repeats} runs, each step in a fresh process\n"
    )
    rows = []
    for n, r in results.items():
        rec, look = r["record"], r["lookup"]
        load = {**r["load"], **r["load_base"]}
        lookup_us = Sample([v * 1e6 for v in look["slam"].values])
        rows.append([
            f"{n:,}", f"{rec['bytes'].median / 1e6:.1f}",
            f"{n / rec['slam'].median:,.0f}", ratio(rec["slam"].median, rec["base"].median),
            load["slam"].show(), ratio(load["slam"].median, load["base"].median),
            "yes" if n < 100_000 or load["slam"].median < LOAD_TARGET_S else "no",
            lookup_us.show("{:.1f}"),
            ratio(look["slam"].median, look["base"].median),
            f"{load['slam_mb'].median:.0f} / {load['base_mb'].median:.0f}",
            f"{rec['slam_mb'].median:.0f}",
        ])  # fmt: skip
    table(["entries", "file MB", "record+flush entries/s", "vs json.dumps", "load s",
           "vs json.loads", "100k load < 1 s", "lookup us (key+get)", "vs dict get",
           "load peak MB (store / json.loads)", "record peak MB"], rows)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
