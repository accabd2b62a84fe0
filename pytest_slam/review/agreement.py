"""What the human verdicts say: win/tie/loss per model, and how far the automatic verdicts agree.

Shares carry Wilson 95% intervals (good at small n and at 0% or 100%, where reviews start).
Agreement is Cohen's kappa between each scorer's pass/fail (and the judge's) and the human label
"not worse than the reference" (win or tie; a loss or "both bad" is a fail), with a bootstrap
interval resampled by request: the same figures ``slam calibrate`` learns thresholds from
(``pytest_slam.compare.validity``). Each reviewer's verdict counts once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pytest_slam.compare.validity import Estimate, cohen_kappa, grouped_bootstrap
from pytest_slam.review.pairs import ReviewPair, scorer_passes
from pytest_slam.review.verdicts import VERDICTS, HumanVerdict

Z95 = 1.959964
LABELS = {"win": "win", "tie": "tie", "loss": "loss", "both_bad": "both bad"}


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of the share k/n."""
    if n == 0:
        return math.nan, math.nan
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def passed_by_human(verdict: str) -> int:
    return 1 if verdict in ("win", "tie") else 0


@dataclass
class ModelReview:
    """One model's human verdicts against the reference."""

    model: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(VERDICTS, 0))

    @property
    def n(self) -> int:
        return sum(self.counts.values())

    @property
    def not_worse(self) -> int:
        return self.counts["win"] + self.counts["tie"]

    def share(self, k: int) -> str:
        low, high = wilson(k, self.n)
        return f"{k / self.n:.0%} [{low:.0%}-{high:.0%}]" if self.n else "-"


@dataclass
class Agreement:
    """Kappa of one automatic verdict with the human verdicts on the pairs both judged."""

    scorer: str
    n: int
    kappa: Estimate


def by_model(verdicts: list[HumanVerdict]) -> list[ModelReview]:
    rows: dict[str, ModelReview] = {}
    for v in verdicts:
        rows.setdefault(v.model, ModelReview(v.model)).counts[v.verdict] += 1
    return [rows[m] for m in sorted(rows)]


def agreement(pairs: list[ReviewPair], verdicts: list[HumanVerdict]) -> list[Agreement]:
    """Per scorer: kappa with the human label over the reviewed pairs that scorer judged."""
    index = {(p.key, p.model, p.answer_hash): p for p in pairs}
    rows: dict[str, tuple[list[int], list[int], list[str]]] = {}
    for v in verdicts:
        pair = index.get((v.key, v.model, v.answer_hash))
        for scorer, passed in (scorer_passes(pair) if pair else {}).items():
            auto, human, groups = rows.setdefault(scorer, ([], [], []))
            auto.append(int(passed))
            human.append(passed_by_human(v.verdict))
            groups.append(v.key)
    out = []
    for scorer, (auto, human, groups) in sorted(rows.items()):

        def kappa(ix: list[int], a: list[int] = auto, h: list[int] = human) -> float:
            return cohen_kappa([a[i] for i in ix], [h[i] for i in ix])

        out.append(Agreement(scorer, len(auto), grouped_bootstrap(groups, kappa, resamples=500)))
    return out


def labels(pairs: list[ReviewPair], verdicts: list[HumanVerdict]) -> list[dict[str, object]]:
    """The verdicts whose answers are in the report, as ``slam calibrate --labels`` rows."""
    index = {(p.key, p.model, p.answer_hash): p for p in pairs}
    rows: list[dict[str, object]] = []
    for v in verdicts:
        pair = index.get((v.key, v.model, v.answer_hash))
        if pair is not None:
            rows.append(
                {
                    "candidate": pair.candidate,
                    "reference": pair.reference,
                    "label": passed_by_human(v.verdict),
                    "unit": v.key,
                    "module": pair.module,  # the feature: its bands are calibrated on its own
                }
            )
    return rows


def stats_lines(pairs: list[ReviewPair], verdicts: list[HumanVerdict]) -> list[str]:
    """The ``slam review --stats`` text."""
    reviewers = len({v.reviewer for v in verdicts})
    lines = [
        f"human review: {len(verdicts)} verdict(s) by {reviewers} reviewer(s), "
        "candidate against the reference, shares with 95% Wilson intervals"
    ]
    rows = [["model", "n", *LABELS.values(), "not worse"]]
    for row in by_model(verdicts):
        shares = [row.share(row.counts[v]) for v in VERDICTS]
        rows.append([row.model, str(row.n), *shares, row.share(row.not_worse)])
    lines.extend(_table(rows))
    agree = agreement(pairs, verdicts)
    if agree:
        lines.append(
            "agreement with the human verdicts (Cohen's kappa, 95% bootstrap interval "
            "by request; human pass = win or tie):"
        )
        lines.extend(f"  {a.scorer}: kappa {a.kappa} over {a.n} pair(s)" for a in agree)
    else:
        lines.append(
            "agreement: no reviewed pair has a scorer verdict in this report "
            "(give the scorer an at_least threshold, or configure a judge)"
        )
    return lines


def summary_line(verdicts: list[HumanVerdict], models: list[str]) -> str | None:
    """One line for the run's terminal summary, for the run's models; None when none reviewed."""
    rows = [r for r in by_model(verdicts) if r.model in models]
    if not rows:
        return None
    parts = [
        f"{r.model} not worse than the reference in {r.not_worse}/{r.n} ({r.share(r.not_worse)})"
        for r in rows
    ]
    return "human review: " + "; ".join(parts) + "; details: slam review --stats"


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
