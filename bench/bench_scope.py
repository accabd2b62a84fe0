"""Bands hold by feature (issue 50): short-QA bands met by their own feature's held-out prompts,
by another short-QA set as another module, and by MT-Bench answers as another module.

Reads ../shared/data (or ``SLAM_SHARED_DATA``) in place (``validity_data.py``). Per split, the
bands are chosen by ``slam calibrate``'s own path (``calibrate.calibrate_scope``: fuzzy x3 and
length, Learn then Test, Bonferroni over the scorers) on half the prompts of EVOUNA-NQ with the
gold short answer as the reference (short QA), labelled as module ``tests/test_qa.py``; what a
run states is the ``band_error`` table ``slam calibrate`` writes (``calibrate_toml.band_error``,
its domain naming the module). Each applied pair is decided by the one verdict policy
(``policy.decide_pair``) with its own module (``Policy.module``), and, for comparison, with the
module unknown (the length domain only: before issue 50):

- (a) the other half of the prompts, the same feature (``tests/test_qa.py``);
- (b) EVOUNA-NQ with GPT-4's answer as the reference, another short-QA set, as
  ``tests/test_nq_chat.py``;
- (c) MT-Bench answers graded by GPT-4, as ``tests/test_mt.py``.

Decided by the bands, measured error (the labels' verdict on them, exact 95% Clopper-Pearson)
and the stated error (the calibration's 95% upper bounds: median over the splits), pooled over
the splits.

    python bench/bench_scope.py [--splits 5] [--semantic]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validity_data
from _common import footer, header, table
from validity import split

from pytest_slam.cli.calibrate_toml import band_error
from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT
from pytest_slam.compare.bandselect import Targets
from pytest_slam.compare.binomial import interval
from pytest_slam.compare.calibrate import (
    SCORERS,
    Aids,
    LabelledPair,
    available_scorers,
    calibrate_scope,
    score_column,
)
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.policy import Policy, decide_pair
from pytest_slam.records import Score

QA = "tests/test_qa.py"
TARGETS = {  # row -> (its pairs' loader, module)
    "(a) short QA, other half": (validity_data.evouna_nq_gold, QA),
    "(b) another short-QA set": (validity_data.evouna_nq, "tests/test_nq_chat.py"),
    "(c) MT-Bench": (validity_data.mt_bench_graded, "tests/test_mt.py"),
}


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


class Tally:
    """Pairs applied, decided by the bands, called each way and wrongly, and what was stated."""

    def __init__(self) -> None:
        self.pairs = self.decided = self.settled = 0  # settled: decided by other evidence
        self.called = {EQUIVALENT: 0, DIFFERENT: 0}
        self.wrong = {EQUIVALENT: 0, DIFFERENT: 0}
        self.stated: dict[str, list[float]] = {"pass": [], "fail": []}

    def error(self, verdict: str) -> str:
        of, wrong = self.called[verdict], self.wrong[verdict]
        if not of:
            return "none called"
        low, high = interval(wrong, of)
        return f"{wrong / of:.3f} [{low:.3f}, {high:.3f}] ({wrong} of {of})"

    def stated_error(self, side: str) -> str:
        found = self.stated[side]
        return f"<= {statistics.median(found):.3f}" if found else "-"


def apply(
    table_: dict[str, object],
    chosen: tuple[str, float | None, float | None],
    pairs: Sequence[LabelledPair],
    values: Sequence[float],
    rows: Sequence[int],
    module: str,
    tally: Tally,
) -> None:
    """Decide ``rows`` by the policy with the calibration's bands and stated error."""
    name, at_least, fail_below = chosen
    by = SCORERS[name][0]
    policy = Policy(by, Rule(at_least, fail_below), (), {"band_error": table_}, module=module)
    for i in rows:
        p = pairs[i]
        score = decide_pair(policy, p.candidate, p.reference, _Value(by, values[i]))
        tally.pairs += 1
        if score.verdict not in (EQUIVALENT, DIFFERENT):
            continue
        if score.decided_by != "bands":  # certain: an identical or an empty answer
            tally.settled += 1
            continue
        tally.decided += 1
        tally.called[score.verdict] += 1
        tally.wrong[score.verdict] += p.label != (score.verdict == EQUIVALENT)
    for side in ("pass", "fail"):
        upper = table_.get(f"{side}_upper")
        if isinstance(upper, float):
            tally.stated[side].append(upper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--semantic", action="store_true", help="try semantic too (slow on CPU)")
    parser.add_argument("--embeddings", type=Path, default=Path("/tmp/slam-bench-embeddings"))
    args = parser.parse_args()
    if os.environ.get("SLAM_SHARED_DATA"):
        validity_data.DATA = Path(os.environ["SLAM_SHARED_DATA"])
    if not validity_data.DATA.is_dir():
        raise SystemExit(f"bench/bench_scope.py needs the shared data at {validity_data.DATA}")
    header(
        "Bands hold by feature (issue 50)",
        f"python bench/bench_scope.py --splits {args.splits}" + " --semantic" * args.semantic,
    )
    scorers = {n: s for n, s in available_scorers().items() if args.semantic or s[0] != "semantic"}
    aids = Aids(DiskCache(args.embeddings), None)
    sets = {row: [replace(p, module=m) for p in load()] for row, (load, m) in TARGETS.items()}
    qa = sets["(a) short QA, other half"]
    columns: dict[tuple[str, str], list[float]] = {}
    tallies = {(row, scoped): Tally() for row in TARGETS for scoped in (True, False)}
    for seed in range(args.splits):
        first, second = split([p.unit for p in qa], seed)
        result = calibrate_scope("", [qa[i] for i in first], Targets(), scorers, 0, aids)
        pick = result.chosen
        if pick is None or pick.at_least is None:
            print(f"split {seed}: no pass band certified", file=sys.stderr)
            continue
        stated = band_error(result)
        chosen = (pick.scorer, pick.at_least, pick.fail_below)
        for row, pairs in sets.items():
            key = (row, pick.scorer)
            if key not in columns:
                by, options = SCORERS[pick.scorer]
                columns[key] = score_column(by, options, pairs, aids)
            rows = second if row.startswith("(a)") else range(len(pairs))
            module = TARGETS[row][1]
            for scoped in (True, False):
                tally = tallies[(row, scoped)]
                apply(stated, chosen, pairs, columns[key], rows, module if scoped else "", tally)
        print(f"split {seed}: {pick.scorer} {pick.at_least}/{pick.fail_below}", file=sys.stderr)
    out = []
    for (row, scoped), t in tallies.items():
        share = f"{t.decided} of {t.pairs} ({t.decided / t.pairs:.1%})" if t.pairs else "-"
        both = t.decided + t.settled
        total = f"{both} ({both / t.pairs:.1%})" if t.pairs else "-"
        scope = "by module (issue 50)" if scoped else "length domain only (before)"
        out.append(
            [
                row,
                scope,
                total,
                share,
                t.error(EQUIVALENT),
                t.stated_error("pass"),
                t.error(DIFFERENT),
                t.stated_error("fail"),
            ]
        )
    print(f"\n#### Short-QA bands ({args.splits} splits, pooled), decided by the bands\n")
    table(
        (
            "applied to",
            "scope test",
            "decided (any evidence)",
            "decided by the bands",
            "pass error [95%]",
            "stated pass",
            "fail error [95%]",
            "stated fail",
        ),
        out,
    )
    footer()


if __name__ == "__main__":
    main()
