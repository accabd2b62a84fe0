"""Where a band's error holds (issue 42): bands calibrated on one labelled set, applied with and
without the domain test (``compare/domain.py``) to the same set's held-out prompts and to other sets.

Reads ../shared/data in place (``validity_data.py``; "EVOUNA-NQ gold" is short QA with the
dataset's gold short answer as the reference, ``evouna_nq_gold``). Per calibration, ``slam calibrate``'s own
selection (``calibrate.calibrate_columns``: fuzzy x3, length and semantic, Learn then Test,
Bonferroni over the scorers) chooses the bands, ``domain.measure_domain`` records
the calibration pairs' ranges, and every applied pair is decided by the one verdict policy
(``policy.decide_pair``: empty, exact, then the bands) with no domain ("before") and with each
domain test ("after"): only the reference's length, only the candidate/reference length ratio, both,
and both with the scorer's values (what ``slam calibrate`` writes). Decided: pairs the policy
decided; pass/fail error: the labels' verdict on them, with exact 95% Clopper-Pearson intervals.

    python bench/bench_domain.py [--splits 5] [--cache /tmp/domain-scores.pkl]
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import footer, header, table
from validity import split
from validity_data import DATA, SETS, evouna_nq_gold

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT
from pytest_slam.compare.bandselect import Choice, Targets
from pytest_slam.compare.binomial import interval
from pytest_slam.compare.calibrate import (
    SCORERS,
    Aids,
    LabelledPair,
    available_scorers,
    calibrate_columns,
    score_column,
)
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.domain import Domain, measure_domain
from pytest_slam.compare.policy import Policy, decide_pair
from pytest_slam.records import Score

Columns = dict[str, list[float]]
TESTS = {  # the domain tests compared: which of the recorded ranges are checked
    "none (before)": (),
    "reference length": ("reference_chars",),
    "length ratio": ("length_ratio",),
    "reference length + ratio": ("reference_chars", "length_ratio"),
    "length + ratio + values (written)": ("reference_chars", "length_ratio", "values"),
    "length + ratio, 1%-99% of the pairs": ("reference_chars", "length_ratio", "trim"),
}
TRIM = 0.01


class _Value:
    """The pair's scored value as the policy's evidence (no judge, no review)."""

    def __init__(self, by: str, value: float) -> None:
        self.by, self.value = by, value

    def score(self) -> Score:
        return Score(self.by, self.value)

    def judge(self) -> Score | None:
        return None

    def review(self) -> tuple[str, str] | None:
        return None

    def why_no_judge(self) -> str | None:
        return None


def score_all(pairs: list[LabelledPair], aids: Aids) -> Columns:
    """Every scorer ``slam calibrate`` tries here, semantic's embeddings kept in ``aids``."""
    return {n: score_column(by, opts, pairs, aids) for n, (by, opts) in available_scorers().items()}


def chosen(cols: Columns, pairs: Sequence[LabelledPair], rows: Sequence[int],
           targets: Targets) -> tuple[Choice, Domain, Domain] | None:  # fmt: skip
    """The bands ``slam calibrate`` would choose on these rows, their measured domain (full
    ranges, as written) and the same ranges trimmed to 1%-99% of the pairs."""
    sub = {n: [c[i] for i in rows] for n, c in cols.items()}
    labels = [pairs[i].label for i in rows]
    result = calibrate_columns("", sub, labels, [pairs[i].unit for i in rows], targets)
    pick = result.chosen
    if pick is None:
        return None
    texts = ([pairs[i].candidate for i in rows], [pairs[i].reference for i in rows])
    return (pick, measure_domain("calibration", *texts, sub[pick.scorer]),
            measure_domain("calibration", *texts, sub[pick.scorer], TRIM))  # fmt: skip


