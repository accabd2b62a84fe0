"""Audits while in use: the stated error of bands or a judge re-tested on a feature's own answers
(issue 50).

A calibration states an error on the labels it was measured on ("error 0.036 (<= 0.044)"). It
holds only while the answers stay like those labels: a candidate or a prompt that changes can make
the bands wrong on a feature without anything saying so. So a run sets aside a few of each
feature's band- and judge-decided pairs (``review/audits.py``), ``slam review --audit`` shows them
blind, and each audit label keeps the verdict it audited: the evidence (``band_error`` or
``judge_error``), the side (equivalent or different) and the stated upper bound it carried.

On those labels the stated bound is re-tested with Wald's sequential probability ratio test: after
each audit, the likelihood ratio of the error being ``RATIO`` times the stated bound against it
being the stated bound. The bound is withdrawn once the ratio reaches ``1 / ALPHA``. Under a bound
that holds, the ratio is a non-negative supermartingale, so by Ville's inequality the chance that
it *ever* reaches ``1 / ALPHA``, however many audits come and however often it is looked at, is at
most ``ALPHA``: no alpha spending over the looks is needed. A withdrawn bound decides nothing on
that feature (``policy.decide_pair``): its pairs go down the cascade or stay undecided, the cause
named (``WITHDRAWN``) with the fix (recalibrate with the audit labels, which gives a new bound that
these audits no longer test).

At the defaults (``ALPHA`` 0.05, ``RATIO`` 3) three audits in a row that find an error withdraw a
bound of 0.044; where the error really is 0.30 (short-QA bands on MT-Bench answers) about 12 audits
are needed on average (``expected_audits``); an error at the bound withdraws it with chance at
most 0.05.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pytest_slam.compare.bands import DIFFERENT, EQUIVALENT

ALPHA = 0.05  # the chance of ever withdrawing a bound that holds (Ville's inequality)
RATIO = 3.0  # the alternative: an error this many times the stated bound
WITHDRAWN_OPENING = "withdrawn by audits"
EVIDENCE = {"band_error": "the bands'", "judge_error": "the judge's"}  # whose verdicts
SIDES = {EQUIVALENT: "pass", DIFFERENT: "fail"}
FIX = (
    "recalibrate with the audit labels (`slam review --export-labels labels.jsonl`, then "
    "`slam calibrate --labels labels.jsonl`; `slam calibrate --evaluate` counts them too)"
)


@dataclass(frozen=True)
class Audited:
    """One audit label: the verdict it audited and what a person said of the pair."""

    measured: str  # "band_error" | "judge_error": the evidence whose stated error it tests
    verdict: str  # "equivalent" | "different": what the evidence called the pair
    stated: float  # the stated upper bound that verdict carried (its ``error_upper``)
    label: int  # 1: the person found the candidate acceptable (win or tie)

    @property
    def wrong(self) -> bool:
        """The evidence called it wrongly: equivalent but not acceptable, or the other way."""
        return (self.verdict == EQUIVALENT) != bool(self.label)


def alternative(stated: float, ratio: float = RATIO) -> float:
    """The error the test weighs against the stated one: ``ratio`` times it, at most halfway
    from it to 1 (so it stays a rate above the stated one)."""
    return min(ratio * stated, (1 + stated) / 2)


def log_ratio(errors: int, audits: int, stated: float, ratio: float = RATIO) -> float:
    """The log likelihood ratio after ``audits`` audits with ``errors`` errors: of the error
    being ``alternative(stated)`` against it being ``stated``."""
    if stated <= 0.0:  # a bound of no error at all: one error contradicts it
        return math.inf if errors else 0.0
    if stated >= 1.0:
        return 0.0  # nothing is above it
    high = alternative(stated, ratio)
    right = audits - errors
    return errors * math.log(high / stated) + right * math.log((1 - high) / (1 - stated))


def contradicts(errors: int, audits: int, stated: float, alpha: float = ALPHA) -> bool:
    """Whether the audits withdraw the stated bound: the ratio reached ``1 / alpha``."""
    return log_ratio(errors, audits, stated) >= math.log(1 / alpha)


def fewest_audits(stated: float, alpha: float = ALPHA, ratio: float = RATIO) -> int:
    """The fewest audits that can withdraw the bound: each one an error."""
    if stated <= 0.0:
        return 1
    step = math.log(alternative(stated, ratio) / stated)
    return max(1, math.ceil(math.log(1 / alpha) / step - 1e-12))


def expected_audits(
    stated: float, true_error: float, alpha: float = ALPHA, ratio: float = RATIO
) -> float:
    """Wald's approximate mean number of audits that withdraw the bound when the error really is
    ``true_error`` (inf where the ratio does not climb: an error at or near the bound)."""
    high = alternative(stated, ratio)
    drift = true_error * math.log(high / stated) + (1 - true_error) * math.log(
        (1 - high) / (1 - stated)
    )
    return math.log(1 / alpha) / drift if drift > 0 else math.inf


@dataclass(frozen=True)
class Finding:
    """What a feature's audits say of one stated bound: audits, errors, and whether withdrawn."""

    measured: str
    verdict: str
    stated: float  # the upper bound tested
    rate: float | None  # the stated error itself (``pass`` / ``fail``), as the pairs printed it
    audits: int
    errors: int

    @property
    def withdrawn(self) -> bool:
        return contradicts(self.errors, self.audits, self.stated)

    @property
    def why(self) -> str:
        """The cause of the pairs it leaves undecided, with the test, its level and the fix."""
        said = (
            f"{self.rate:.3f} (<= {self.stated:.3f})"
            if self.rate is not None
            else (f"<= {self.stated:.3f}")
        )
        return (
            f"{WITHDRAWN_OPENING}: {EVIDENCE.get(self.measured, self.measured)} "
            f"{self.verdict} verdicts on this feature: audits found {self.errors} error(s) in "
            f"{self.audits}, stated error {said}; a sequential test (SPRT, error "
            f"{alternative(self.stated):.3f} against {self.stated:.3f}, alpha {ALPHA:g}) "
            f"rejects it; {FIX}"
        )


def findings(
    audits: Iterable[Audited], measured: Mapping[str, Mapping[str, object]]
) -> list[Finding]:
    """Per stated bound in ``measured`` (``band_error``/``judge_error``, pass and fail), what the
    audits of that very bound found. An audit of an older bound (the calibration since redone)
    tests nothing now: it is a label of the new calibration's evidence instead."""
    audits = list(audits)
    out = []
    for key in EVIDENCE:
        table = measured.get(key) or {}
        for verdict, side in SIDES.items():
            upper, rate = table.get(f"{side}_upper"), table.get(side)
            if not isinstance(upper, int | float):
                continue
            these = [
                a
                for a in audits
                if a.measured == key and a.verdict == verdict and same_bound(a.stated, upper)
            ]
            if these:
                out.append(
                    Finding(
                        key,
                        verdict,
                        float(upper),
                        float(rate) if isinstance(rate, int | float) else None,
                        len(these),
                        sum(a.wrong for a in these),
                    )
                )
    return out


def withdrawals(
    audits: Iterable[Audited], measured: Mapping[str, Mapping[str, object]]
) -> dict[tuple[str, str], str]:
    """(measured key, verdict) -> why, for each stated bound the audits withdraw."""
    return {(f.measured, f.verdict): f.why for f in findings(audits, measured) if f.withdrawn}


def same_bound(a: float, b: float) -> bool:
    """The same stated bound, as written to a review file and read back (4 decimals)."""
    return round(a, 4) == round(b, 4)
