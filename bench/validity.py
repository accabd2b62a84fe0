"""Do the bands ``slam calibrate`` certifies hold on prompts they were not chosen on?

Reads ../shared/data in place (never copied): the three per-answer labelled sets of
``validity_data.py`` (AlpacaEval, MT-Bench graded, EVOUNA-NQ). For each set, 10 splits by prompt:
``slam calibrate``'s own selection (``compare.calibrate.calibrate_columns``: every scorer, Learn
then Test, Bonferroni over the scorers) on half the prompts, measured on the other half:

- pass error: share of the pairs called equivalent that the label calls unacceptable;
- fail error: share of the pairs called different that the label calls acceptable;
- coverage: share of the held-out pairs decided (= judge calls saved: a decided pair needs no judge).

Each error: the mean over the splits that called any pair (the spread: min-max over splits), and a
95% Clopper-Pearson upper bound on the counts pooled over the 10 held-out halves (each pair appears
in about half of them, so read it as a bound on the pooled rate, not as 10 independent tests).
Cross-data: bands chosen on all of one set applied to another, as they are. The combined logistic
scorer and a length ratio are tried beside the product's scorers (combined fitted on one half of
the calibration prompts, certified on the other) to see whether they earn a place.

    python bench/validity.py [--splits 10] [--no-semantic] [--cache /tmp/validity-scores.pkl]
"""

from __future__ import annotations

import argparse
import pickle
import random
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import footer, header, table
from validity_data import DATA, SETS

from pytest_slam.compare.bandselect import (
    GRID,
    Choice,
    Counts,
    Targets,
    band_counts,
    choose_bands,
)
from pytest_slam.compare.binomial import upper_bound
from pytest_slam.compare.calibrate import (
    BASELINE,
    LabelledPair,
    available_scorers,
    calibrate_columns,
    score_column,
)
from pytest_slam.compare.combined import features, fit
from pytest_slam.compare.validity import auc

Columns = dict[str, list[float]]