def applied(choice: Choice, full: Domain, trimmed: Domain, checks: Sequence[str], cols: Columns,
            pairs: Sequence[LabelledPair], rows: Sequence[int]) -> list[int]:  # fmt: skip
    """[decided, called equivalent, wrongly, called different, wrongly] over ``rows``."""
    domain = trimmed if "trim" in checks else full
    kept = Domain(domain.scope, *(getattr(domain, n) if n in checks else None
                                  for n in ("reference_chars", "length_ratio", "values")))  # fmt: skip
    measured = {"band_error": {"domain": kept.as_table()}} if checks else {}
    by = SCORERS[choice.scorer][0]
    policy = Policy(by, Rule(choice.at_least, choice.fail_below), (), measured)
    col = cols[choice.scorer]
    out = [0, 0, 0, 0, 0]
    for i in rows:
        p = pairs[i]
        score = decide_pair(policy, p.candidate, p.reference, _Value(by, col[i]))
        if score.verdict == EQUIVALENT:
            out[0:3] = [out[0] + 1, out[1] + 1, out[2] + (1 - p.label)]
        elif score.verdict == DIFFERENT:
            out[0], out[3], out[4] = out[0] + 1, out[3] + 1, out[4] + p.label
    return out


def error(wrong: int, of: int) -> str:
    if not of:
        return "none called"
    low, high = interval(wrong, of)
    return f"{wrong / of:.3f} [{low:.3f}, {high:.3f}] ({wrong} of {of})"


def rows_of(label: str, choice: Choice, counts: dict[str, list[int]], n: int) -> list[list[str]]:
    bands = f"{choice.scorer} {choice.at_least}/{choice.fail_below}"
    return [[label, bands, test, f"{c[0]} of {n} ({c[0] / n:.1%})", error(c[2], c[1]),
             error(c[4], c[3])] for test, c in counts.items()]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--cache", type=Path, help="keep the scores here between runs")
    parser.add_argument("--embeddings", type=Path, default=Path("/tmp/slam-bench-embeddings"),
                        help="semantic's embeddings cache")  # fmt: skip
    args = parser.parse_args()
    if not DATA.is_dir():
        raise SystemExit(f"bench/bench_domain.py needs the shared data at {DATA} (absent here)")
    targets = Targets()
    header("Where a band's error holds: the domain test (issue 42)",
           f"python bench/bench_domain.py --splits {args.splits}")  # fmt: skip
    sets = {name: load() for name, load in {**SETS, "EVOUNA-NQ gold": evouna_nq_gold}.items()}
    cached = pickle.loads(args.cache.read_bytes()) if args.cache and args.cache.is_file() else {}
    aids = Aids(DiskCache(args.embeddings), lambda line: print(line, file=sys.stderr))
    cols = {n: cached.get(n) or score_all(p, aids) for n, p in sets.items()}
    if args.cache:
        args.cache.write_bytes(pickle.dumps(cols))
    out: list[list[str]] = []
    for source, pairs in sets.items():
        found = chosen(cols[source], pairs, range(len(pairs)), targets)
        if found is None:
            out.append([f"{source} (all) -> others", "no band certified", "", "", "", ""])
            continue
        choice, domain, trimmed = found
        print(f"\n{source}: {choice.scorer} {choice.at_least}/{choice.fail_below}, "
              f"domain {domain.as_table()}, trimmed {trimmed.as_table()}")  # fmt: skip
        for target, other in sets.items():
            if target == source:
                continue
            counts = {t: applied(choice, domain, trimmed, c, cols[target], other, range(len(other)))
                      for t, c in TESTS.items()}  # fmt: skip
            out += rows_of(f"{source} (all) -> {target}", choice, counts, len(other))
    print("\n#### Calibrated on one set, applied to another\n")
    table(("calibrated on -> applied to", "bands", "domain test", "decided", "pass error",
           "fail error"), out)  # fmt: skip
    held: list[list[str]] = []
    for name, pairs in sets.items():
        total = {t: [0, 0, 0, 0, 0] for t in TESTS}
        n = 0
        for seed in range(args.splits):
            a, b = split([p.unit for p in pairs], seed)
            found = chosen(cols[name], pairs, a, targets)
            n += len(b)
            if found is None:
                continue
            for t, c in TESTS.items():
                got = applied(*found, c, cols[name], pairs, b)
                total[t] = [x + y for x, y in zip(total[t], got, strict=True)]
        held += [[name, t, f"{c[0]} of {n} ({c[0] / n:.1%})", error(c[2], c[1]),
                  error(c[4], c[3])] for t, c in total.items()]  # fmt: skip
    print(f"\n#### In domain: calibrated on half the prompts, measured on the other half "
          f"({args.splits} splits, pooled)\n")  # fmt: skip
    table(("set", "domain test", "decided", "pass error", "fail error"), held)
    footer()


if __name__ == "__main__":
    main()
