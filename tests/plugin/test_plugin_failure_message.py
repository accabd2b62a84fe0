"""A test that fails on the product's own assertion carries pytest's crash line as its message.

Real pytest runs (pytester) of a product whose candidate (a FakeOpenAI on loopback) answers what
the product's assertion rejects: the JSON report's row and outcome say ``AssertionError: ...``,
serially and under xdist (the message is built on the worker and rides on the test report).
"""

from __future__ import annotations

import pytest
from html_helpers import report_data
from report_helpers import read_report
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.testing import FakeOpenAI

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm


def test_priority():
    answer = product.ask("What priority is a refund?")
    assert answer == "Priority: high", "the triage said " + answer


def test_refused():
    pytest.skip("no refund desk today")
"""


@pytest.mark.parametrize("dist", [[], ["-p", "xdist", "-n", "1"]], ids=["serial", "xdist"])
def test_the_products_assertion_text_is_in_the_failed_row(
    pytester: pytest.Pytester, dist: list[str]
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    with FakeOpenAI("Priority: low") as fake:
        write_pyproject(pytester, fake.base_url)
        result = pytester.runpytest_subprocess("--slm-report=report.json", "--slm-html=report.html",
                                               "-p", "no:cacheprovider", *dist)  # fmt: skip
    assert result.ret == 1, result.stdout.str()
    report = read_report(pytester.path / "report.json")
    failed = [t for t in report["tests"] if t["outcome"] == "failed"]
    assert [t["test"] for t in failed] == ["test_product.py::test_priority"]
    message = failed[0]["message"]
    assert message.startswith("AssertionError: the triage said Priority: low"), message
    assert "\n" not in message  # the crash line, not the traceback
    (outcome,) = [o for o in report["outcomes"] if o["outcome"] == "failed"]
    assert outcome["message"] == message
    rows, _ = report_data((pytester.path / "report.html").read_text())
    assert [r[4] for r in rows["rows"] if r[2] == "failed"] == [message]  # the page's row too
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert [t["message"] for t in skipped] == ["Skipped: no refund desk today"]


def test_the_short_summary_line_starts_with_the_reason(pytester: pytest.Pytester) -> None:
    """pytest shows one line per failure (``-r f``): pytest-slam's reason is on it, not on a
    second line pytest never shows."""
    pytester.makepyfile(
        test_answer="""
import pytest, openai

pytestmark = [pytest.mark.slm, pytest.mark.slm_equivalence(by="exact")]

def test_answer():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Which plan?"}])
    assert r.choices[0].message.content
"""
    )
    with FakeOpenAI("Enterprise") as ref, FakeOpenAI("The Pro plan") as near:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--slm-models={near.base_url}#near", "--slm-record=new",
            "-rf",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_answer.py::test_answer[[]near[]] - call 1: equiva*"])


TWO_CALLS = """
import pytest, openai

pytestmark = [pytest.mark.slm, pytest.mark.slm_equivalence(by="exact")]

def test_answer():
    client = openai.OpenAI()
    for question in ("Which plan?", "Which region?"):
        r = client.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": question}])
        assert r.choices[0].message.content
"""


@pytest.mark.parametrize("env", [{"CI": "true"}, {"COLUMNS": "80"}], ids=["CI", "80 columns"])
def test_the_short_summary_shows_the_first_fact_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    """A reason of several lines is printed whole under the failure and by its first line in
    the short summary, on CI too (it was printed twice); at 80 columns that line shows the first
    fact (the failed call and its measure), not ``pytest-slam (near): cal…``."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    if "CI" not in env:
        monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_answer=TWO_CALLS)
    with FakeOpenAI("Enterprise") as ref, FakeOpenAI("The Pro plan") as near:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--slm-models={near.base_url}#near", "--slm-record=new",
            "-rf",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    out = result.stdout.lines
    second = [i for i, line in enumerate(out) if line.strip().startswith("call 2: equivalence")]
    assert len(second) == 1, result.stdout.str()  # the second reason once, under the failure
    [summary] = [line for line in out if line.startswith("FAILED ")]
    assert "- call 1: equivalence 0" in summary, summary
    if "COLUMNS" in env:
        assert len(summary) <= 80, summary
        return
    with FakeOpenAI("Enterprise") as ref, FakeOpenAI("The Pro plan") as near:  # --tb=line
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        lined = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--slm-models={near.base_url}#near", "--tb=line"
        )  # fmt: skip
    lined.stdout.fnmatch_lines(["call 1: equivalence 0.00 < 1.00 (exact)*(pytest-slam, near)"])


FRAMEWORK = """
import openai

class RetriesExhausted(Exception):
    pass

def extract(client, text, attempts=3):
    '''A framework's structured extraction: ask for a tool call, retry on prose, then give up.'''
    tools = [{"type": "function", "function": {"name": "ticket", "parameters": {"type": "object"}}}]
    for _ in range(attempts):
        r = client.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": text}], tools=tools)
        if r.choices[0].message.tool_calls:
            return r.choices[0].message.tool_calls[0].function.arguments
    raise RetriesExhausted(f"no tool call after {attempts} attempts")
"""


def test_when_a_framework_raised_its_exception_is_followed_by_the_candidates_calls(
    pytester: pytest.Pytester,
) -> None:
    """The framework's exception is the test's failure, as pytest shows it; after it comes what
    the candidate did (three prose answers) and pytest-slam's problem with them, not only in the
    JSON and HTML reports."""
    pytester.makepyfile(
        framework=FRAMEWORK,
        test_extract="""
import openai, pytest, framework

pytestmark = pytest.mark.slm

def test_extract():
    assert framework.extract(openai.OpenAI(), "Open a ticket: parcel late")
""",
    )
    reference = {"content": None, "tool_calls": [{"name": "ticket", "arguments": {"a": 1}}]}
    with FakeOpenAI(lambda _: reference) as ref, FakeOpenAI("I think it is late.") as prose:
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--slm-models={prose.base_url}#prose", "--slm-record=new"
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E *RetriesExhausted: no tool call after 3 attempts",
        "*- pytest-slam -*",
        "the test raised; the candidate prose made 3 call(s) (pytest-slam's account):",
        "  call 1: answered text, no tool call: 'I think it is late.' (finish_reason stop)",
        "  call 2: *",
        "  call 3: *",
        "  call 1: *candidate called no tool; reference called ticket*",
    ])  # fmt: skip


def test_the_account_says_no_tool_call_only_where_the_request_offered_tools(
    pytester: pytest.Pytester,
) -> None:
    """A structured-output request (json_schema, as LangChain or DSPy send) is answered in text by
    design: when the product raised, the account shows the text without claiming a missing tool
    call."""
    pytester.makepyfile(
        test_parse="""
import json, openai, pytest

pytestmark = pytest.mark.slm

def test_parse():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "rate it"}],
        response_format={"type": "json_schema", "json_schema": {"name": "s", "schema": {
            "type": "object", "properties": {"score": {"type": "number"}}}}})
    json.loads(r.choices[0].message.content)
""",
    )
    with FakeOpenAI('{"score": 1}') as ref, FakeOpenAI("Sure! The score is one.") as prose:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", f"--slm-models={prose.base_url}#prose", "--slm-record=new"
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "the test raised; the candidate prose made 1 call(s) (pytest-slam's account):",
        "  call 1: answered text: 'Sure! The score is one.' (finish_reason stop)",
    ])  # fmt: skip
    assert "no tool call" not in result.stdout.str()
