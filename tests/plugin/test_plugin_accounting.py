"""No silent pass: a test the candidate answered no call of is "not swapped", never a pass for it.

Real pytest runs (pytester) of a product whose client is built at import time; the candidate is a
FakeOpenAI server on loopback. The mock below is the product's own monkeypatch of the SDK's
``create``, as a product conftest does it: the inner test passes, the candidate never answers.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest
from html_helpers import report_data
from report_helpers import read_report
from slam_helpers import PRODUCT, said, write_pyproject

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

TESTS = """
import types, pytest, product

pytestmark = pytest.mark.slm

def test_swapped():
    assert product.ask("How do I reset my password?")

def test_mocked(monkeypatch):
    answer = types.SimpleNamespace(message=types.SimpleNamespace(content="mocked"))
    monkeypatch.setattr(product.client.chat.completions, "create",
                        lambda **kw: types.SimpleNamespace(choices=[answer]))
    assert product.ask("How do I reset my password?") == "mocked"

@pytest.mark.slm(calls=0)
def test_prompt_template():
    assert "{name}".format(name="x") == "x"
"""
EXEMPT = """
import pytest, product

pytestmark = pytest.mark.slm

def test_swapped():
    assert product.ask("Is this the candidate?")

@pytest.mark.slm(swap=False)
def test_real_endpoint():
    assert product.ask("Is this the real API?") == "the original endpoint"
"""


@pytest.fixture
def candidate() -> Any:
    with FakeOpenAI(answer="the candidate", model="gpt-4o-mini") as fake:
        yield fake


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


@pytest.mark.parametrize("dist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_mocked_client_is_not_swapped_and_fails_the_gate(
    pytester: pytest.Pytester, candidate: Any, dist: list[str]
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    write_pyproject(pytester, candidate.base_url)
    result = run(pytester, "--slm-report=r.json", "--slm-html=r.html", "--junitxml=j.xml", *dist)
    result.assert_outcomes(passed=3)  # the product's assertions decided the pytest outcome
    assert result.ret == EXIT_GATE_FAILED
    text = said(result)
    assert "not swapped: 1 test(s) passed with no call the candidate answered" in text
    assert "test_product.py::test_mocked (mini)" in text
    assert "a mocked or monkeypatched client" in text and "@pytest.mark.slm(calls=0)" in text
    assert "mini: not_swapped: 1 test(s) passed without a call mini answered" in text
    assert "no calls: 1 opted-in test(s) made no model call" in text  # slm(calls=0), apart
    header = next(line for line in result.stdout.lines if line.startswith("model "))
    assert "not swapped" in header

    report = read_report(pytester.path / "r.json")
    outcomes = {o["nodeid"].split("::")[1]: o for o in report["outcomes"]}
    assert outcomes["test_mocked[mini]"]["outcome"] == "not_swapped"
    assert "no call reached mini" in outcomes["test_mocked[mini]"]["message"]
    assert (
        "into a mock (openai.resources.chat.completions.completions.Completions.create"
        in (outcomes["test_mocked[mini]"]["message"])
    )
    assert outcomes["test_prompt_template[mini]"]["outcome"] == "no_calls"  # slm(calls=0)
    assert outcomes["test_swapped[mini]"]["outcome"] == "passed"
    row = report["models"][0]
    counts = ("tests_passed", "tests_not_swapped", "tests_no_calls", "pass_rate")
    assert tuple(row[k] for k in counts) == (1, 1, 1, 1.0)
    breach = report["gate"]["models"][0]["breaches"][0]
    assert (report["gate"]["passed"], breach["rule"], breach["measured"]) == (
        False, "not_swapped", 1)  # fmt: skip

    html = (pytester.path / "r.html").read_text()
    rows, _ = report_data(html)
    shown = {rows["tests"][row[0]].split("::")[-1]: row[2] for row in rows["rows"]}  # outcomes
    assert shown["test_mocked"] == "not_swapped"
    assert '<small class="not_swapped">1 not swapped</small>' in html

    cases = {c.get("name"): c for c in ET.parse(pytester.path / "j.xml").iter("testcase")}
    mocked = cases["test_mocked[mini]"]
    props = {p.get("name"): p.get("value") for p in mocked.iter("property")}
    assert props["slam_outcome"] == "not_swapped" and "monkeypatched" in props["slam_not_swapped"]
    assert mocked.find("failure") is None and mocked.find("error") is None  # documented choice
    swapped = {p.get("name"): p.get("value") for p in cases["test_swapped[mini]"].iter("property")}
    assert swapped["slam_outcome"] == "passed"


def test_a_run_whose_every_test_is_not_swapped_fails_the_gate_not_incomplete(
    pytester: pytest.Pytester, candidate: Any
) -> None:
    """No evidence at all is a failed gate, not a run that could not be judged."""
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    write_pyproject(pytester, candidate.base_url)
    result = run(pytester, "--slm-report=r.json", "-k", "mocked")
    result.assert_outcomes(passed=1, deselected=2)
    assert result.ret == EXIT_GATE_FAILED
    gate = read_report(pytester.path / "r.json")["gate"]
    assert gate["passed"] is False and not gate.get("incomplete")
    assert gate["models"][0]["breaches"][0]["rule"] == "not_swapped"
    assert candidate.hits == 0


def test_allow_not_swapped_lets_the_gate_pass(pytester: pytest.Pytester, candidate: Any) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    write_pyproject(
        pytester, candidate.base_url, extra="[tool.slam.gate]\nallow_not_swapped = true\n"
    )
    result = run(pytester, "--slm-report=r.json")
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    report = read_report(pytester.path / "r.json")
    assert report["models"][0]["tests_not_swapped"] == 1  # still shown, no longer gated
    assert "not swapped: 1 test(s)" in said(result)


def test_a_bad_gate_key_value_is_a_usage_error(pytester: pytest.Pytester, candidate: Any) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    write_pyproject(
        pytester, candidate.base_url, extra="[tool.slam.gate]\nallow_not_swapped = 'yes'\n"
    )
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "allow_not_swapped" in result.stderr.str()


def test_an_exempt_test_runs_once_against_the_original_endpoint(
    pytester: pytest.Pytester, candidate: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=EXEMPT)
    write_pyproject(pytester, candidate.base_url)
    with FakeOpenAI(answer="the original endpoint", model="gpt-4") as upstream:
        monkeypatch.setenv("OPENAI_BASE_URL", upstream.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-product-key")
        result = run(pytester, "-v", "--slm-report=r.json")
        assert upstream.hits == 1  # the exempt test's one call, untouched
    result.stdout.fnmatch_lines(["*test_product.py::test_real_endpoint PASSED*"])
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    assert candidate.hits == 1  # only the swapped test's call
    report = read_report(pytester.path / "r.json")
    assert [o["nodeid"] for o in report["outcomes"]] == ["test_product.py::test_swapped[mini]"]


def test_a_misused_slm_mark_fails_the_test_with_one_line(
    pytester: pytest.Pytester, candidate: Any
) -> None:
    pytester.makepyfile(
        product=PRODUCT,
        test_product="""
        import pytest

        @pytest.mark.slm(calls=2)
        def test_counted():
            pass

        @pytest.mark.slm(swap=False)
        def test_both(slm_model):
            pass
        """,
    )
    write_pyproject(pytester, candidate.base_url)
    result = run(pytester)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*@pytest.mark.slm(calls=2): only calls=0 (the test makes no model call) is meant",
            "*@pytest.mark.slm(swap=False) keeps the test on the original endpoint, but it uses "
            "the slm_model fixture; drop one of the two",
        ]
    )


MOCKER_TESTS = """
import types, pytest, product

