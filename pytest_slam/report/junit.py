"""Per-test properties for the JUnit XML, so CI test views show model, scores, latency and cost.

The plugin adds them with ``item.user_properties`` (what ``record_property`` fills); names carry
the ``slam_`` prefix and the unit, values are plain numbers or strings.

``slam_outcome`` is the slam outcome, which can differ from the testcase's own: a test whose
assertions passed with no call the candidate answered stays a passing testcase (the product's
assertions decided that) but says ``slam_outcome = not_swapped`` with the reason in
``slam_not_swapped``; one whose assertions passed although a candidate call failed says
``slam_outcome = candidate_failed`` with the failed calls in ``slam_candidate_failed``. The run's
gate fails on both (report/gate.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from pytest_slam.records import JSON, Call, Outcome, Pair, records
from pytest_slam.report.aggregate import CANDIDATE_FAILED, NOT_SWAPPED, latency_calls

Property = tuple[str, str | int | float | bool]  # (name, value) as record_property takes it


def junit_properties(outcome: Outcome | Mapping[str, JSON]) -> list[Property]:
    """``[(name, value), ...]`` for one Outcome (or its dict); unmeasured values are left out."""
    (record,) = records(Outcome, [outcome])
    props: list[Property] = [("slam_model", record.model)]
    props.append(("slam_outcome", record.outcome))
    if record.outcome == NOT_SWAPPED:
        props.append(("slam_not_swapped", record.message or ""))
    elif record.outcome == CANDIDATE_FAILED:
        props.append(("slam_candidate_failed", record.message or ""))
    calls = record.candidate_calls()
    props.append(("slam_calls", len(calls)))
    props.extend(_scores(record.pairs))
    props.extend(_latency(latency_calls(calls)))
    props.extend(_usage(calls))
    if record.energy_j is not None:
        props.append(("slam_energy_j", round(record.energy_j, 3)))
    props.extend(("slam_budget_breach", b) for b in record.budget_breaches)
    props.extend(("slam_egress", where) for where in dict.fromkeys(record.egress))
    return props


def _scores(pairs: list[Pair]) -> list[Property]:
    out: list[Property] = []
    values = [v for v in (p.equivalence for p in pairs) if v is not None]
    if values:
        out.append(("slam_equivalence_mean", round(sum(values) / len(values), 4)))
        out.append(("slam_equivalence_worst", round(min(values), 4)))
    by_scorer: dict[str, list[float]] = {}
    for pair in pairs:
        for score in [] if pair.missing else pair.scores:
            by_scorer.setdefault(score.scorer, []).append(score.value)
    out.extend((f"slam_score_{k}", round(sum(v) / len(v), 4)) for k, v in sorted(by_scorer.items()))
    missing = sum(1 for p in pairs if p.missing)
    if missing:
        out.append(("slam_missing_golden", missing))
    return out


def _latency(calls: list[Call]) -> list[Property]:
    """Per call mean TTFT and E2E over the measured calls (one call: its own numbers)."""
    out: list[Property] = []
    for values, name in (
        ([c.ttft_ms for c in calls], "ttft_ms"),
        ([c.e2e_ms for c in calls], "e2e_ms"),
    ):
        measured = [v for v in values if v is not None]
        if measured:
            out.append((f"slam_{name}", round(sum(measured) / len(measured), 1)))
    return out


def _usage(calls: list[Call]) -> list[Property]:
    out: list[Property] = []
    for values, name in (
        ([c.prompt_tokens for c in calls], "prompt_tokens"),
        ([c.completion_tokens for c in calls], "completion_tokens"),
    ):
        counted = [v for v in values if v is not None]
        if counted:
            out.append((f"slam_{name}", sum(counted)))
    if any(c.tokens_estimated for c in calls):
        out.append(("slam_tokens_estimated", True))
    costs = [c.cost_usd for c in calls if c.cost_usd is not None]
    if costs:
        out.append(("slam_cost_usd", round(sum(costs), 8)))
    return out
