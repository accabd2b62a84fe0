"""The golden store at 1k, 10k and 100k entries: recording, loading, lookup and memory, by hand.

    python bench/bench_golden.py [--sizes 1000,10000,100000] [--repeats 3]

All entries sit in one test module's file (the worst case for a full load). Records look like a
support-triage golden answer (a system and a user message, a three-sentence answer, tokens and
timings, one test name); they come from a fixed seed. Each figure is measured in a fresh process
(so peak memory is that step's own) and set against a baseline doing the least the step must do:
- record: ``GoldenStore.record`` for every entry, then ``flush`` (canonical key, scrub, sorted
  indented JSON, lock, atomic write) / ``json.dumps(indent=2)`` of the same entries and a write;
- full load: ``read_golden`` (read, parse, validate, build every record: what ``GoldenStore.load``
  did before it became lazy) / ``json.loads`` of the file;
- lazy: a fresh ``GoldenStore`` looking up 10 entries spread over the file (index the file, read
  and parse those 10; keys computed before the clock starts) / the full load above (each step in
  its own process, in the same round);
- lookup: ``request_key`` + ``GoldenStore.lookup`` per request, as a replayed call does, the first
  time each entry is asked for (so the lazy store reads and parses it then) / a dict lookup by a
  precomputed key.
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
LAZY_TARGET_S = 0.3
LAZY_LOOKUPS = 10
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


def rss_mb() -> float:
    """Resident memory now (Linux), to see what a step keeps once its peak is over."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20
    except (OSError, ValueError, IndexError):
        return float("nan")


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
    from pytest_slam.golden.fileformat import read_golden
    from pytest_slam.golden.store import GoldenStore

    path = GoldenStore(root, REFERENCE).path_for(MODULE)
    before = peak_mb()
    start = time.perf_counter()
    golden = read_golden(path, REFERENCE)
    took = time.perf_counter() - start
    assert len(golden.entries) == n, len(golden.entries)
    return {"slam": took, "slam_mb": peak_mb() - before}


def step_lazy(root: Path, n: int) -> dict[str, float]:
    from pytest_slam.golden.keys import request_key
    from pytest_slam.golden.store import GoldenStore

    wanted = {i * n // LAZY_LOOKUPS for i in range(LAZY_LOOKUPS)}
    rng, keys = random.Random(7), []
    for i in range(n):  # the same draws as records(), keeping only the requests looked up
        body = request(i, rng)
        answer(rng)
        if i in wanted:
            keys.append(request_key(body))
    before, rss_before = peak_mb(), rss_mb()
    start = time.perf_counter()
    store = GoldenStore(root, REFERENCE)
    hits = sum(store.lookup(MODULE, key) is not None for key in keys)
    took = time.perf_counter() - start
    assert hits == LAZY_LOOKUPS, hits
    assert getattr(store.load(MODULE).entries, "parsed", None) == LAZY_LOOKUPS  # lazy, not whole
    return {"lazy": took, "lazy_mb": peak_mb() - before, "kept_mb": rss_mb() - rss_before}


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
    entries = dict.fromkeys(store.load(MODULE).entries)
    start = time.perf_counter()
    sum(k in entries for k in keys)
    base = time.perf_counter() - start
    return {"slam": took / len(bodies), "base": base / len(bodies)}


STEPS = {
    "record": step_record,
    "load": step_load,
    "load_base": step_load_base,
    "lazy": step_lazy,
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
        lazy = r["lazy"]
        lookup_us = Sample([v * 1e6 for v in look["slam"].values])
        rows.append([
            f"{n:,}", f"{rec['bytes'].median / 1e6:.1f}",
            f"{n / rec['slam'].median:,.0f}", ratio(rec["slam"].median, rec["base"].median),
            load["slam"].show(), ratio(load["slam"].median, load["base"].median),
            lazy["lazy"].show("{:.3f}"), ratio(lazy["lazy"].median, load["slam"].median),
            "yes" if lazy["lazy"].median < LAZY_TARGET_S else "no",
            lookup_us.show("{:.1f}"),
            ratio(look["slam"].median, look["base"].median),
            f"{load['slam_mb'].median:.0f} / {lazy['lazy_mb'].median:.0f} / "
            f"{load['base_mb'].median:.0f}", f"{lazy['kept_mb'].median:.0f}",
            f"{rec['slam_mb'].median:.0f}",
        ])  # fmt: skip
    table(["entries", "file MB", "record+flush entries/s", "vs json.dumps", "full load s",
           "vs json.loads", f"lazy: {LAZY_LOOKUPS} lookups, s", "vs full load",
           f"< {LAZY_TARGET_S} s", "lookup us (key+get)", "vs dict get",
           "peak MB (full load / lazy / json.loads)", "lazy: MB kept after", "record peak MB"],
          rows)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
