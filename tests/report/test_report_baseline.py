"""Baseline comparison: regressions and improvements per model and per test, tolerances."""

from __future__ import annotations

import copy
import json

import pytest
import report_helpers as synth

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.baseline import Tolerances, compare, diff_baseline, format_diff
from pytest_slam.report.jsonreport import load_report, write_json
from pytest_slam.report.section_checks import ConfigError

REPLY = "tests/test_support.py::test_reply"
SUMMARIZE = "tests/test_support.py::test_summarize"
# the synthetic runs measure one or two calls per test: the latency rule, once it may compare them
FEW = Tolerances(latency_min_samples=1)


@pytest.fixture()
def baseline_path(tmp_path):
    outcomes = synth.outcomes()
    return write_json(tmp_path / "baseline.json", aggregate(outcomes, synth.run_info()), outcomes)


def changed_run():
    """qwen: reply's equivalence drops and summarize gets 50% slower; gpt-4o-mini halves its
    cost; smollm2's summarize now passes."""
    outcomes = copy.deepcopy(synth.outcomes())
    for o in outcomes:
        if o["model"] == synth.QWEN and o["test"] == REPLY:
            for s in o["pairs"][0]["scores"]:
                s["value"] -= 0.25
        if o["model"] == synth.QWEN and o["test"] == SUMMARIZE:
            for c in o["calls"]:
                c["e2e_ms"] *= 1.5
        if o["model"] == synth.MINI:
            for c in o["calls"]:
                c["cost_usd"] = c["cost_usd"] / 2 if c["cost_usd"] is not None else None
        if o["model"] == synth.SMOL and o["test"] == SUMMARIZE:
            o["outcome"], o["message"] = "passed", None
    return aggregate(outcomes, synth.run_info())


def _found(changes, model, metric, test=None):
    return [c for c in changes if (c.model, c.metric, c.test) == (model, metric, test)]


def test_regressions_and_improvements_per_model_and_test(baseline_path) -> None:
    diff = diff_baseline(changed_run(), baseline_path, FEW)
    assert diff.regressed and diff.notes == []
    assert diff.compared_models == [synth.SMOL, synth.QWEN, synth.MINI]
    (eq,) = _found(diff.regressions, synth.QWEN, "equivalence_all_calls")
    assert (eq.old, eq.new) == (pytest.approx(0.874), pytest.approx(0.824))
    (eq_test,) = _found(diff.regressions, synth.QWEN, "equivalence_all_calls", REPLY)
    assert (eq_test.old, eq_test.new) == (pytest.approx(0.75), pytest.approx(0.5))
    # summarize: p95 of (400, 380) x1.5 = +50% > 20%
    assert _found(diff.regressions, synth.QWEN, "e2e_p95_ms", SUMMARIZE)
    assert _found(diff.improvements, synth.MINI, "cost_per_call_usd")
    assert _found(diff.improvements, synth.MINI, "cost_usd", REPLY)
    assert _found(diff.improvements, synth.SMOL, "outcome", SUMMARIZE)
    assert not [c for c in diff.regressions if c.model != synth.QWEN]


def test_same_run_has_no_changes(baseline_path) -> None:
    diff = diff_baseline(aggregate(synth.outcomes(), synth.run_info()), baseline_path)
    assert diff.regressions == [] and diff.improvements == []


def test_tolerances_decide_what_counts(baseline_path) -> None:
    loose = Tolerances(equivalence_drop=0.3, latency_increase_pct=60, cost_increase_pct=10)
    diff = compare(changed_run(), load_report(baseline_path), loose)
    assert [c.metric for c in diff.regressions] == []


def test_passed_then_failed_is_a_regression(baseline_path) -> None:
    outcomes = copy.deepcopy(synth.outcomes())
    outcomes[4]["outcome"] = "failed"  # qwen test_triage
    diff = diff_baseline(aggregate(outcomes, synth.run_info()), baseline_path)
    (flip,) = _found(diff.regressions, synth.QWEN, "outcome", "tests/test_support.py::test_triage")
    assert flip.describe() == (
        "qwen2.5-1.5b tests/test_support.py::test_triage: outcome passed -> failed"
    )


def test_format_diff_lines(baseline_path) -> None:
    lines = format_diff(diff_baseline(changed_run(), baseline_path, FEW))
    assert lines[0] == f"baseline: {baseline_path}"
    assert "  - qwen2.5-1.5b: equivalence_all_calls 0.87 -> 0.82" in lines
    assert f"  - qwen2.5-1.5b {SUMMARIZE}: e2e_p95_ms 399 ms -> 598 ms" in lines
    assert lines[-1] == (
        "tolerances: equivalence drop > 0.02, E2E p95 up > 20% and > 50 ms, cost up > 10%, "
        "p95 compared from 1 calls a side"
    )


