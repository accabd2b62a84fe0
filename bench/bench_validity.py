"""Does a scorer's pass/fail verdict agree with a judge? Calibrated on one data set, tested on the other.

Reads ../shared/data in place (never copied). Two labelled sets of (candidate, GPT-4 reference) pairs:

- AlpacaEval (250 prompts, 1,249 pairs): reference = GPT-4 Turbo's answer; label "equivalent" =
  the GPT-4 Turbo judge's logprob-weighted preference for the small model is >= 0.5 (the judge
  rates it at least as good as the reference); the graded signal for Spearman is that preference.
- MT-Bench (80 prompts, 480 pairs, first turn): reference = GPT-4's answer. The data holds no
  per-answer judge verdict, so the label is the answering model's tier: "equivalent" = the answer
  is gpt-3.5-turbo's (MT-Bench GPT-4 grade about 7.9, near GPT-4's 9.0); the five 3B-7B models
  (published grades 2.7-6.4) are "not equivalent". Spearman uses the models' published MT-Bench
  order. A model-level proxy, noisier than a per-answer verdict: read its figures as such.

Every threshold and the combined model are chosen on one set and measured on the other, in both
directions. Intervals are bootstrap 95% resampling prompts (a prompt's pairs go in or out together).

    python bench/bench_validity.py [--resamples 1000]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import footer, header, table

from pytest_slam.compare import get_scorer
from pytest_slam.compare.combined import Logistic, features, fit
from pytest_slam.compare.validity import (
    auc,
    best_threshold,
    bootstrap_measure,
    cohen_kappa,
    false_pass_rate,
    spearman,
    verdicts,
)

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
ALPACA = DATA / "alpaca_eval_gpt4_vs_slm" / "records.jsonl"
MTBENCH = DATA / "mt_bench_gpt4_vs_slm" / "records.jsonl"
# MT-Bench leaderboard order (GPT-4 single-answer grades), best first: the graded signal.
MT_ORDER = ("gpt-3.5-turbo", "vicuna-7b-v1.3", "mpt-7b-chat", "chatglm-6b",
            "fastchat-t5-3b", "stablelm-tuned-alpha-7b")  # fmt: skip
FIXED = (0.7, 0.8)


@dataclass
class Labelled:
    """One data set: pairs, their prompt (the bootstrap unit), label and graded signal."""

    name: str
    prompts: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    grades: list[float] = field(default_factory=list)
    self_refs: list[tuple[str, str]] = field(default_factory=list)  # a 2nd GPT-4 answer
    second: dict[str, str] = field(default_factory=dict)  # prompt -> the 2nd GPT-4 answer

    def add(self, prompt: str, model: str, cand: str, ref: str, label: int, grade: float) -> None:
        self.prompts.append(prompt)
        self.models.append(model)
        self.candidates.append(cand)
        self.references.append(ref)
        self.labels.append(label)
        self.grades.append(grade)


def load_alpaca() -> Labelled:
    data = Labelled("AlpacaEval")
    for rec in map(json.loads, ALPACA.read_text(encoding="utf-8").splitlines()):
        ref = rec["gpt4_turbo_output"]
        data.self_refs.append((rec["gpt4_output"], ref))
        data.second[str(rec["idx"])] = rec["gpt4_output"]
        for model, answer in rec["slm_outputs"].items():
            pref = rec["gpt4_turbo_judge_preference"].get(model)
            if answer is not None and pref is not None:
                data.add(str(rec["idx"]), model, answer, ref, int(pref - 1 >= 0.5), pref - 1)
    return data


def load_mtbench() -> Labelled:
    data = Labelled("MT-Bench")
    for rec in map(json.loads, MTBENCH.read_text(encoding="utf-8").splitlines()):
        ref = rec["gpt4_answer_turns"][0]
        if rec["gpt4_reference_turns"]:
            data.self_refs.append((rec["gpt4_reference_turns"][0], ref))
            data.second[str(rec["question_id"])] = rec["gpt4_reference_turns"][0]
        for model, turns in rec["other_answers"].items():
            grade = len(MT_ORDER) - MT_ORDER.index(model)
            data.add(
                str(rec["question_id"]), model, turns[0], ref, int(model == MT_ORDER[0]), grade
            )
    return data


def length_ratio(candidate: str, reference: str) -> float:
    return min(len(candidate), len(reference)) / max(len(candidate), len(reference), 1)


def scorers() -> dict[str, Callable[[str, str], float]]:
    """Every scorer under test, through the public scorer API; semantic only when installed."""
    out: dict[str, Callable[[str, str], float]] = {}
    for method in ("token_sort_ratio", "ratio", "token_set_ratio"):
        scorer = get_scorer("fuzzy", method=method)
        out[f"fuzzy {method}"] = lambda c, r, s=scorer: s.score(c, r).value
    out["length ratio"] = length_ratio
    if importlib.util.find_spec("sentence_transformers") is not None:
        semantic = get_scorer("semantic")
        out["semantic"] = lambda c, r: semantic.score(c, r).value
    return out


@dataclass
class Rule:
    """A pass/fail verdict: a score column and a threshold."""

    name: str
    scorer: str
    threshold: float


def interval_of(data: Labelled, measure: Callable[..., float], *cols: list, resamples: int) -> str:
    return str(bootstrap_measure(data.prompts, measure, *cols, resamples=resamples))


def rank_table(data: Labelled, cols: dict[str, list[float]], resamples: int) -> None:
    print(f"\n#### {data.name}: threshold-free agreement (label rate "
          f"{sum(data.labels) / len(data.labels):.1%}, {len(data.labels)} pairs)\n")  # fmt: skip
    rows = []
    for name, s in cols.items():
        a = interval_of(data, auc, s, data.labels, resamples=resamples)
        r = interval_of(data, spearman, s, data.grades, resamples=resamples)
        rows.append((name, a, r))
    table(("scorer", "AUC [95% CI]", "Spearman [95% CI]"), rows)


def verdict_row(data: Labelled, col: list[float], rule: Rule, resamples: int) -> tuple:
    """Kappa and false-pass rate of one rule on one data set, with intervals."""
    passed = verdicts(col, rule.threshold)
    kappa = interval_of(data, cohen_kappa, passed, data.labels, resamples=resamples)
    fpr = interval_of(data, false_pass_rate, passed, data.labels, resamples=resamples)
    return (rule.name, f"{rule.threshold:.2f}", kappa, fpr, f"{sum(passed) / len(passed):.1%}")


def combined_column(model: Logistic, rows: list[list[float]]) -> list[float]:
    return [model.probability(r) for r in rows]


def direction(cal: Labelled, ev: Labelled, cols: dict, feats: dict, resamples: int) -> None:
    """Choose every threshold (and fit the combined model) on ``cal``; measure on ``ev``."""
    print(f"\n#### Calibrated on {cal.name}, evaluated on {ev.name}\n")
    rules: list[Rule] = []
    for name in cols[cal.name]:
        rules += [Rule(f"{name} @ {t}", name, t) for t in FIXED]
        t = best_threshold(cols[cal.name][name], cal.labels)
        rules.append(Rule(f"{name} calibrated", name, round(t, 2)))
    model = fit(feats[cal.name], cal.labels)
    cal_p = combined_column(model, feats[cal.name])
    ev_cols = dict(cols[ev.name])
    ev_cols["combined"] = combined_column(model, feats[ev.name])
    rules.append(Rule("combined (logistic) calibrated", "combined",
                      round(best_threshold(cal_p, cal.labels), 2)))  # fmt: skip
    rows = [verdict_row(ev, ev_cols[r.scorer], r, resamples) for r in rules]
    table(("verdict", "threshold", f"kappa on {ev.name}", f"false-pass on {ev.name}", "pass rate"),
          rows)  # fmt: skip
    print(f"\ncombined model fitted on {cal.name}: "
          + ", ".join(f"{n} {w:+.2f}" for n, w in zip(model.names, model.weights, strict=True))
          + f", bias {model.bias:+.2f}; AUC on {ev.name} "
          f"{auc(ev_cols['combined'], ev.labels):.2f}")  # fmt: skip


def floor_subset(
    data: Labelled, score: Callable[[str, str], float]
) -> tuple[Labelled, list[float], list[float]]:
    """The pairs whose prompt has a second GPT-4 answer: each pair's score minus that prompt's
    GPT-4 self-agreement, and the score itself (for a fixed threshold on the same pairs)."""
    keep = [i for i, p in enumerate(data.prompts) if p in data.second]
    floors = {p: score(a, data.references[data.prompts.index(p)]) for p, a in data.second.items()}
    sub = Labelled(f"{data.name} (prompts with a 2nd GPT-4 answer)")
    for i in keep:
        sub.add(data.prompts[i], data.models[i], data.candidates[i], data.references[i],
                data.labels[i], data.grades[i])  # fmt: skip
    raw = [score(c, r) for c, r in zip(sub.candidates, sub.references, strict=True)]
    return sub, [v - floors[p] for v, p in zip(raw, sub.prompts, strict=True)], raw


def floor_rules(sets: list[Labelled], score: Callable[[str, str], float], resamples: int) -> None:
    """Pass when the candidate agrees with the reference about as well as GPT-4 agrees with itself.

    Margin 0 needs no calibration, so it is measured on both sets; the calibrated margin is chosen
    on one set and measured on the other. The fixed 0.7 row is on the same pairs, for comparison.
    """
    subs = [floor_subset(d, score) for d in sets]
    rows = []
    for k, (sub, rel, raw) in enumerate(subs):
        other_sub, other_rel, _ = subs[1 - k]
        margin = round(best_threshold(other_rel, other_sub.labels), 2)
        rows.append(verdict_row(sub, raw, Rule(f"{sub.name}: fixed 0.7", "", 0.7), resamples))
        rows.append(verdict_row(sub, rel, Rule(f"{sub.name}: floor, margin 0", "", 0.0), resamples))
        rows.append(verdict_row(sub, rel, Rule(f"{sub.name}: floor {margin:+.2f} (calibrated on "
                                               f"{sets[1 - k].name})", "", margin), resamples))  # fmt: skip
    table(("verdict", "threshold or margin", "kappa", "false-pass", "pass rate"), rows)


def self_agreement(data: Labelled, score: Callable[[str, str], float]) -> str:
    """How GPT-4's own second answer scores against the reference: the noise floor."""
    values = sorted(score(a, b) for a, b in data.self_refs)
    median = values[len(values) // 2]
    share = {t: sum(v >= t for v in values) / len(values) for t in FIXED}
    return (f"{data.name}: {len(values)} second GPT-4 answers, median {median:.2f}; pass at 0.7 "
            f"{share[0.7]:.0%}, at 0.8 {share[0.8]:.0%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resamples", type=int, default=1000)
    args = parser.parse_args()
    if not (ALPACA.is_file() and MTBENCH.is_file()):
        raise SystemExit(f"bench_validity needs the shared data at {DATA} (absent here)")
    header("Validity of the equivalence verdict (cross-data)",
           f"python bench/bench_validity.py --resamples {args.resamples}")  # fmt: skip
    sets = [load_alpaca(), load_mtbench()]
    fns = scorers()
    cols = {d.name: {n: [f(c, r) for c, r in zip(d.candidates, d.references, strict=True)]
                     for n, f in fns.items()} for d in sets}  # fmt: skip
    feats = {d.name: [features(c, r) for c, r in zip(d.candidates, d.references, strict=True)]
             for d in sets}  # fmt: skip
    for d in sets:
        rank_table(d, cols[d.name], args.resamples)
    direction(sets[0], sets[1], cols, feats, args.resamples)
    direction(sets[1], sets[0], cols, feats, args.resamples)
    print("\n#### GPT-4 against a second GPT-4 answer (fuzzy token_sort_ratio)\n")
    for d in sets:
        print(f"- {self_agreement(d, fns['fuzzy token_sort_ratio'])}")
    print("\n#### The reference's own variation as the threshold (fuzzy token_sort_ratio)\n")
    floor_rules(sets, fns["fuzzy token_sort_ratio"], args.resamples)
    footer()


if __name__ == "__main__":
    main()
