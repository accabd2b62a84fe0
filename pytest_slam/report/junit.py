"""Per-test properties for the JUnit XML, so CI test views show model, scores, latency and cost.

The plugin adds them with ``item.user_properties`` (what ``record_property`` fills); names carry
the ``slam_`` prefix and the unit, values are plain numbers or strings.

``slam_outcome`` is the slam outcome, which can differ from the testcase's own: a test whose
assertions passed with no call the candidate answered stays a passing testcase (the product's
assertions decided that) but says ``slam_outcome = not_swapped`` with the reason in
``slam_not_swapped``; the run's gate fails on it (report/gate.py).
"""

from __future__ import annotations

from typing import Any

from pytest_slam.report.aggregate import (
    NOT_SWAPPED,
    candidate_calls,
    latency_calls,
    pair_equivalence,
)


def junit_properties(outcome: dict[str, Any]) -> list[tuple[str, Any]]:
    """``[(name, value), ...]`` for one ``Outcome.as_dict()``; unmeasured values are left out."""
    props: list[tuple[str, Any]] = [("slam_model", outcome["model"])]
    props.append(("slam_outcome", outcome.get("outcome", "passed")))
    if outcome.get("outcome") == NOT_SWAPPED:
        props.append(("slam_not_swapped", outcome.get("message") or ""))
    calls = candidate_calls(outcome)
    props.append(("slam_calls", len(calls)))
    props.extend(_scores(outcome.get("pairs") or []))
    props.extend(_latency(latency_calls(calls)))
    props.extend(_usage(calls))
    if outcome.get("energy_j") is not None:
        props.append(("slam_energy_j", round(outcome["energy_j"], 3)))
    props.extend(("slam_budget_breach", b) for b in outcome.get("budget_breaches") or [])
    props.extend(("slam_egress", where) for where in dict.fromkeys(outcome.get("egress") or []))
    return props


def _scores(pairs: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    values = [v for v in map(pair_equivalence, pairs) if v is not None]
    if values:
        out.append(("slam_equivalence_mean", round(sum(values) / len(values), 4)))
        out.append(("slam_equivalence_worst", round(min(values), 4)))
    by_scorer: dict[str, list[float]] = {}
    for pair in pairs:
        for score in [] if pair.get("missing") else pair.get("scores") or []:
            by_scorer.setdefault(score["scorer"], []).append(score["value"])
    out.extend((f"slam_score_{k}", round(sum(v) / len(v), 4)) for k, v in sorted(by_scorer.items()))
    missing = sum(1 for p in pairs if p.get("missing"))
    if missing:
        out.append(("slam_missing_golden", missing))
    return out


def _latency(calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """Per call mean TTFT and E2E over the measured calls (one call: its own numbers)."""
    out = []
    for name in ("ttft_ms", "e2e_ms"):
        values = [c[name] for c in calls if c.get(name) is not None]
        if values:
            out.append((f"slam_{name}", round(sum(values) / len(values), 1)))
    return out


def _usage(calls: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name in ("prompt_tokens", "completion_tokens"):
        values = [c[name] for c in calls if c.get(name) is not None]
        if values:
            out.append((f"slam_{name}", sum(values)))
    if any(c.get("tokens_estimated") for c in calls):
        out.append(("slam_tokens_estimated", True))
    costs = [c["cost_usd"] for c in calls if c.get("cost_usd") is not None]
    if costs:
        out.append(("slam_cost_usd", round(sum(costs), 8)))
    return out
