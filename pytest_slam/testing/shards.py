"""Synthetic shard reports, as a sharded run's jobs write them, for the merge's tests and bench.

``write_shards`` writes ``shards`` reports of ``cases`` cases x 3 candidate models each, and the
report one whole run of every case writes, with the real report code: ``aggregate``, the gate and
``write_json`` (signed when the environment holds a shard key, as a shard's job signs it). Each
shard collects the whole suite and runs its own cases (every ``shards``-th case, so the shards'
tests interleave as pytest-split's do), and each case is drawn from its own seed, so a shard is
made without the others: the generator holds one shard at a time.

An outcome: one candidate call and one answer pair scored by calibrated bands; the answers are
prose of ``words`` words (a Zipf draw over made-up words), the reference's shared by the three
candidates, which change 5%, 25% and 60% of its words. One test in 25 fails on the weakest
candidate, one in 100 on the middle one, one in 400 errs.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pytest_slam import __version__
from pytest_slam.records import Call, Outcome, Pair, Score
from pytest_slam.report.aggregate import RunInfo, Verdict, aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.visits import Visits

MODELS = {"qwen2.5-7b": 0.05, "llama-3.2-3b": 0.25, "smollm2-135m": 0.60}  # share of words changed
FAILS = {"qwen2.5-7b": 10**9, "llama-3.2-3b": 100, "smollm2-135m": 25}  # one test in N fails
GATE = {"min_mean_equivalence": 0.5, "allow_undecided": True}
RUN = "synthetic-run"


def run_info() -> RunInfo:
    """The run every shard and the whole run share (the merge's own settings: no report path)."""
    return RunInfo.from_dict(
        {
            "models": [{"name": m} for m in MODELS],
            "reference": "gpt-4o",
            "settings": {
                "gate": GATE,
                "reference": "openai:gpt-4o",
                "models": list(MODELS),
                "report": None,
                "html": None,
            },
            "started": "2026-12-01T10:00:00Z",
            "finished": "2026-12-01T10:30:00Z",
            "plugin_version": __version__,  # as a run writes it (a merge of it trusts its lines)
        }
    )


@functools.cache
def _vocabulary(n: int = 5000) -> tuple[list[str], list[float]]:
    rng = random.Random(5)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [len(letters) - i for i in range(len(letters))]
    words = ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(n)]
    return words, [1 / (rank + 1) for rank in range(n)]


def node_id(case: int, model: str) -> str:
    return f"{_test(case)}[{model}]"


def _test(case: int) -> str:
    return f"tests/test_area{case % 40:02d}.py::test_case_{case:05d}"


def case_outcomes(case: int, words: tuple[int, int] = (15, 60), seed: int = 7) -> list[Outcome]:
    """One case's outcomes, one per model, drawn from the case's own seed."""
    rng = random.Random(seed * 1_000_003 + case)
    vocabulary, zipf = _vocabulary()
    ref = rng.choices(vocabulary, zipf, k=rng.randint(*words))
    reference = " ".join(ref) + "."
    key = f"{rng.getrandbits(64):016x}{case:08x}"
    module = _test(case).split("::")[0]
    out = []
    for model, change in MODELS.items():
        new = rng.choices(vocabulary, zipf, k=len(ref))
        cand = [new[i] if rng.random() < change else w for i, w in enumerate(ref)]
        score = max(0.0, min(1.0, 1 - change + rng.uniform(-0.15, 0.15)))
        failed = case % FAILS[model] == 0
        errored = case % 400 == 7 and model == "smollm2-135m"
        call = Call(
            model=model,
            role="candidate",
            request={
                "model": "gpt-4o",
                "messages": [{"role": "user", "content": f"Case {case}: answer in a sentence."}],
            },
            text=" ".join(cand) + ".",
            prompt_tokens=200 + len(ref),
            completion_tokens=len(cand),
            ttft_ms=rng.uniform(20, 400),
            e2e_ms=rng.uniform(200, 4000),
            cost_usd=1e-5 * len(cand),
            key=key,
        )
        verdict = "equivalent" if score >= 0.8 else "different" if score < 0.6 else "undecided"
        pair = Pair(
            call_index=0,
            key=key,
            golden_file=f"__slam__/{module}.json",
            reference_text=reference,
            reference_model="gpt-4o-2024-08-06",
            reference_e2e_ms=1500.0,
            reference_ttft_ms=300.0,
            reference_cost_usd=4e-5 * len(ref),
            scores=[
                Score(
                    "embedding",
                    score,
                    threshold=0.8,
                    fail_below=0.6,
                    verdict=verdict,
                    decided_by="bands",
                )
            ],
        )
        result = "error" if errored else "failed" if failed else "passed"
        message = "AssertionError: the answer misses the order number" if failed else None
        out.append(
            Outcome(
                nodeid=node_id(case, model),
                test=_test(case),
                model=model,
                outcome=result,
                duration_s=0.5,
                calls=[call],
                pairs=[pair],
                message=message,
            )
        )
    return out


def gated(outcomes: list[Outcome]) -> Verdict:
    """The verdict and gate a run applies to its outcomes."""
    verdict = aggregate(outcomes, run_info())
    apply_gate(verdict, evaluate(Gate.from_config(GATE), verdict))
    return verdict


@dataclass
class Written:
    """The shard reports written, and the whole run's report."""

    shards: list[Path]
    whole: Path


def shard_cases(shard: int, shards: int, cases: int) -> Iterator[int]:
    """The cases shard ``shard`` (of ``shards``, ``cases`` each) runs: every ``shards``-th."""
    return iter(range(shard, shards * cases, shards))


def write_shards(
    folder: Path, shards: int, cases: int, words: tuple[int, int] = (15, 60), whole: bool = True
) -> Written:
    """Write the shards' reports (``shardNN.json``) and, with ``whole``, the whole run's
    (``whole.json``, every case in one report); one shard's outcomes held at a time."""
    collected = sorted(node_id(c, m) for c in range(shards * cases) for m in MODELS)
    paths = []
    for shard in range(shards):
        mine = [o for c in shard_cases(shard, shards, cases) for o in case_outcomes(c, words)]
        ids = sorted(o.nodeid for o in mine)
        visits = Visits(complete=True, collected=collected, selected=ids, run=RUN)
        path = folder / f"shard{shard:02d}.json"
        write_json(path, gated(mine), mine, visits)
        paths.append(path)
        del mine
    target = folder / "whole.json"
    if whole:
        everything = [o for c in range(shards * cases) for o in case_outcomes(c, words)]
        modules = sorted({n.split("::")[0] for n in collected})  # every test of each ran here
        visits = Visits(
            complete=True, collected=collected, selected=collected, run=RUN, modules=modules
        )
        write_json(target, gated(everything), everything, visits)
    return Written(paths, target)