def split(units: Sequence[str], seed: int) -> tuple[list[int], list[int]]:
    """Row indices of two halves of the prompts (a prompt's pairs stay together)."""
    prompts = sorted(set(units))
    random.Random(seed).shuffle(prompts)
    first = set(prompts[: len(prompts) // 2])
    a = [i for i, u in enumerate(units) if u in first]
    return a, [i for i, u in enumerate(units) if u not in first]


def pick(rows: Sequence[int], values: Sequence[float]) -> list[float]:
    return [values[i] for i in rows]


@dataclass
class Held:
    """One split's chosen bands and what they did on the held-out half."""

    scorer: str
    at_least: float | None
    fail_below: float | None
    passed: Counts
    failed: Counts
    pairs: int

    @property
    def coverage(self) -> float:
        return (self.passed.called + self.failed.called) / self.pairs


def held_out(choice: Choice | None, cols: Columns, labels: list[int], rows: list[int]) -> Held:
    if choice is None:
        return Held("none", None, None, Counts(0, 0), Counts(0, 0), len(rows))
    passed, failed = band_counts(pick(rows, cols[choice.scorer]), pick(rows, labels),
                                 choice.at_least, choice.fail_below)  # fmt: skip
    return Held(choice.scorer, choice.at_least, choice.fail_below, passed, failed, len(rows))


def combined_choice(pairs: list[LabelledPair], feats: list[list[float]], rows: list[int],
                    targets: Targets, tried: int, seed: int) -> tuple[Choice, list[float]]:  # fmt: skip
    """The combined scorer fitted on half of ``rows``' prompts, certified on the other half;
    returns its choice and its score of every pair (to measure it held out)."""
    labels = [p.label for p in pairs]
    fit_part, cert_part = split([pairs[i].unit for i in rows], seed + 1000)
    fit_rows, cert_rows = [rows[i] for i in fit_part], [rows[i] for i in cert_part]
    model = fit([feats[i] for i in fit_rows], pick(fit_rows, labels))
    column = [model.probability(f) for f in feats]
    return choose_bands("combined", pick(cert_rows, column), pick(cert_rows, labels), targets,
                        tried), column  # fmt: skip


def rate(c: Counts) -> str:
    return f"{c.wrong / c.called:.3f}" if c.called else "-"


def summary(name: str, runs: list[Held], band: str) -> tuple[str, str, str]:
    """Mean over splits that called any pair, the min-max, and the pooled 95% upper bound."""
    counts = [getattr(h, band) for h in runs]
    rates = [c.wrong / c.called for c in counts if c.called]
    wrong, called = sum(c.wrong for c in counts), sum(c.called for c in counts)
    if not rates:
        return "- (none called)", "-", "-"
    return (f"{statistics.mean(rates):.3f} ({len(rates)}/{len(runs)} splits)",
            f"{min(rates):.3f}-{max(rates):.3f}",
            f"{upper_bound(wrong, called):.3f} ({wrong}/{called})")  # fmt: skip


def per_set(name: str, pairs: list[LabelledPair], cols: Columns, targets: Targets,
            splits: int) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:  # fmt: skip
    labels, units = [p.label for p in pairs], [p.unit for p in pairs]
    product = {n: cols[n] for n in available_cols(cols)}
    runs, extra, base = [], [], []
    feats = [features(p.candidate, p.reference) for p in pairs]
    for seed in range(splits):
        a, b = split(units, seed)
        result = calibrate_columns("", {n: pick(a, c) for n, c in product.items()},
                                   pick(a, labels), pick(a, units), targets)  # fmt: skip
        runs.append(held_out(result.chosen, cols, labels, b))
        base.append(held_out(Choice(BASELINE[0], BASELINE[1], BASELINE[1], 0, Counts(0, 0),
                                    Counts(0, 0)), cols, labels, b))  # fmt: skip
        tried = len(product) + 1  # the combined scorer shares the confidence too
        comb, comb_col = combined_choice(pairs, feats, a, targets, tried, seed)
        extra_cols = {**cols, "combined": comb_col}
        extra.append((seed, held_out(comb if comb.decided else None, extra_cols, labels, b)))
    rows = [(name, f"{len(pairs)} / {len(set(units))}", *summary(name, runs, "passed"),
             *summary(name, runs, "failed")[::2],
             coverage(runs),
             ", ".join(sorted({f'{h.scorer} {h.at_least}/{h.fail_below}' for h in runs})))]  # fmt: skip
    rows.append((f"{name}: fuzzy token_sort >= 0.7", "", *summary(name, base, "passed"),
                 *summary(name, base, "failed")[::2], "100%", "plain threshold"))  # fmt: skip
    notes = []
    for label in ("combined",):
        mine = [h for s, h in extra if h.scorer == label]
        notes.append((name, label, f"{len(mine)}/{splits}", coverage(mine) if mine else "-",
                      summary(name, mine, "passed")[2] if mine else "-",
                      summary(name, mine, "failed")[2] if mine else "-"))  # fmt: skip
    return rows, notes


def coverage(runs: list[Held]) -> str:
    values = [h.coverage for h in runs]
    return f"{statistics.mean(values):.1%} ({min(values):.1%}-{max(values):.1%})"


def available_cols(cols: Columns) -> list[str]:
    return [n for n in available_scorers() if n in cols]


def cross(sets: dict[str, list[LabelledPair]], cols: dict[str, Columns],
          targets: Targets) -> list[tuple[str, ...]]:  # fmt: skip
    rows = []
    for src, pairs in sets.items():
        product = {n: cols[src][n] for n in available_cols(cols[src])}
        units = [p.unit for p in pairs]
        chosen = calibrate_columns("", product, [p.label for p in pairs], units, targets).chosen
        for dst, other in sets.items():
            if dst == src:
                continue
            h = held_out(chosen, cols[dst], [p.label for p in other], list(range(len(other))))
            rows.append((src, dst, f"{h.scorer} {h.at_least}/{h.fail_below}",
                         f"{rate(h.passed)} ({h.passed.wrong}/{h.passed.called})",
                         f"{rate(h.failed)} ({h.failed.wrong}/{h.failed.called})",
                         f"{h.coverage:.1%}"))  # fmt: skip
    return rows


def widest(col: list[float], labels: list[int], target: float, fail: bool) -> str:
    """The widest band (>= 20 pairs) whose error on these very pairs is within ``target``: a
    ceiling no method certifying on a sample can pass."""
    best = (0, -1.0, 0.0)
    for t in GRID:
        band = [y for s, y in zip(col, labels, strict=True) if (s < t if fail else s >= t)]
        wrong = sum(band) if fail else len(band) - sum(band)
        if len(band) >= 20 and wrong <= target * len(band) and len(band) > best[0]:
            best = (len(band), t, wrong / len(band))
    n, t, err = best
    sign = "<" if fail else ">="
    return f"{n / len(col):.1%} ({sign} {t:.2f}, {err:.3f})" if n else "none"


def ceilings(sets: dict[str, list[LabelledPair]], cols: dict[str, Columns],
             targets: Targets) -> list[tuple[str, ...]]:  # fmt: skip
    rows = []
    for name, pairs in sets.items():
        labels = [p.label for p in pairs]
        for scorer, col in cols[name].items():
            rows.append((name, scorer, f"{auc(col, labels):.3f}",
                         widest(col, labels, targets.max_pass_error, fail=False),
                         widest(col, labels, targets.max_fail_error, fail=True)))  # fmt: skip
    return rows


def score_all(pairs: list[LabelledPair], semantic: bool) -> Columns:
    cols = {n: score_column(by, opts, pairs) for n, (by, opts) in available_scorers().items()
            if semantic or by != "semantic"}  # fmt: skip
    return cols


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=10)
    parser.add_argument("--no-semantic", action="store_true")
    parser.add_argument("--cache", type=Path, help="keep the scores here between runs")
    parser.add_argument("--max-pass-error", type=float, default=0.05)
    parser.add_argument("--max-fail-error", type=float, default=0.10)
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"bench/validity.py needs the shared data at {DATA} (absent here)")
    targets = Targets(args.max_pass_error, args.max_fail_error)
    header("Validity of the certified bands (10 splits by prompt, cross-data)",
           f"python bench/validity.py --splits {args.splits} --max-pass-error "
           f"{args.max_pass_error} --max-fail-error {args.max_fail_error}")  # fmt: skip
    sets = {name: load() for name, load in SETS.items()}
    cached = pickle.loads(args.cache.read_bytes()) if args.cache and args.cache.is_file() else {}
    cols = {n: cached.get(n) or score_all(p, not args.no_semantic) for n, p in sets.items()}
    if args.cache:
        args.cache.write_bytes(pickle.dumps(cols))
    rows, notes = [], []
    for name, pairs in sets.items():
        r, n = per_set(name, pairs, cols[name], targets, args.splits)
        rows += r
        notes += n
    print(f"\n#### Held out, {args.splits} splits by prompt (targets: pass error <= "
          f"{targets.max_pass_error}, fail error <= {targets.max_fail_error}, 95%)\n")  # fmt: skip
    table(("set", "pairs / prompts", "pass error, mean", "pass error, spread",
           "pass error, 95% upper (pooled)", "fail error, mean", "fail error, 95% upper",
           "coverage = judge calls saved", "bands chosen (scorer at_least/fail_below)"), rows)  # fmt: skip
    print("\n#### Scorers outside the product: certified on the calibration half, held out\n")
    table(("set", "scorer", "splits it certified", "held-out coverage", "pass error 95% upper",
           "fail error 95% upper"), notes)  # fmt: skip
    print("\n#### Ceiling: the widest band within the target on the very pairs it is measured on\n")
    table(("set", "scorer", "AUC", "pass band (share, threshold, error)",
           "fail band (share, threshold, error)"), ceilings(sets, cols, targets))  # fmt: skip
    print("\n#### Cross-data: bands chosen on all of one set, applied to another\n")
    table(("chosen on", "applied to", "bands", "pass error", "fail error", "coverage"),
          cross(sets, cols, targets))  # fmt: skip
    footer()


if __name__ == "__main__":
    main()
