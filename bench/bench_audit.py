"""Audits while in use (issue 50 item 2): how many audits withdraw short-QA bands where their stated
error does not hold, and how often they withdraw them where it does, on real labels.

Reads ../shared/data (or ``SLAM_SHARED_DATA``) in place (``validity_data.py``). As
``bench_scope.py``: per split, short-QA bands chosen by ``slam calibrate``'s own path on half the
prompts of EVOUNA-NQ with the gold short answer as the reference, their stated error the
``band_error`` table ``slam calibrate`` writes. Here the bands are taken to cover each target's
module (as ``slam calibrate --modules`` names it, or labels without a module leave them): every
pair is decided by the one policy, and each pair the pass band called equivalent is a pair a run
could set aside for audit. Per target, ``--streams`` audit streams draw those pairs in a seeded
random order, each audit labelled by the data's own human (or GPT-4 grade) label, and the stated
pass bound is re-tested after each audit by ``compare/audit.contradicts`` (SPRT, error 3x the
bound against the bound, alpha 0.05), up to ``--most`` audits:

- (a) the other half of the prompts, the same feature: the bound holds, audits should keep it;
- (b) EVOUNA-NQ with GPT-4's answer as the reference, another short-QA set;
- (c) MT-Bench answers graded by GPT-4.

    python bench/bench_audit.py [--splits 1] [--streams 400] [--most 200]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validity_data
from _common import footer, header, table
from bench_scope import TARGETS, _Value, calibrated_splits

from pytest_slam.cli.calibrate_toml import band_error
from pytest_slam.compare.audit import ALPHA, RATIO, contradicts, fewest_audits
from pytest_slam.compare.bands import EQUIVALENT
from pytest_slam.compare.binomial import interval
from pytest_slam.compare.calibrate import (
    SCORERS,
    Aids,
    available_scorers,
    score_column,
)
from pytest_slam.compare.decide import Rule
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.compare.policy import Policy, decide_pair

CHECKPOINTS = (10, 20, 50, 100, 200)


def withdrawn_after(wrong: list[bool], stated: float, most: int, rng: random.Random) -> int | None:
    """Audits until the stated bound is withdrawn, drawing ``wrong`` in random order (None:
    kept through ``most`` audits)."""
    order = rng.sample(range(len(wrong)), min(most, len(wrong)))
    errors = 0
    for n, i in enumerate(order, 1):
        errors += wrong[i]
        if contradicts(errors, n, stated):
            return n
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--splits", type=int, default=1)
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--most", type=int, default=200)
    parser.add_argument("--embeddings", type=Path, default=Path("/tmp/slam-bench-embeddings"))
    args = parser.parse_args()
    validity_data.located("bench/bench_audit.py")
    header(
        "Audits while in use (issue 50)",
        f"python bench/bench_audit.py --splits {args.splits} --streams {args.streams} "
        f"--most {args.most}",
    )
    scorers = {n: s for n, s in available_scorers().items() if s[0] != "semantic"}
    aids = Aids(DiskCache(args.embeddings), None)
    sets = {row: [replace(p, module=m) for p in load()] for row, (load, m) in TARGETS.items()}
    qa = sets["(a) short QA, other half"]
    out = []
    for seed, result, second in calibrated_splits(qa, args.splits, scorers, aids):
        pick = result.chosen
        assert pick is not None and pick.at_least is not None
        stated_table = band_error(result)
        stated = float(stated_table["pass_upper"])  # type: ignore[arg-type]
        by = SCORERS[pick.scorer][0]
        policy = Policy(by, Rule(pick.at_least, pick.fail_below), (), {"band_error": stated_table})
        print(f"split {seed}: {pick.scorer} >= {pick.at_least}, <= {stated:.3f}", file=sys.stderr)
        for row, pairs in sets.items():
            values = score_column(by, SCORERS[pick.scorer][1], pairs, aids)
            rows = second if row.startswith("(a)") else range(len(pairs))
            wrong = []
            for i in rows:
                p = pairs[i]
                score = decide_pair(policy, p.candidate, p.reference, _Value(by, values[i]))
                if score.verdict == EQUIVALENT and score.decided_by == "bands":
                    wrong.append(p.label == 0)
            rng = random.Random(f"{seed}\0{row}")
            counts = [withdrawn_after(wrong, stated, args.most, rng) for _ in range(args.streams)]
            done = [c for c in counts if c is not None]
            low, high = interval(sum(wrong), len(wrong))
            shares = [
                f"{sum(1 for c in done if c <= k) / len(counts):.1%}"
                for k in CHECKPOINTS
                if k <= args.most
            ]
            out.append(
                [
                    row,
                    str(seed),
                    f"{len(wrong):,}",
                    f"{sum(wrong) / len(wrong):.3f} [{low:.3f}, {high:.3f}]",
                    f"<= {stated:.3f}",
                    *shares,
                    str(statistics.median(done)) if done else "-",
                ]
            )
    print(
        f"\n#### The pass bound re-tested on audits ({args.streams} streams per row; SPRT, error "
        f"{RATIO:g}x the bound, alpha {ALPHA}; fewest audits that withdraw "
        f"{fewest_audits(0.047)} at a bound of 0.047)\n"
    )
    table(
        (
            "audited",
            "split",
            "pairs called equivalent",
            "their error [95%]",
            "stated",
            *(f"withdrawn by {k}" for k in CHECKPOINTS if k <= args.most),
            "median audits (withdrawn)",
        ),
        out,
    )
    footer()


if __name__ == "__main__":
    main()
