"""Compare this run with an earlier JSON report: what regressed and what improved.

Per model and per test, three rules with tolerances from ``[tool.slam.baseline]``: mean
equivalence over every candidate call (a failed, cut-off or runaway call counted 0:
``equivalence_all_calls``) down by more than ``equivalence_drop`` (absolute), E2E p95 up by more than
``latency_increase_pct`` percent and more than ``latency_increase_ms`` (so a few milliseconds of
jitter on a fast model never count), cost per call up by more than ``cost_increase_pct`` percent;
the mirror images are improvements.

A p95 is compared only where both sides measured at least ``latency_min_samples`` calls (20 by
default; per model: its latency samples, per test: its calls). Latency is a distribution: the p95
of one call is that call, and one call at 29 ms then one at 119 ms on a busy machine is noise, not
a regression; below 20 samples a p95 is the slowest call. The rows left out are counted in a note.
Equivalence and cost are compared as measured: at temperature 0 the same prompt gives the same
answer, so a drop is a changed answer, not noise. A test that passed and now fails, errors or is not swapped
(no call reached the candidate) is a regression too.
A baseline that holds other models gives a note and what can be compared; one that cannot be read
says why in ``unreadable``, which the gate's ``no_regression`` turns into a breach (gate.py): a
check that did not happen is never a pass.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_slam.records import JSON, ModelSpec, Record
from pytest_slam.report import fmt
from pytest_slam.report.aggregate import (
    CANDIDATE_FAILED,
    ENGINE,
    NOT_SWAPPED,
    ModelRow,
    PerTestRow,
    RunInfo,
    Verdict,
)
from pytest_slam.report.jsonreport import Report, ReportError, load_report
from pytest_slam.report.section_checks import read_section

SECTION = "tool.slam.baseline"


def _tolerance(default: float, description: str) -> Any:
    return field(default=default, metadata={"description": description})


@dataclass
class Tolerances(Record):
    """How far a metric may move before it counts as a change.

    The one declaration of ``[tool.slam.baseline]`` (``config.BaselineTable`` is built from it).
    """

    equivalence_drop: float = _tolerance(0.02, "drop in mean equivalence")
    latency_increase_pct: float = _tolerance(20.0, "p95 E2E increase, percent")
    # and by at least this much: 1 ms -> 2 ms is noise, not +100%
    latency_increase_ms: float = _tolerance(50.0, "and at least this many ms")
    cost_increase_pct: float = _tolerance(10.0, "cost per call increase, percent")
    # a p95 of fewer calls is its slowest one: one sample against one sample is noise
    latency_min_samples: int = _tolerance(20, "measured calls on both sides before a p95 counts")

    @classmethod
    def from_config(cls, data: Mapping[str, JSON] | None) -> Tolerances:
        """From ``[tool.slam.baseline]``; unknown keys or non-numbers raise ``ConfigError``."""
        return read_section(cls, SECTION, data)


@dataclass
class Change(Record):
    """One metric of one model (``test`` None) or one test that moved beyond tolerance."""

    model: str
    # equivalence_all_calls (equivalence_mean against an older baseline) | e2e_p95_ms |
    # cost_per_call_usd | outcome
    metric: str
    old: float | str | None  # the baseline's value: a number, or an outcome
    new: float | str | None
    kind: str  # "regressed" | "improved"
    test: str | None = None

    def describe(self) -> str:
        where = f"{self.model} {self.test}" if self.test else self.model
        return f"{where}: {self.metric} {_show(self.metric, self.old)} -> " + _show(
            self.metric, self.new
        )


@dataclass
class BaselineDiff(Record):
    """The comparison: changes beyond tolerance, what was compared, and why not more."""

    baseline: str
    tolerances: Tolerances = field(default_factory=Tolerances)
    regressions: list[Change] = field(default_factory=list)
    improvements: list[Change] = field(default_factory=list)
    compared_models: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unreadable: str | None = None  # why the baseline could not be read: nothing was compared
    few_samples: int = 0  # rows whose p95 was not compared: too few calls on a side

    @property
    def regressed(self) -> bool:
        return bool(self.regressions)

    def for_model(self, model: str) -> list[Change]:
        return [c for c in self.regressions if c.model == model]


def diff_baseline(
    verdict: Verdict, path: str | os.PathLike[str], tol: Tolerances | None = None
) -> BaselineDiff:
    """Compare with the report at ``path``; an unreadable baseline becomes a note, not a crash."""
    try:
        old = load_report(path)
    except ReportError as exc:
        diff = BaselineDiff(baseline=str(path), tolerances=tol or Tolerances(), unreadable=str(exc))
        diff.notes.append(f"baseline not compared: {exc}")
        return diff
    return compare(verdict, old, tol)


def compare(verdict: Verdict, old: Report, tol: Tolerances | None = None) -> BaselineDiff:
    """Changes from ``old`` to ``verdict`` for the models both runs share."""
    diff = BaselineDiff(baseline=old.path or "baseline", tolerances=tol or Tolerances())
    before = {r.model: r for r in old.verdict.models}
    now = {r.model: r for r in verdict.models}
    diff.compared_models = [m for m in now if m in before]
    _note_models(diff, sorted(set(now) - set(before)), sorted(set(before) - set(now)))
    _note_specs(diff, old.verdict.run, verdict.run)
    unlike = _unlike_concurrency(diff, old.verdict.run, verdict.run)
    for model in diff.compared_models:
        _check(diff, model, None, before[model], now[model], model in unlike)
    old_tests = {(t.model, t.test): t for t in old.verdict.tests}
    for row in verdict.tests:
        prev = old_tests.get((row.model, row.test))
        if prev is not None and row.model in diff.compared_models and row.outcome != ENGINE:
            _check(diff, row.model, row.test, prev, row, row.model in unlike)
            _check_outcome(diff, prev, row)
    if diff.few_samples:
        diff.notes.append(
            f"E2E p95 not compared for {diff.few_samples} row(s) with fewer than "
            f"{diff.tolerances.latency_min_samples} measured calls on a side (a p95 of so few is "
            "noise); more calls or repeats, or [tool.slam.baseline] latency_min_samples"
        )
    return diff


def _note_models(diff: BaselineDiff, new_only: list[str], old_only: list[str]) -> None:
    if new_only:
        diff.notes.append(f"not in the baseline, not compared: {', '.join(new_only)}")
    if old_only:
        diff.notes.append(f"in the baseline only, not compared: {', '.join(old_only)}")
    if not diff.compared_models:
        diff.notes.append("no model in common with the baseline: nothing compared")


def _note_specs(diff: BaselineDiff, old: RunInfo, new: RunInfo) -> None:
    """Same name, other model or yardstick: still compared, but the reader must know."""
    before = {m.name: m for m in old.models}
    for spec in new.models:
        prev = before.get(spec.name)
        if spec.name in diff.compared_models and prev and _what(prev) != _what(spec):
            diff.notes.append(
                f"{spec.name} was {_what(prev)} in the baseline and is {_what(spec)} now: "
                "compared by name"
            )
    if old.reference and new.reference and old.reference != new.reference:
        diff.notes.append(
            f"the reference changed ({old.reference} -> {new.reference}): equivalence is "
            "measured against other answers"
        )


def _unlike_concurrency(diff: BaselineDiff, old: RunInfo, new: RunInfo) -> set[str]:
    """Models whose calls were sent at another concurrency than in the baseline: their latency
    is not compared (latency at 16 in flight is not latency at 1). A report from before
    concurrency was recorded asked one call at a time."""
    before = {m.name: m.concurrency or 1 for m in old.models}
    unlike = set()
    for spec in new.models:
        was, now = before.get(spec.name), spec.concurrency or 1
        if spec.name in diff.compared_models and was is not None and was != now:
            unlike.add(spec.name)
            diff.notes.append(
                f"{spec.name}: E2E p95 not compared, its calls were sent {now} at a time and "
                f"{was} at a time in the baseline (run both at the same --slm-concurrency)"
            )
    return unlike


def _what(spec: ModelSpec) -> str:
    return f"{spec.provider}:{spec.model_id}"


def _check(
    diff: BaselineDiff,
    model: str,
    test: str | None,
    old: ModelRow | PerTestRow,
    new: ModelRow | PerTestRow,
    unlike: bool = False,
) -> None:
    """Apply the three rules to two rows (ModelRow or PerTestRow); ``unlike``: latency measured
    at another concurrency, not compared."""
    tol = diff.tolerances
    cost = "cost_usd" if isinstance(new, PerTestRow) else "cost_per_call_usd"
    quality = _quality(old, new)
    rules = (
        (quality, _drop(getattr(old, quality), getattr(new, quality)), tol.equivalence_drop),
        ("e2e_p95_ms", _rise_pct(old.e2e_p95_ms, new.e2e_p95_ms), tol.latency_increase_pct),
        (cost, _rise_pct(getattr(old, cost), getattr(new, cost)), tol.cost_increase_pct),
    )
    for metric, worse_by, limit in rules:
        if worse_by is None or (metric == "e2e_p95_ms" and unlike):
            continue
        if metric == "e2e_p95_ms" and _too_few(old, new, tol):
            diff.few_samples += 1
            continue
        if metric == "e2e_p95_ms" and _jitter(old.e2e_p95_ms, new.e2e_p95_ms, tol):
            continue
        kind = "regressed" if worse_by > limit else "improved" if -worse_by > limit else None
        if kind:
            change = Change(model, metric, getattr(old, metric), getattr(new, metric), kind, test)
            (diff.regressions if kind == "regressed" else diff.improvements).append(change)


def _quality(old: ModelRow | PerTestRow, new: ModelRow | PerTestRow) -> str:
    """The equivalence compared: over every call (a failed one counted 0) where both reports
    have it, so near misses that became runaways read as the drop they are; a baseline written
    before that figure existed is compared on the mean over scored pairs."""
    both = old.equivalence_all_calls is not None and new.equivalence_all_calls is not None
    return "equivalence_all_calls" if both else "equivalence_mean"


def _too_few(old: ModelRow | PerTestRow, new: ModelRow | PerTestRow, tol: Tolerances) -> bool:
    """Fewer measured calls on a side than a p95 needs to be more than its slowest call."""
    return min(_samples(old), _samples(new)) < tol.latency_min_samples


def _samples(row: ModelRow | PerTestRow) -> int:
    # a test row counts its candidate calls (the measured ones are at most that many)
    return row.latency_samples if isinstance(row, ModelRow) else row.calls


def _jitter(old: float | None, new: float | None, tol: Tolerances) -> bool:
    """A latency change too small in milliseconds to mean anything, whatever its percentage."""
    return old is not None and new is not None and abs(new - old) < tol.latency_increase_ms


def _drop(old: float | None, new: float | None) -> float | None:
    """How much worse (positive) a higher-is-better metric got."""
    return None if old is None or new is None else old - new


def _rise_pct(old: float | None, new: float | None) -> float | None:
    """How much worse, in percent, a lower-is-better metric got (inf when it rose from 0)."""
    if old is None or new is None:
        return None
    if old <= 0:
        return math.inf if new > 0 else 0.0
    return (new - old) / old * 100.0


def _check_outcome(diff: BaselineDiff, old: PerTestRow, new: PerTestRow) -> None:
    """Passed, then failed, errored or not swapped is a regression: a test that stopped reaching
    the candidate lost the evidence it gave, even though its assertions still pass."""
    bad = ("failed", "error", NOT_SWAPPED, CANDIDATE_FAILED)
    if old.outcome == "passed" and new.outcome in bad:
        diff.regressions.append(
            Change(new.model, "outcome", old.outcome, new.outcome, "regressed", new.test)
        )
    elif old.outcome in bad and new.outcome == "passed":
        diff.improvements.append(
            Change(new.model, "outcome", old.outcome, new.outcome, "improved", new.test)
        )


def _show(metric: str, value: float | str | None) -> str:
    if isinstance(value, str):
        return value  # an outcome
    if metric == "e2e_p95_ms":
        return fmt.ms(value)
    if metric.startswith("cost"):
        return fmt.usd(value)
    if metric.startswith("equivalence"):
        return fmt.score(value)
    return str(value)


def format_diff(diff: BaselineDiff) -> list[str]:
    """Readable lines: notes, then regressions, then improvements, then the tolerances."""
    tol = diff.tolerances
    lines = [f"baseline: {diff.baseline}", *(f"note: {n}" for n in diff.notes)]
    lines.append(f"regressions: {len(diff.regressions)}")
    lines.extend(f"  - {c.describe()}" for c in diff.regressions)
    lines.append(f"improvements: {len(diff.improvements)}")
    lines.extend(f"  + {c.describe()}" for c in diff.improvements)
    lines.append(
        f"tolerances: equivalence drop > {tol.equivalence_drop:g}, E2E p95 up > "
        f"{tol.latency_increase_pct:g}% and > {tol.latency_increase_ms:g} ms, "
        f"cost up > {tol.cost_increase_pct:g}%, p95 compared from "
        f"{tol.latency_min_samples} calls a side"
    )
    return lines
