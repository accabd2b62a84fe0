"""Bands hold by feature (issue 50): short-QA bands met by their own feature's held-out prompts,
by another short-QA set as another module, and by MT-Bench answers as another module.

Reads ../shared/data (or ``SLAM_SHARED_DATA``) in place (``validity_data.py``). Per split, the
bands are chosen by ``slam calibrate``'s own path (``calibrate.calibrate_scope``: fuzzy x3, length
and containment, Learn then Test, Bonferroni over the scorers; ``--scorers`` narrows them as
``slam calibrate --scorers`` does) on half the prompts of EVOUNA-NQ with the gold short answer as
the reference (short QA), labelled as module ``tests/test_qa.py``; what a run states is the
``band_error`` table ``slam calibrate`` writes (``calibrate_toml.band_error``, its domain naming
the module). Each applied pair is decided by the one verdict policy (``policy.decide_pair``) with
its own module (``Policy.module``), and, for comparison, with the module unknown (the length
domain only: before issue 50):

- (a) the other half of the prompts, the same feature (``tests/test_qa.py``);
- (b) EVOUNA-NQ with GPT-4's answer as the reference, another short-QA set, as
  ``tests/test_nq_chat.py``;
- (c) MT-Bench answers graded by GPT-4, as ``tests/test_mt.py``.

Decided by the bands, measured error (the labels' verdict on them, exact 95% Clopper-Pearson)
and the stated error (the calibration's 95% upper bounds: median over the splits), pooled over
the splits.

Beside it, (a)'s ceiling: per scorer tried, the most that any one pass band decides on the held-out
half at a measured pass error within the target, its threshold picked on the held-out labels
themselves, and the lowest fail error any fail band of ``min_count`` pairs reaches there. It is an
oracle, never a verdict (it tunes on the pairs it measures): it bounds what any calibration of these
scorers could decide on this set, honestly held out or not.

    python bench/bench_scope.py [--splits 5] [--semantic] [--scorers token_set_ratio,containment]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Iterator, Sequence
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
    ScopeResult,
    Scorers,
    available_scorers,
    calibrate_scope,
    score_column,
)
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.policy import Policy, decide_pair, reaches_scorer
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


class Ceiling:
    """One scorer's oracle on (a)'s held-out halves: the widest pass band within the target and
    the widest fail band below it, each chosen on the pairs it is measured on (a bound, not a
    verdict)."""

    def __init__(self) -> None:
        self.pairs = self.settled = self.passed = self.failed = 0
        self.at: list[float | None] = []  # None: no pass band within the target

    def add(self, pairs: Sequence[LabelledPair], values: Sequence[float], rows: Sequence[int],
            targets: Targets) -> None:  # fmt: skip
        """The held-out ``rows``: settled ones (identical, blank) count as decided, as in a run."""
        settled = {i for i in rows if not reaches_scorer(pairs[i].candidate, pairs[i].reference)}
        scored = sorted(((values[i], pairs[i].label) for i in rows if i not in settled),
                        reverse=True)  # fmt: skip
        passed, wrong = 0, 0
        at: float | None = None
        for n, (value, label) in enumerate(scored, 1):  # a pass band: the n highest values
            wrong += 1 - label
            if (n == len(scored) or scored[n][0] < value) and wrong / n <= targets.max_pass_error:
                passed, at = n, value  # a band ends between two values
        rest = scored[passed:][::-1]
        failed, right = 0, 0
        for n, (value, label) in enumerate(rest, 1):  # a fail band: the n lowest of the rest
            right += label
            ends = n == len(rest) or rest[n][0] > value
            if ends and n >= targets.min_count and right / n <= targets.max_fail_error:
                failed = n
        self.pairs += len(rows)
        self.settled += len(settled)
        self.passed += passed
        self.failed += failed
        self.at.append(at)

    def row(self, name: str) -> list[str]:
        decided = self.settled + self.passed + self.failed
        return [
            name,
            f"{decided} of {self.pairs} ({decided / self.pairs:.1%})",
            f"{self.passed} ({self.passed / self.pairs:.1%}), at "
            + ", ".join("none" if a is None else f"{a:.2f}" for a in self.at),
            f"{self.failed} ({self.failed / self.pairs:.1%})",
            f"{self.settled} ({self.settled / self.pairs:.1%})",
        ]


def calibrated_splits(
    qa: Sequence[LabelledPair], splits: int, scorers: Scorers, aids: Aids
) -> Iterator[tuple[int, ScopeResult, list[int]]]:
    """Each split of ``qa`` by prompt: bands calibrated on its first half as ``slam calibrate``
    does, with the held-out half's indices; a split whose pass band is not certified is said and
    left out."""
    for seed in range(splits):
        first, second = split([p.unit for p in qa], seed)
        result = calibrate_scope("", [qa[i] for i in first], Targets(), scorers, 0, aids)
        pick = result.chosen
        if pick is None or pick.at_least is None:
            print(f"split {seed}: no pass band certified", file=sys.stderr)
            continue
        yield seed, result, second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=5)
    parser.add_argument("--semantic", action="store_true", help="try semantic too (slow on CPU)")
    parser.add_argument("--scorers", default="", help="comma-separated, as slam calibrate's")
    parser.add_argument("--embeddings", type=Path, default=Path("/tmp/slam-bench-embeddings"))
    args = parser.parse_args()
    validity_data.located("bench/bench_scope.py")
    header(
        "Bands hold by feature (issue 50)",
        f"python bench/bench_scope.py --splits {args.splits}"
        + " --semantic" * args.semantic
        + (f" --scorers {args.scorers}" if args.scorers else ""),
    )
    only = [n.strip() for n in args.scorers.split(",") if n.strip()]
    scorers = {
        n: s for n, s in available_scorers(only).items() if args.semantic or s[0] != "semantic"
    }
    aids = Aids(DiskCache(args.embeddings), None)
    sets = {row: [replace(p, module=m) for p in load()] for row, (load, m) in TARGETS.items()}
    qa = sets["(a) short QA, other half"]
    columns: dict[tuple[str, str], list[float]] = {}
    tallies = {(row, scoped): Tally() for row in TARGETS for scoped in (True, False)}
    ceilings: dict[str, Ceiling] = {}
    for seed, result, second in calibrated_splits(qa, args.splits, scorers, aids):
        pick = result.chosen
        assert pick is not None and pick.at_least is not None
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
        for name, (by, options) in scorers.items():
            key = ("(a) short QA, other half", name)
            if key not in columns:
                columns[key] = score_column(by, options, qa, aids)
            ceilings.setdefault(name, Ceiling()).add(qa, columns[key], second, Targets())
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
    target = Targets()
    print(
        f"\n#### (a)'s ceiling: the widest bands at a measured pass error <= {target.max_pass_error}"
        f" and fail error <= {target.max_fail_error}, chosen on the held-out half itself"
        " (an oracle, not a verdict)\n"
    )
    table(
        ("scorer", "decided (any evidence)", "by a pass band, at", "by a fail band", "identical"),
        [c.row(name) for name, c in ceilings.items() if c.pairs],
    )
    footer()


if __name__ == "__main__":
    main()
