"""Measured verdict error per evidence: the figures ``slam calibrate --evaluate`` prints and a
run's report can reuse.

Given, for each labelled pair, its label (1: acceptable) and the verdict it got with the evidence
that decided it (``Score.decided_by``: "structure", "bands", "threshold", "judge", "review"; None
when undecided), each evidence and the whole get: pairs decided, called equivalent, called
different, the pass error (unacceptable among the pairs called equivalent) and the fail error
(acceptable among those called different), each with an exact two-sided Clopper-Pearson
interval. Counting lives here once, so every place that states a verdict's error states the same
numbers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT
from pytest_slam.compare.binomial import interval

EVIDENCE_ORDER = ("exact", "empty", "structure", "threshold", "bands", "judge", "review")


@dataclass(frozen=True)
class LabelVerdict:
    """One labelled pair's verdict: its label, the verdict (None or "undecided": not decided) and
    the evidence that decided it. (Not the run's end stage, ``run.judge_stage.Judged``.)"""

    label: int
    verdict: str | None
    evidence: str | None = None


def error_of(wrong: int, of: int, level: float = 0.95) -> dict[str, Any]:
    """``{"value", "low", "high", "wrong", "of"}``: a share with its exact interval (value None
    when nothing was called)."""
    low, high = interval(wrong, of, level)
    return {"value": wrong / of if of else None, "low": low, "high": high, "wrong": wrong, "of": of}


def tally(rows: Iterable[LabelVerdict], level: float = 0.95) -> dict[str, Any]:
    """``{"decided", "equivalent", "different", "pass_error", "fail_error"}`` of these rows."""
    passed = failed = pass_wrong = fail_wrong = 0
    for r in rows:
        if r.verdict == EQUIVALENT:
            passed += 1
            pass_wrong += 1 - r.label
        elif r.verdict == DIFFERENT:
            failed += 1
            fail_wrong += r.label
    return {
        "decided": passed + failed,
        "equivalent": passed,
        "different": failed,
        "pass_error": error_of(pass_wrong, passed, level),
        "fail_error": error_of(fail_wrong, failed, level),
    }


def errors_by_evidence(rows: Iterable[LabelVerdict], level: float = 0.95) -> dict[str, Any]:
    """The overall tally (with ``pairs`` and ``undecided``) and ``evidence``: one tally per
    evidence that decided at least one pair, in the cascade's order (cheapest first)."""
    rows = list(rows)
    total = tally(rows, level)
    names = {r.evidence for r in rows if r.evidence and r.verdict in (EQUIVALENT, DIFFERENT)}
    ordered = sorted(names, key=lambda n: (*EVIDENCE_ORDER, n).index(n))
    return {
        "pairs": len(rows),
        **total,
        "undecided": len(rows) - total["decided"],
        "evidence": {n: tally([r for r in rows if r.evidence == n], level) for n in ordered},
    }
