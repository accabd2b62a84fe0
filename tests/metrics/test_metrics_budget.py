"""Unit tests of metrics.budget: per-call limits from the mark and per-model session limits."""

from __future__ import annotations

import pytest

from pytest_slam.metrics.budget import Budget, SessionBudget, check_calls
from pytest_slam.metrics.latency import flatten_model
from pytest_slam.records import Call


def call(e2e: float, **kw: object) -> dict:
    fields = {"model": "smollm2-135m", "role": "candidate", "ttft_ms": 20.0, "e2e_ms": e2e}
    fields.update(kw)
    return Call(request={}, completion_tokens=5, **fields).as_dict()


def test_breach_reads_like_a_sentence() -> None:
    budget = Budget.from_kwargs(e2e_ms=500)
    calls = [call(120.0), call(812.43), call(500.0)]
    assert check_calls(budget, calls) == ["e2e_ms 812.4 > budget 500 (call 2, model smollm2-135m)"]


def test_a_breach_says_how_many_calls_were_in_flight_when_it_was_measured() -> None:
    """Latency at 8 in flight is not latency alone: the line says which (answers fetched ahead)."""
    budget = Budget.from_kwargs(e2e_ms=500)
    calls = [call(1240.0, in_flight=8), call(900.0, in_flight=1)]
    assert check_calls(budget, calls) == [
        "e2e_ms 1240 > budget 500 (call 1, model smollm2-135m, at 8 in flight)",
        "e2e_ms 900 > budget 500 (call 2, model smollm2-135m)",
    ]


def test_every_limit_applies_per_call() -> None:
    budget = Budget.from_kwargs(ttft_ms=15, cost_usd=0.001, completion_tokens=4, tpot_ms=100)
    breaches = check_calls(budget, [call(300.0, cost_usd=0.0012345)])
    assert breaches == [
        "ttft_ms 20 > budget 15 (call 1, model smollm2-135m)",
        "cost_usd 0.00123 > budget 0.001 (call 1, model smollm2-135m)",
        "completion_tokens 5 > budget 4 (call 1, model smollm2-135m)",
    ]


def test_calls_that_measure_nothing_are_not_held_to_latency_limits() -> None:
    budget = Budget.from_kwargs(e2e_ms=100, cost_usd=0.01)
    calls = [
        call(9000.0, replayed=True),
        call(9000.0, cold_start=True),
        call(9000.0, error="timeout"),
        call(9000.0, role="reference"),
        call(9000.0, cold_start=True, cost_usd=0.5),  # cost still counts on a cold start
    ]
    assert check_calls(budget, calls) == ["cost_usd 0.5 > budget 0.01 (call 5, model smollm2-135m)"]


def test_unmeasured_values_are_not_breaches() -> None:
    assert check_calls(Budget.from_kwargs(ttft_ms=1), [call(10.0, ttft_ms=None)]) == []


def test_unknown_mark_kwarg_names_the_known_ones() -> None:
    with pytest.raises(ValueError) as info:
        Budget.from_kwargs(latency_ms=500)
    assert str(info.value) == (
        "slm_budget: unknown limit 'latency_ms'; known: e2e_ms, ttft_ms, tpot_ms, cost_usd, "
        "completion_tokens"
    )
    with pytest.raises(ValueError, match="slm_budget: e2e_ms must be a number >= 0, got '5'"):
        Budget.from_kwargs(e2e_ms="5")


def test_session_budget_breaches_show_measured_and_limit() -> None:
    budget = SessionBudget.from_config(
        {"p95_e2e_ms": 2000, "mean_cost_ratio": 0.5, "p50_ttft_ms": 300, "p50_tokens_per_s": 20}
    )
    aggregate = {
        "p95_e2e_ms": 2412.04,
        "mean_cost_ratio": 0.031,
        "p50_ttft_ms": 120.0,
        "p50_tokens_per_s": 12.5,
    }
    assert budget.check(aggregate, "smollm2-135m") == [
        "p95_e2e_ms 2412.0 > budget 2000 (model smollm2-135m)",
        "p50_tokens_per_s 12.5 < budget 20 (model smollm2-135m)",  # a floor: more is better
    ]


def test_session_budget_never_passes_on_unmeasured_numbers() -> None:
    budget = SessionBudget.from_config({"mean_cost_ratio": 0.5})
    assert budget.check({}, "m") == ["mean_cost_ratio not measured, budget 0.5 (model m)"]


def test_session_budget_against_real_aggregate() -> None:
    calls = [call(float(ms)) for ms in range(100, 1100, 100)] + [call(9e9, replayed=True)]
    breaches = SessionBudget.from_config({"p95_e2e_ms": 900, "max_e2e_ms": 1000}).check(
        flatten_model(calls), "m"
    )
    assert breaches == ["p95_e2e_ms 955.0 > budget 900 (model m)"]


@pytest.mark.parametrize("key", ["p95_latency", "p97_e2e_ms", "e2e_ms", "avg_e2e_ms"])
def test_unknown_session_key_is_a_clear_error(key: str) -> None:
    with pytest.raises(ValueError, match=rf"\[tool.slam.budget\]: unknown key '{key}'; keys are"):
        SessionBudget.from_config({key: 1})