pytestmark = pytest.mark.slm

def test_mocked(mocker):
    answer = types.SimpleNamespace(message=types.SimpleNamespace(content="mocked"))
    mocker.patch.object(product.client.chat.completions, "create",
                        return_value=types.SimpleNamespace(choices=[answer]))
    assert product.ask("How do I reset my password?") == "mocked"

def test_no_call():
    assert "{name}".format(name="x") == "x"
"""


def test_a_mocker_patch_is_not_swapped_and_pytest_mocks_own_patches_are_no_tests(
    pytester: pytest.Pytester, candidate: Any
) -> None:
    """pytest-mock patches Mock's ``assert_*`` for the whole run, with started patchers: they are
    no test's mock, so a test that made no call reads as no_calls, not as "into a mock"."""
    pytest.importorskip("pytest_mock")
    pytester.makepyfile(product=PRODUCT, test_product=MOCKER_TESTS)
    write_pyproject(pytester, candidate.base_url)
    result = run(pytester, "-p", "pytest_mock", "--slm-report=r.json")
    result.assert_outcomes(passed=2)
    report = read_report(pytester.path / "r.json")
    outcomes = {o["nodeid"].split("::")[1]: o for o in report["outcomes"]}
    mocked = outcomes["test_mocked[mini]"]
    assert mocked["outcome"] == "not_swapped"
    assert mocked["message"].count("replaced") == 1
    assert "Completions.create replaced" in mocked["message"]
    assert "NonCallableMock" not in mocked["message"]
    assert outcomes["test_no_call[mini]"]["outcome"] == "no_calls"
    assert candidate.hits == 0


def test_a_patch_started_for_the_whole_run_in_a_conftest_is_still_a_mock(
    pytester: pytest.Pytester, candidate: Any
) -> None:
    """Only a patch of the mocking library itself is left out, never one started before the test."""
    pytester.makeconftest(
        """
        import types
        from unittest import mock

        import pytest

        @pytest.fixture(scope="session", autouse=True)
        def no_model_calls():
            import product

            answer = types.SimpleNamespace(message=types.SimpleNamespace(content="mocked"))
            patcher = mock.patch.object(product.client.chat.completions, "create",
                                        return_value=types.SimpleNamespace(choices=[answer]))
            patcher.start()
            yield
            patcher.stop()
        """
    )
    pytester.makepyfile(
        product=PRODUCT,
        test_product="""
        import pytest, product

        @pytest.mark.slm
        def test_mocked():
            assert product.ask("How do I reset my password?") == "mocked"
        """,
    )
    write_pyproject(pytester, candidate.base_url)
    result = run(pytester, "--slm-report=r.json")
    result.assert_outcomes(passed=1)
    outcome = read_report(pytester.path / "r.json")["outcomes"][0]
    assert outcome["outcome"] == "not_swapped"
    assert "Completions.create replaced" in outcome["message"]
    assert candidate.hits == 0
