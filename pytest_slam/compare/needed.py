"""How many labelled pairs of each kind a band or a judge needs before it can be certified, said
before they are needed (issue 42).

Learn then Test (``bandselect``) certifies a band only once it holds ``sequence_start`` pairs at
the targets' error and confidence: a pass band needs that many pairs in it (nearly all labelled
acceptable, since its error is small), a fail band that many (nearly all unacceptable). Bands share
the confidence over the scorers ``slam calibrate`` tries (Bonferroni); the judge is certified on
its own (``evaluation.certify_judge``), so it needs fewer, but they must be pairs *it called*
equivalent (or different). At the defaults (pass error <= 0.05, fail error <= 0.10, 95%): a judge
needs 230 pairs it called equivalent and 114 it called different; bands chosen among 5 scorers
need 395 and 195 (each the exact smallest count the rule allows, ``sequence_start``).

A count is only "enough" where it can certify: a side whose evaluation had the pairs and still
was not certified (its error on them is above the target) says so, not "enough".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pytest_slam.compare.bandselect import Targets, sequence_start

NOT_ENOUGH = (
    "as many as the rule needs, yet not certified: its error on them is above the target; label "
    "more pairs of the kind it gets wrong, or loosen the target (--max-pass-error, "
    "--max-fail-error)"
)


@dataclass(frozen=True)
class Need:
    """One side of one evidence: the pairs it needs, and the pairs of that kind there are."""

    evidence: str  # "bands" | "judge"
    side: str  # "equivalent" | "different"
    needs: int
    has: int

    @property
    def more(self) -> int:
        return max(0, self.needs - self.has)


def needs_of(targets: Targets, scorers: int = 1) -> tuple[int, int]:
    """(pairs a pass band needs, pairs a fail band needs) when ``scorers`` share the confidence."""
    level = targets.delta / (2 * max(1, scorers))
    return (
        sequence_start(targets.max_pass_error, level, targets.min_count),
        sequence_start(targets.max_fail_error, level, targets.min_count),
    )


def needs(
    targets: Targets,
    scorers: int,
    acceptable: int,
    unacceptable: int,
    judge_called: tuple[int, int] | None = None,
) -> list[Need]:
    """Both evidences' needs: bands against the labels of each kind, the judge against the pairs
    it called each way (when known; else against the labels of each kind, the most it could
    call)."""
    bands = needs_of(targets, scorers)
    judge = needs_of(targets, 1)
    called = judge_called if judge_called is not None else (acceptable, unacceptable)
    return [
        Need("bands", "equivalent", bands[0], acceptable),
        Need("bands", "different", bands[1], unacceptable),
        Need("judge", "equivalent", judge[0], called[0]),
        Need("judge", "different", judge[1], called[1]),
    ]


def needs_lines(
    targets: Targets,
    scorers: int,
    acceptable: int,
    unacceptable: int,
    judge_called: tuple[int, int] | None = None,
    certified: Mapping[tuple[str, str], bool] | None = None,
) -> list[str]:
    """What a user reads: per evidence and side, needed, had, and how many more to label;
    ``certified``: (evidence, side) -> whether it was certified, where that was measured."""
    at = (
        f"pass error <= {targets.max_pass_error:g}, fail error <= {targets.max_fail_error:g} at "
        f"{1 - targets.delta:.0%}"
    )
    lines = [
        f"labels needed to certify ({at}); you have {acceptable + unacceptable} labelled pair(s): "
        f"{acceptable} acceptable, {unacceptable} not"
    ]
    for need in needs(targets, scorers, acceptable, unacceptable, judge_called):
        if need.evidence == "bands":
            what = f"pairs labelled {'acceptable' if need.side == 'equivalent' else 'not'}"
            whose = f"a {'pass' if need.side == 'equivalent' else 'fail'} band ({scorers} scorers)"
        else:
            what = "pairs the judge called " + need.side
            whose = f"the judge's {need.side}"
        more = f"review {need.more} more" if need.more else "enough"
        if not need.more and (certified or {}).get((need.evidence, need.side)) is False:
            more = NOT_ENOUGH
        has = (
            f"has at most {need.has}"
            if need.evidence == "judge" and judge_called is None
            else f"has {need.has}"
        )
        lines.append(f"  {whose}: needs {need.needs} {what}; {has}: {more}")
    return lines
