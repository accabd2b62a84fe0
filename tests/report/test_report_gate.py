"""The CI gate: configuration, per-model breaches with measured value and limit, labels."""

from __future__ import annotations

import copy
import json

import pytest
import report_helpers as synth
from slam_helpers import PRODUCT, said, write_pyproject

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.baseline import diff_baseline
from pytest_slam.report.gate import Gate, apply_gate, check_tables, evaluate
from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.section_checks import ConfigError
from pytest_slam.testing import FakeOpenAI


@pytest.fixture(scope="module")
def verdict():
    return aggregate(synth.outcomes(), synth.run_info())


def test_breaches_carry_measured_value_and_limit(verdict) -> None:
    gate = Gate(min_pass_rate=0.9, min_mean_equivalence=0.85, max_p95_e2e_ms=1000)
    result = evaluate(gate, verdict)
    assert not result.passed and result.configured
    smol, qwen, mini = result.models
    assert [b.rule for b in smol.breaches] == ["min_pass_rate", "min_mean_equivalence"]
    assert (smol.breaches[0].measured, smol.breaches[0].limit) == (0.25, 0.9)
    assert qwen.passed and qwen.breaches == []
    (slow,) = mini.breaches
    assert (slow.rule, slow.measured, slow.limit) == ("max_p95_e2e_ms", 2395.0, 1000)
    # the mean over every call: smollm2's failed calls count 0 (0.660 over its scored pairs)
    assert verdict.row("smollm2-135m").equivalence_mean == pytest.approx(0.66)
    assert result.lines() == [
        "pytest-slam gate FAILED",
        "  smollm2-135m: min_pass_rate: 25.0% is below the minimum 90.0%",
        "  smollm2-135m: min_mean_equivalence: 0.495 is below the minimum 0.850",
        "  gpt-4o-mini: max_p95_e2e_ms: 2395 ms is above the maximum 1000 ms",
    ]


def test_passing_gate_and_labels() -> None:
    verdict = aggregate(synth.outcomes(), synth.run_info())
    result = evaluate(Gate(max_cost_ratio=0.01, min_pass_rate=0.2), verdict)
    assert result.passed
    gated = apply_gate(verdict, result)
    assert [r.gate for r in gated.rows] == ["PASS", "PASS", "PASS", "-"]
    assert gated is verdict and gated.gate is result  # in place: renderers share it


def test_no_gate_configured_labels_dash_and_passes_nothing() -> None:
    verdict = aggregate(synth.outcomes(), synth.run_info())
    result = evaluate(Gate(), verdict)
    assert (result.passed, result.configured, result.status) == (None, False, "not_configured")
    assert [m.passed for m in result.models] == [None, None, None]
    assert result.tests_failed == sum(r.tests_failed + r.tests_errored for r in verdict.models) > 0
    assert result.lines() == ["pytest-slam gate not configured"]
    assert [r.gate for r in apply_gate(verdict, result).rows] == ["-", "-", "-", "-"]


NO_GATE_TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_refund():
    assert "refund" in product.ask("How do I get a refund?")

def test_password():
    assert "never" in product.ask("How do I reset my password?")
