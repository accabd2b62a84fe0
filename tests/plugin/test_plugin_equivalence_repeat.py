"""``--slm-repeat=N`` and ``[tool.slam] pass_fraction``, in real pytest sessions against the real
SmolLM2 engine: a test that fails on every other run by design passes at 0.5 and fails at 1.0.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report

FLAKY = """
import itertools
import pytest

runs = itertools.count()
plain_runs = itertools.count()

@pytest.mark.slm(reference=False)
def test_flaky(slm_model):
    slm_model.chat("Say hi", max_tokens=2)
    assert len(slm_model.calls) == 1  # each run sees only its own calls
    assert next(runs) % 2 == 0, "fails on every other run"

def test_not_swapped_runs_once():
    assert next(plain_runs) == 0
"""


def _outcome(pytester: pytest.Pytester) -> dict:
    report = read_report(pytester.path / "report.json")
    (outcome,) = [o for o in report["outcomes"] if o["test"].endswith("test_flaky")]
    return outcome


@pytest.mark.parametrize(("fraction", "passes"), [(0.5, True), (1.0, False)])
def test_pass_rate_against_pass_fraction(
    pytester: pytest.Pytester, smollm2_endpoint: str, fraction: float, passes: bool
) -> None:
    pytester.makefile(
        ".toml", pyproject=f"[tool.slam]\nreference = 'none'\npass_fraction = {fraction}\n"
    )
    pytester.makepyfile(test_flaky=FLAKY)
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "--slm-repeat=4",
                                "--slm-report=report.json")  # fmt: skip
    outcome = _outcome(pytester)
    assert outcome["repeat"] == {"runs": 4, "passed": 2, "rate": 0.5}
    assert len(outcome["calls"]) == 4  # every run's call is kept
    if passes:
        result.assert_outcomes(passed=2)
        assert outcome["outcome"] == "passed"
        return
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*passed 2 of 4 runs (rate 0.50), below pass_fraction 1.00 (pytest-slam, SmolLM2-135M-Instruct)",
        "*run 2: AssertionError: fails on every other run",
        "*run 4: AssertionError: fails on every other run",
    ])  # fmt: skip
    assert outcome["outcome"] == "failed"
    assert "passed 2 of 4 runs" in outcome["message"]


def test_each_run_is_checked_and_its_pairs_are_kept(pytester: pytest.Pytester, fake_gpt4) -> None:
    """A run whose answer is not equivalent fails that run only; the report keeps both runs' pairs."""
    from pytest_slam.testing import FakeOpenAI

    answers = iter(["GPT-4 says: Name a colour", "Something else entirely, unrelated words"])
    with FakeOpenAI(answer=lambda req: next(answers), model="cand") as candidate:
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\npass_fraction = 0.5\n"
            "equivalence = { by = 'fuzzy', at_least = 0.9 }\n"))  # fmt: skip
        pytester.makepyfile(test_colour="""
            import pytest

            @pytest.mark.slm
            def test_colour(slm_model):
                slm_model.chat("Name a colour")
            """)  # fmt: skip
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-repeat=2",
                                    "--slm-record=new", "--slm-report=report.json")  # fmt: skip
    result.assert_outcomes(passed=1)
    report = read_report(pytester.path / "report.json")
    (outcome,) = report["outcomes"]
    assert outcome["repeat"] == {"runs": 2, "passed": 1, "rate": 0.5}
    assert [p["call_index"] for p in outcome["pairs"]] == [0, 1]
    passed = [p["scores"][0]["passed"] for p in outcome["pairs"]]
    assert passed == [True, False]
    assert len(fake_gpt4.requests) == 1  # the same request: recorded once, replayed after


def test_a_run_whose_failed_calls_the_product_swallowed_is_not_a_pass(
    pytester: pytest.Pytester,
) -> None:
    """A product that falls back when the model errors still "passes" its own assertion; the run
    had no answer from the candidate, so it does not count towards the pass rate."""
    from pytest_slam.testing import FakeOpenAI

    with FakeOpenAI("A real answer.", model="cand", fail=[500]) as candidate:  # run 1's call
        pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
        pytester.makepyfile(test_fallback="""
            import openai, pytest

            @pytest.mark.slm(reference=False)
            def test_fallback(slm_model):
                client = slm_model.client
                try:
                    text = client.chat.completions.create(
                        model="gpt-4", messages=[{"role": "user", "content": "Hi"}]
                    ).choices[0].message.content
                except openai.APIError:
                    text = "a canned fallback"
                assert text
            """)  # fmt: skip
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-repeat=2",
                                    "--slm-report=report.json")  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*passed 1 of 2 runs (rate 0.50), below pass_fraction 1.00*",
        "*run 1: no call of this run was answered by the candidate (1 failed; HTTP 500*",
    ])  # fmt: skip
    (outcome,) = read_report(pytester.path / "report.json")["outcomes"]
    assert outcome["repeat"] == {"runs": 2, "passed": 1, "rate": 0.5}