def test_latency_must_also_rise_by_enough_milliseconds(baseline_path) -> None:
    # the changed run's E2E p95 rises by 199 ms (+50%): a regression at the default 50 ms floor
    jitter = Tolerances(latency_increase_ms=250, latency_min_samples=1)
    diff = compare(changed_run(), load_report(baseline_path), jitter)
    assert not [c for c in diff.regressions if c.metric == "e2e_p95_ms"]
    assert _found(diff.regressions, synth.QWEN, "equivalence_all_calls")


def test_a_p95_of_too_few_calls_is_not_compared(baseline_path) -> None:
    # summarize's p95 rose 50% (2 calls a side), the model's too (6 calls): by default (20 a side)
    # neither is a p95 yet, so neither is a regression; the changed answers still are
    diff = diff_baseline(changed_run(), baseline_path)
    assert not [c for c in diff.regressions + diff.improvements if c.metric == "e2e_p95_ms"]
    assert _found(diff.regressions, synth.QWEN, "equivalence_all_calls", REPLY)
    (note,) = diff.notes
    assert note.startswith("E2E p95 not compared for 12 row(s) with fewer than 20 measured calls")
    enough = Tolerances(latency_min_samples=2)  # summarize's 2 calls a side are enough now
    assert _found(compare(changed_run(), load_report(baseline_path), enough).regressions,
                  synth.QWEN, "e2e_p95_ms", SUMMARIZE)  # fmt: skip


def test_missing_baseline_is_a_note_not_a_crash(tmp_path) -> None:
    diff = diff_baseline(changed_run(), tmp_path / "none.json")
    assert not diff.regressed and diff.compared_models == []
    assert diff.notes[0].startswith("baseline not compared: pytest-slam report not found")
    assert diff.unreadable and diff.unreadable.startswith("pytest-slam report not found")


def test_older_schema_baseline_is_a_note(baseline_path) -> None:
    data = json.loads(baseline_path.read_text())
    data["schema"] = "pytest-slam/report/0"
    baseline_path.write_text(json.dumps(data))
    (note,) = diff_baseline(changed_run(), baseline_path).notes
    assert "older schema pytest-slam/report/0" in note and "Re-run the tests" in note


def test_other_models_compare_what_is_shared(tmp_path) -> None:
    old = synth.qwen_outcomes() + synth.mini_outcomes()
    path = write_json(tmp_path / "b.json", aggregate(old, synth.run_info((synth.QWEN, synth.MINI))),
                      old)  # fmt: skip
    diff = diff_baseline(changed_run(), path, FEW)
    assert diff.compared_models == [synth.QWEN, synth.MINI]
    assert diff.notes == [f"not in the baseline, not compared: {synth.SMOL}"]
    assert _found(diff.regressions, synth.QWEN, "equivalence_all_calls")


def test_tolerances_from_config() -> None:
    tol = Tolerances.from_config({"equivalence_drop": 0.05, "latency_increase_pct": 50})
    assert (tol.equivalence_drop, tol.latency_increase_pct, tol.cost_increase_pct) == (0.05, 50, 10)
    with pytest.raises(ConfigError, match=r"unknown key\(s\) latency_pct; known keys: cost_inc"):
        Tolerances.from_config({"latency_pct": 5})
    with pytest.raises(ConfigError, match="cost_increase_pct = '10%' must be a float"):
        Tolerances.from_config({"cost_increase_pct": "10%"})


def test_passed_then_not_swapped_is_a_regression_and_back_an_improvement(baseline_path) -> None:
    """A test whose calls stopped reaching the candidate no longer says anything for it."""
    outcomes = copy.deepcopy(synth.outcomes())
    triage = outcomes[4]  # qwen test_triage, passed in the baseline
    triage.update(outcome="not_swapped", calls=[], pairs=[], message="not swapped")
    path = write_json(baseline_path.with_name("unswapped.json"),
                      aggregate(outcomes, synth.run_info()), outcomes)  # fmt: skip
    diff = diff_baseline(aggregate(outcomes, synth.run_info()), baseline_path)
    (flip,) = _found(diff.regressions, synth.QWEN, "outcome", triage["test"])
    assert flip.describe() == f"{synth.QWEN} {triage['test']}: outcome passed -> not_swapped"
    back = diff_baseline(aggregate(synth.outcomes(), synth.run_info()), path)
    (fixed,) = _found(back.improvements, synth.QWEN, "outcome", triage["test"])
    assert (fixed.old, fixed.new) == ("not_swapped", "passed")
