"""The certified bands hold on real answers they were not chosen on (a small bench/validity.py).

On each per-answer labelled set in ../shared/data (AlpacaEval judge preferences, MT-Bench GPT-4
grades, EVOUNA-NQ human verdicts), 3 splits by prompt: ``slam calibrate``'s selection (fuzzy
scorers only, so CI needs no extra) on half the prompts, measured on the other half. The held-out
pass error must stay within its target: mean <= 5%, 95% Clopper-Pearson upper bound on the pooled
counts <= 8%. The plain 0.7 threshold, measured the same way, must miss it where it does (EVOUNA),
so the check can fail. bench/README.md has the 10-split figures.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from pathlib import Path
from types import ModuleType

import pytest
from slam_helpers import SHARED_DATA

from pytest_slam.compare.bandselect import Counts, Targets
from pytest_slam.compare.binomial import upper_bound
from pytest_slam.compare.calibrate import BASELINE, SCORERS, calibrate_columns, score_column

BENCH = Path(__file__).resolve().parents[2] / "bench"
DATA = SHARED_DATA
SPLITS = 3
FUZZY = {n: s for n, s in SCORERS.items() if s[0] == "fuzzy"}

pytestmark = pytest.mark.skipif(
    not DATA.is_dir(), reason=f"needs the recorded labelled answers in {DATA} (../shared/data)"
)


def bench() -> ModuleType:
    """bench/validity.py, whose loaders and split this test shares."""
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("bench_validity", BENCH / "validity.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def held_out_runs() -> dict[str, tuple[list[Counts], list[Counts], list[Counts], list[float]]]:
    """Per set: the chosen bands' held-out pass and fail counts, the 0.7 threshold's pass
    counts, and the coverage, one entry per split."""
    b = bench()
    out = {}
    for name, load in b.SETS.items():
        pairs = load()
        labels, units = [p.label for p in pairs], [p.unit for p in pairs]
        cols = {n: score_column(by, opts, pairs) for n, (by, opts) in FUZZY.items()}
        passed, failed, plain, coverage = [], [], [], []
        for seed in range(SPLITS):
            a, rest = b.split(units, seed)
            result = calibrate_columns("", {n: b.pick(a, c) for n, c in cols.items()},
                                       b.pick(a, labels), b.pick(a, units), Targets())  # fmt: skip
            held = b.held_out(result.chosen, cols, labels, rest)
            passed.append(held.passed)
            failed.append(held.failed)
            coverage.append(held.coverage)
            base = b.held_out(b.Choice(BASELINE[0], BASELINE[1], BASELINE[1], 0, Counts(0, 0),
                                       Counts(0, 0)), cols, labels, rest)  # fmt: skip
            plain.append(base.passed)
        out[name] = passed, failed, plain, coverage
    return out


def pooled_upper(counts: list[Counts]) -> float:
    return upper_bound(sum(c.wrong for c in counts), sum(c.called for c in counts))


def mean_rate(counts: list[Counts]) -> float:
    rates = [c.rate for c in counts if c.called]
    return statistics.mean(rates) if rates else 0.0


@pytest.mark.parametrize("name", ["AlpacaEval", "MT-Bench graded", "EVOUNA-NQ"])
def test_held_out_errors_stay_within_their_targets(held_out_runs, name: str) -> None:
    passed, failed, _, coverage = held_out_runs[name]
    assert mean_rate(passed) <= 0.05, f"{name}: mean held-out pass error {mean_rate(passed):.3f}"
    if any(c.called for c in passed):
        assert pooled_upper(passed) <= 0.08, f"{name}: pass error bound {pooled_upper(passed):.3f}"
    assert mean_rate(failed) <= 0.10, f"{name}: mean held-out fail error {mean_rate(failed):.3f}"
    assert all(0 <= c <= 1 for c in coverage)


def test_the_check_can_fail_the_plain_threshold_misses_it_on_short_qa(held_out_runs) -> None:
    _, _, plain, coverage = held_out_runs["EVOUNA-NQ"]
    assert pooled_upper(plain) > 0.08 and mean_rate(plain) > 0.05  # 0.7: about 8% wrong passes
    assert max(coverage) > 0  # the bands decide some short answers, at a held error
