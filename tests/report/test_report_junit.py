"""JUnit properties per test outcome."""

from __future__ import annotations

import report_helpers as synth

from pytest_slam.report.junit import junit_properties


def test_properties_of_a_scored_test() -> None:
    qwen_summarize = synth.qwen_outcomes()[1]
    assert junit_properties(qwen_summarize) == [
        ("slam_model", "qwen2.5-1.5b"),
        ("slam_outcome", "passed"),
        ("slam_calls", 2),
        ("slam_equivalence_mean", 0.855),
        ("slam_equivalence_worst", 0.85),
        ("slam_score_embedding", 0.89),
        ("slam_score_judge", 0.82),
        ("slam_ttft_ms", 34.0),
        ("slam_e2e_ms", 390.0),
        ("slam_prompt_tokens", 780),
        ("slam_completion_tokens", 205),
        ("slam_cost_usd", 0.00009),
    ]


def test_properties_of_errored_and_missing_golden_tests() -> None:
    errored = dict(junit_properties(synth.smol_outcomes()[2]))
    assert errored == {"slam_model": "smollm2-135m", "slam_outcome": "error", "slam_calls": 1}
    missing = dict(junit_properties(synth.smol_outcomes()[3]))
    assert missing["slam_missing_golden"] == 1 and missing["slam_tokens_estimated"] is True
    assert "slam_equivalence_mean" not in missing
    assert missing["slam_cost_usd"] == 0.00005  # the passthrough call's $1 is not the model's
