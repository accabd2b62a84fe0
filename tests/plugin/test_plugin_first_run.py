"""A first run that explains itself: nothing opted in, not enabled, and tests that make no model call.

Real pytest runs (pytester). The product's original endpoint and the candidate are FakeOpenAI servers
on loopback; ``smollm2-135m`` is named but never started (no test needs it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, said, write_pyproject

from pytest_slam.testing import FakeOpenAI

PLAIN = """
import product

def test_template():
    assert "{q}".format(q="x") == "x"

def test_asks():
    assert product.ask("How do I reset my password?")
"""


@pytest.fixture
def original(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    """The endpoint the product's client is configured for (OPENAI_BASE_URL), on loopback."""
    with FakeOpenAI(answer="the original endpoint") as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        yield fake


def section(result: pytest.RunResult) -> list[str]:
    """The lines of the pytest-slam summary section, up to pytest's closing line."""
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "= pytest-slam =" in line) + 1
    return [line for line in lines[start:] if not line.startswith("=")][:5]


def test_nothing_opted_in_says_so_in_one_line(
    pytester: pytest.Pytester, original: FakeOpenAI
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=PLAIN)
    pytester.makeini("[pytest]\npythonpath = .\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-models=smollm2-135m")
    result.assert_outcomes(passed=2)
    assert original.hits == 1  # the call went where the product pointed it, unswapped
    (line,) = section(result)
    assert line == (
        "nothing was opted in, so no test ran on smollm2-135m: 1 model request(s) went unswapped "
        f'to the original endpoint {original.base_url} (an error such as "502 ... unreachable" '
        "there is that endpoint's, not a candidate's); opt tests in with the slm_model fixture, "
        "@pytest.mark.slm on a test, class or module, slm_opt_in = True in a conftest.py, "
        '[tool.slam] paths = ["tests/llm"], or from the command line -o slm_paths=tests/llm'
    )
    assert result.ret == 0


def test_not_enabled_is_one_line_without_a_traceback(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_a="def test_x(slm_model):\n    pass\n\ndef test_y(slm_model):\n    pass\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert result.stderr.lines[0] == (
        "ERROR: pytest-slam: test_a.py::test_x (and 1 more test(s)) opts in to model swapping, "
        "but pytest-slam is not enabled for this run: add a [tool.slam] table to pyproject.toml, "
        "or pass --slm-models=smollm2-135m."
    )
    text = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in text and "_caller.py" not in text and "ERROR collecting" not in text


FOLDER_TESTS = {
    "tests/llm/test_product.py": """
import product

def test_asks():
    assert product.ask("How do I reset my password?")

def test_parses_a_ticket():
    assert "ticket: 42".split(": ")[1] == "42"

class TestTemplates:
    def test_fills(self):
        assert "{q}".format(q="x") == "x"
""",
}


def test_plain_tests_in_an_opted_in_folder_are_listed_and_do_not_fail_the_gate(
    pytester: pytest.Pytester, original: FakeOpenAI
) -> None:
    with FakeOpenAI(answer="the candidate", model="gpt-4o-mini") as candidate:
        write_pyproject(pytester, candidate.base_url, extra="""
[tool.slam.gate]
min_pass_rate = 1.0
""")  # fmt: skip
        toml = pytester.path / "pyproject.toml"
        toml.write_text(toml.read_text().replace(
            'reference = "none"', 'reference = "none"\npaths = ["tests/llm"]'
        ))  # fmt: skip
        pytester.makepyfile(product=PRODUCT)
        for path, text in FOLDER_TESTS.items():
            (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
            (pytester.path / path).write_text(text)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        assert candidate.hits == 1
    result.assert_outcomes(passed=3)
    assert result.ret == 0  # the gate passed: the plain tests are not "not swapped"
    text = said(result)
    assert (
        "no calls: 2 opted-in test(s) made no model call, so they are counted apart (not in the "
        "pass rate, not gated): tests/llm/test_product.py::TestTemplates::test_fills, "
        "tests/llm/test_product.py::test_parses_a_ticket" in text
    )
    report: dict[str, Any] = read_report(pytester.path / "r.json")
    outcomes = {o["test"].split("::", 1)[1]: o for o in report["outcomes"]}
    assert outcomes["test_asks"]["outcome"] == "passed"
    for name in ("test_parses_a_ticket", "TestTemplates::test_fills"):
        assert outcomes[name]["outcome"] == "no_calls"
        assert "made no model call" in outcomes[name]["message"]
    row = report["models"][0]
    assert (row["tests_passed"], row["tests_no_calls"], row["tests_not_swapped"]) == (1, 2, 0)
    assert row["pass_rate"] == 1.0 and report["gate"]["passed"] is True
    assert original.hits == 0  # nothing reached the product's own endpoint


def test_not_enabled_under_xdist_is_one_line_per_test_without_a_traceback(
    pytester: pytest.Pytester,
) -> None:
    """A worker cannot stop the run at collection (xdist would crash): each test errors in one line."""
    pytester.makepyfile(test_a="def test_x(slm_model):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-n", "1")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "pytest-slam: test_a.py::test_x opts in to model swapping, but pytest-slam is not enabled*"
        ]
    )
    assert "Traceback" not in result.stdout.str() and "INTERNALERROR" not in result.stdout.str()


def test_the_command_line_opt_in_the_hint_names_works(
    pytester: pytest.Pytester, original: FakeOpenAI
) -> None:
    """The nothing-opted-in line ends with ``-o slm_paths=tests/llm``: that very option opts the
    folder in, with nothing in pyproject.toml or a conftest."""
    with FakeOpenAI(answer="the candidate", model="gpt-4o-mini") as candidate:
        write_pyproject(pytester, candidate.base_url)
        pytester.makepyfile(product=PRODUCT)
        for path, text in FOLDER_TESTS.items():
            (pytester.path / path).parent.mkdir(parents=True, exist_ok=True)
            (pytester.path / path).write_text(text)
        plain = pytester.runpytest("-p", "no:cacheprovider")
        assert "-o slm_paths=tests/llm" in said(plain) and candidate.hits == 0
        result = pytester.runpytest("-p", "no:cacheprovider", "-o", "slm_paths=tests/llm")
        assert candidate.hits == 1 and original.hits == 1  # swapped now; the first run was not
    result.assert_outcomes(passed=3)
    listed = pytester.runpytest("-p", "no:cacheprovider", "-o", "slm_paths=tests/llm", "--co", "-q")
    assert "tests/llm/test_product.py::test_asks[mini]" in listed.stdout.lines