"""


def test_a_run_with_failed_tests_and_no_gate_says_not_configured_not_passed(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=NO_GATE_TESTS)
    with FakeOpenAI(lambda req: "About: " + req["messages"][-1]["content"]) as mini:
        write_pyproject(pytester, mini.base_url)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    gate = json.loads((pytester.path / "r.json").read_text())["gate"]
    assert gate == {
        "passed": None, "configured": False, "status": "not_configured", "incomplete": None,
        "tests_failed": 1, "models": [{"model": "mini", "passed": None, "breaches": []}],
        "session_breaches": [], "notes": [],
    }  # fmt: skip
    summary = said(result)  # the terminal agrees: no gate verdict, the model's gate cell is "-"
    assert "gate: FAIL" not in summary and "PASS" not in summary
    assert result.stdout.lines[-1] == (  # and its last line says so
        "pytest-slam gate: not configured (no [tool.slam.gate] rule; 1 test(s) failed)"
    )
    result.stdout.re_match_lines([r"mini +- +1/2 "])


def test_unmeasured_metric_is_a_breach_not_a_pass() -> None:
    outcomes = copy.deepcopy(synth.qwen_outcomes())
    for o in outcomes:
        for p in o["pairs"]:
            p["reference_cost_usd"] = None
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    (entry,) = evaluate(Gate(max_cost_ratio=0.1), verdict).models
    message = entry.breaches[0].message
    assert message.startswith("max_cost_ratio: not measured (limit 0.10x); a cost ratio needs ")
    # what the rule needs, named for this model (issue 52: a bare "not measured" said no fix)
    model = entry.model
    assert f"hourly_usd (its machine's USD per hour) in [tool.slam.models.{model}]" in message
    assert message.endswith("or leave max_cost_ratio out of the gate")


def test_session_budget_breaches_fail_the_gate(verdict) -> None:
    result = evaluate(Gate(), verdict, None, ["session cost $3.10 above budget $2.00"])
    assert not result.passed and result.configured
    assert "  session budget: session cost $3.10 above budget $2.00" in result.lines()


def test_no_regression_uses_the_baseline_diff(tmp_path, verdict) -> None:
    old = synth.outcomes()
    path = write_json(tmp_path / "b.json", verdict, old)
    worse = copy.deepcopy(old)
    for o in worse:
        if o["model"] == synth.QWEN:
            for p in o["pairs"]:
                for s in p["scores"]:
                    s["value"] -= 0.1
    now = aggregate(worse, synth.run_info())
    result = evaluate(Gate(no_regression=True), now, diff_baseline(now, path))
    assert [m.passed for m in result.models] == [True, False, True]
    (breach,) = result.models[1].breaches
    assert breach.rule == "no_regression" and breach.measured == 5  # the model and its 4 tests
    assert breach.message.startswith("no_regression: 5 regression(s) vs baseline (qwen2.5-1.5b:")


def test_no_regression_without_baseline_is_noted(verdict) -> None:
    result = evaluate(Gate(no_regression=True), verdict, None)
    assert result.passed
    assert result.notes == [
        "no_regression is on but no baseline was given (--slm-baseline): not checked"
    ]


def test_gate_lines_list_breaches(verdict) -> None:
    result = evaluate(Gate(min_mean_equivalence=0.9), verdict)
    assert any("qwen2.5-1.5b: min_mean_equivalence: 0.874" in line for line in result.lines())


def test_config_errors_name_the_keys() -> None:
    gate = Gate.from_config({"min_pass_rate": 0.95, "max_p95_e2e_ms": 1500, "no_regression": True})
    assert (gate.min_pass_rate, gate.max_p95_e2e_ms, gate.no_regression) == (0.95, 1500, True)
    with pytest.raises(ConfigError) as info:
        Gate.from_config({"max_latency": 3})
    assert str(info.value) == (
        "[tool.slam.gate] has unknown key(s) max_latency; known keys: allow_not_swapped, "
        "allow_undecided, max_cost_ratio, max_p95_e2e_ms, max_unmeasured, min_equivalence_lower, "
        "min_mean_equivalence, min_pass_rate, min_pass_rate_lower, min_pass_rate_verdict_lower, "
        "no_regression"
    )
    with pytest.raises(ConfigError, match=r"min_pass_rate = 95 must be a fraction in 0\.\.1"):
        Gate.from_config({"min_pass_rate": 95})
    with pytest.raises(ConfigError, match="no_regression = 'yes' must be a bool"):
        Gate.from_config({"no_regression": "yes"})


def test_check_tables_covers_gate_and_baseline_sections() -> None:
    check_tables({"min_pass_rate": 0.5}, {"latency_increase_ms": 100})
    with pytest.raises(ConfigError, match=r"\[tool\.slam\.gate\] min_pass_rate = 50 must be"):
        check_tables({"min_pass_rate": 50}, None)
    with pytest.raises(ConfigError, match=r"\[tool\.slam\.baseline\] has unknown key\(s\) latency"):
        check_tables(None, {"latency": 100})


def _unswapped_verdict():
    outcomes = copy.deepcopy(synth.qwen_outcomes())
    outcomes[0].update(outcome="not_swapped", calls=[], pairs=[])
    return aggregate(outcomes, synth.run_info((synth.QWEN,)))


def test_not_swapped_fails_the_gate_by_default_even_without_rules() -> None:
    result = evaluate(Gate(), _unswapped_verdict())
    assert not result.passed and result.configured
    (breach,) = result.models[0].breaches
    assert (breach.rule, breach.measured, breach.limit) == ("not_swapped", 1, 0)
    assert "allow_not_swapped = true" in breach.message


def test_allow_not_swapped_turns_the_rule_off() -> None:
    gate = Gate.from_config({"allow_not_swapped": True})
    result = evaluate(gate, _unswapped_verdict())
    assert (result.passed, result.configured, result.status) == (None, False, "not_configured")
    with pytest.raises(ConfigError, match="allow_not_swapped"):
        Gate.from_config({"allow_not_swapped": "yes"})


def test_a_test_whose_candidate_failed_a_call_fails_the_gate_with_no_switch() -> None:
    """It passed its assertions (the product caught the timeout): a failed test all the same, and
    a breach that ``allow_not_swapped`` does not turn off, named with the error kind."""
    outcomes = copy.deepcopy(synth.qwen_outcomes())
    failed = synth.call(synth.QWEN, "", None, 500.0, None, None, None, key="k_triage",
                        error="the caller gave up", error_kind="timeout")  # fmt: skip
    outcomes[0].update(outcome="candidate_failed", calls=[failed, *outcomes[0]["calls"]])
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    (row,) = verdict.models
    assert (row.tests_passed, row.tests_failed, row.pass_rate) == (3, 1, 0.75)
    assert (row.tests_candidate_failed, row.candidate_failures) == (1, {"timeout": 1})
    result = evaluate(Gate.from_config({"allow_not_swapped": True}), verdict)
    assert not result.passed and result.configured
    (breach,) = result.models[0].breaches
    assert (breach.rule, breach.measured) == ("candidate_failed", 1)
    assert breach.message.startswith("candidate_failed: timeout: 1 of 4 tests (1 test(s) passed")
