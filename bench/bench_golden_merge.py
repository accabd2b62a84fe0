"""``slam golden merge`` of shards' golden folders, by hand.

    python bench/bench_golden_merge.py [--shards 3] [--sizes 1000,10000] [--repeats 3]

Each shard's store holds one test module's file with SIZE / SHARDS entries of its own plus 5% of
SIZE asked by every shard (the same request, recorded once per shard at another time), written by
``GoldenStore`` as a record run writes them. Figures (median, min-max over the repeats):
- merge: ``merge_paths`` and ``write_merged`` (read and check every input, the merge rule, the
  store's writer, an atomic write), in this process;
- baseline: ``read_golden`` of every input and one ``dump_golden`` of the union, written: the least
  a merge through the store's own reader and writer must do.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import shutil
import tempfile
import time
from pathlib import Path

from _common import Sample, footer, header, ratio, table

from pytest_slam.golden.fileformat import atomic_write, dump_golden, read_golden
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.golden.threeway import merge_paths, write_merged
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE = "tests/test_triage.py"
WORDS = ("billing", "login", "crash", "export", "search", "timeout", "refund", "invoice")


def entry(i: int, shard: int, rng: random.Random) -> GoldenRecord:
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": f"ticket {i}: "
               + " ".join(rng.choice(WORDS) for _ in range(18))}], "temperature": 0.0}  # fmt: skip
    answer = GoldenAnswer(text=f"Category billing, priority {i % 3}. " * 3, model="gpt-4-0613",
                          recorded_at=f"2026-01-0{shard + 1}T00:00:00Z", prompt_tokens=40,
                          completion_tokens=30, ttft_ms=210.4, e2e_ms=900.2)  # fmt: skip
    test = f"{MODULE}::test_{i}_{shard}"
    return GoldenRecord(key=request_key(request), request=request, answers=[answer],
                        tests=[test], turns={test: [1]})  # fmt: skip


def shards(folder: Path, count: int, size: int) -> list[Path]:
    shared = size // 20
    roots = []
    for shard in range(count):
        store = GoldenStore(folder / f"shard-{shard}", "openai:gpt-4")
        own = range(shared + shard * (size // count), shared + (shard + 1) * (size // count))
        for i in [*range(shared), *own]:
            store.record(MODULE, entry(i, shard, random.Random(i)))
        store.flush()
        roots.append(store.root)
    return roots


def baseline(roots: list[Path], out: Path) -> None:
    rel = Path("openai-gpt-4/tests/test_triage.json")
    files = [read_golden(root / rel) for root in roots]
    union = {k: v for f in files for k, v in f.entries.items()}
    atomic_write(out / rel, dump_golden(dataclasses.replace(files[0], entries=union)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    header("Golden merge of shards", "python bench/bench_golden_merge.py")
    rows = []
    for size in map(int, args.sizes.split(",")):
        merged, least = Sample(), Sample()
        with tempfile.TemporaryDirectory() as tmp:
            roots = shards(Path(tmp), args.shards, size)
            for r in range(args.repeats):
                start = time.perf_counter()
                write_merged(merge_paths(roots, Path(tmp) / f"out-{r}"))
                merged.add(time.perf_counter() - start)
                start = time.perf_counter()
                baseline(roots, Path(tmp) / f"base-{r}")
                least.add(time.perf_counter() - start)
                shutil.rmtree(Path(tmp) / f"base-{r}")
        rows.append((f"{args.shards} x {size // args.shards:,} (+5% shared)", merged.show(),
                     least.show(), ratio(merged.median, least.median)))  # fmt: skip
    table(("entries", "merge s", "read + write s", "ratio"), rows)
    footer()


if __name__ == "__main__":
    main()
