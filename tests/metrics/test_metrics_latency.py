"""Unit tests of metrics.latency: which calls count as measurements, buckets, flat names."""

from __future__ import annotations

import json

import pytest

from pytest_slam.metrics.latency import (
    LATENCY_METRICS,
    bucket_of,
    flatten,
    flatten_model,
    model_latency,
    model_usage,
)
from pytest_slam.metrics.stats import summarize
from pytest_slam.records import Call


def call(e2e: float, ttft: float = 10.0, tokens: int = 11, **kw: object) -> dict:
    """A Call dict as the swap layer records it (request body is irrelevant here)."""
    return Call(
        model="smollm2-135m",
        role="candidate",
        request={"messages": []},
        prompt_tokens=20,
        completion_tokens=tokens,
        ttft_ms=ttft,
        e2e_ms=e2e,
        **kw,
    ).as_dict()


@pytest.fixture
def calls() -> list[dict]:
    return [
        call(5000.0, ttft=4900.0, cold_start=True),  # engine load time: reported on its own
        call(110.0),
        call(210.0, energy_j=22.0, cost_usd=0.002),
        call(310.0),
        call(999_999.0, replayed=True),  # cached: never a latency measurement
        call(50.0, ttft=None, tokens=None, error="HTTP 500"),
    ]


def test_buckets() -> None:
    assert bucket_of(call(1.0)) == "ok"
    assert bucket_of(call(1.0, cold_start=True)) == "cold_start"
    assert bucket_of(call(1.0, error="boom", cold_start=True)) == "errored"
    assert bucket_of(call(1.0, replayed=True, error="boom")) is None


def test_counts_and_buckets_are_kept_apart(calls: list[dict]) -> None:
    result = model_latency(calls)
    assert result["counts"] == {
        "total": 6,
        "replayed": 1,
        "ok": 3,
        "errored": 1,
        "cold_start": 1,
    }
    assert set(result["ok"]) == set(LATENCY_METRICS)
    assert result["ok"]["e2e_ms"]["max"] == 310.0  # neither replayed nor cold start leaked in
    assert result["ok"]["e2e_ms"]["p50"] == 210.0
    assert result["cold_start"]["e2e_ms"]["mean"] == 5000.0
    assert result["errored"]["e2e_ms"]["count"] == 1
    assert result["errored"]["ttft_ms"]["count"] == 0


def test_derived_metrics_follow_design_definitions(calls: list[dict]) -> None:
    ok = model_latency(calls)["ok"]
    # TPOT = (E2E - TTFT) / (completion_tokens - 1) = (110 - 10) / 10 for the fastest call.
    assert ok["tpot_ms"]["min"] == pytest.approx(10.0)
    # tokens/s = completion_tokens / E2E = 11 / 0.31 s for the slowest call.
    assert ok["tokens_per_s"]["min"] == pytest.approx(11 / 0.31)


def test_usage_keeps_replayed_calls_but_not_errors(calls: list[dict]) -> None:
    usage = model_usage(calls)
    assert usage["completion_tokens"]["count"] == 5
    assert usage["energy_j"]["count"] == 1
    assert usage["energy_j_per_token"]["mean"] == pytest.approx(2.0)
    assert usage["cost_usd"]["max"] == 0.002


def test_flatten_names_are_vllm_style() -> None:
    flat = flatten({"ttft_ms": summarize([10, 20, 30]), "e2e_ms": summarize([100]).as_dict()})
    assert flat["mean_ttft_ms"] == 20.0
    assert flat["p99_ttft_ms"] == pytest.approx(29.8)
    assert flat["count_e2e_ms"] == 1
    assert flatten({"e2e_ms": summarize([1])}, "cold_start_")["cold_start_max_e2e_ms"] == 1.0


def test_flatten_model_is_one_json_able_dict(calls: list[dict]) -> None:
    flat = json.loads(json.dumps(flatten_model(calls)))
    assert flat["max_e2e_ms"] == 310.0
    assert flat["cold_start_mean_e2e_ms"] == 5000.0
    assert flat["errored_count_e2e_ms"] == 1
    assert flat["mean_energy_j"] == 22.0
    assert flat["replayed_calls"] == 1 and flat["total_calls"] == 6


def test_no_calls_gives_empty_summaries() -> None:
    result = model_latency([])
    assert result["counts"]["total"] == 0
    assert result["ok"]["e2e_ms"]["count"] == 0
    assert result["ok"]["e2e_ms"]["p99"] is None
