"""Model fixtures inside Hypothesis ``@given`` tests, in a real pytest session against the real SmolLM2
engine: no function-scoped-fixture health check failure, no deadline, and every example's calls are
recorded on the test.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report


def test_given_test_that_names_slm_model_runs_every_example(
    pytester: pytest.Pytester, smollm2_endpoint: str
) -> None:
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(test_props="""
        import pytest
        from hypothesis import given, settings, strategies as st

        seen = []

        @pytest.mark.slm(reference=False)
        @settings(max_examples=3, derandomize=True, database=None)
        @given(word=st.sampled_from(["cat", "dog", "sun", "sea"]))
        def test_each_example_calls_the_model(slm_model, word):
            seen.append(word)
            call = slm_model.chat(f"Say {word}", max_tokens=2)
            assert call.ok
            assert len(slm_model.calls) == len(seen)  # one context for the test, every call on it

        @pytest.mark.slm(reference=False)
        @given(n=st.integers(0, 3))
        def test_default_settings_are_adjusted(slm_model, n):
            from hypothesis import HealthCheck
            applied = test_default_settings_are_adjusted._hypothesis_internal_use_settings
            assert applied.deadline is None and applied.max_examples == 10
            assert HealthCheck.function_scoped_fixture in applied.suppress_health_check
        """)  # fmt: skip
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "--slm-report=report.json")
    result.assert_outcomes(passed=2)
    result.stdout.no_fnmatch_line("*FailedHealthCheck*")
    outcomes = read_report(pytester.path / "report.json")["outcomes"]
    calls = {o["test"].split("::")[-1]: len(o["calls"]) for o in outcomes}
    assert calls["test_each_example_calls_the_model"] >= 3
