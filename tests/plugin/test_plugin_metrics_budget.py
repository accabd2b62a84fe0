"""Budgets through real pytest runs against the real embedded model (SmolLM2-135M on llama.cpp).

A per-test ``slm_budget`` the model cannot meet fails that test with measured versus budget; one it
can meet passes. A breached ``[tool.slam.budget]`` fails the run through the gate although every
test passed, and the summary says which statistic broke it.
"""

from __future__ import annotations

import pytest

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED

PRODUCT = """
import openai, pytest

pytestmark = pytest.mark.slm

def count():
    return openai.OpenAI().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "Count from 1 to 30, one per line."}],
        max_tokens=20, temperature=0)

@pytest.mark.slm_budget(e2e_ms=1)
def test_too_slow(slm_model):
    count()

@pytest.mark.slm_budget(completion_tokens=1)
def test_too_long(slm_model):
    count()

@pytest.mark.slm_budget(e2e_ms=600_000, ttft_ms=600_000, completion_tokens=20)
def test_within(slm_model):
    count()
"""
MODEL = "SmolLM2-135M-Instruct"


@pytest.mark.engine
def test_per_test_budgets_fail_with_measured_versus_budget(
    pytester: pytest.Pytester, smollm2_endpoint: str
) -> None:
    pytester.makefile(
        ".toml",
        pyproject="[tool.slam]\nreference = 'none'\n\n[tool.slam.budget]\np95_e2e_ms = 600000\n",
    )
    pytester.makepyfile(test_product=PRODUCT)
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}")
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.re_match_lines(
        [
            rf"_+ test_too_slow\[{MODEL}\] _+",
            rf"budget breached: e2e_ms [\d.]+ > budget 1 \(call 1, model {MODEL}\) "
            rf"\(pytest-slam, {MODEL}\)",
            rf"_+ test_too_long\[{MODEL}\] _+",
            rf"budget breached: completion_tokens 20 > budget 1 \(call 1, model {MODEL}\) "
            rf"\(pytest-slam, {MODEL}\)",
        ]
    )
    result.stdout.no_fnmatch_line("FAILED*test_within*")  # the budget it can meet passes
    result.stdout.no_fnmatch_line("*session:*")  # and so does the session budget it meets
    assert result.ret == pytest.ExitCode.TESTS_FAILED


@pytest.mark.engine
def test_a_breached_session_budget_fails_the_run_although_tests_pass(
    pytester: pytest.Pytester, smollm2_endpoint: str
) -> None:
    pytester.makefile(
        ".toml", pyproject="[tool.slam]\nreference = 'none'\n\n[tool.slam.budget]\np95_e2e_ms = 1\n"
    )
    pytester.makepyfile(test_product=PRODUCT)
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "-k", "within")
    result.assert_outcomes(passed=1, deselected=2)
    assert result.ret == EXIT_GATE_FAILED
    result.stdout.re_match_lines(
        [r"gate: FAIL", rf"  session: p95_e2e_ms [\d.]+ > budget 1 \(model {MODEL}\)"]
    )
