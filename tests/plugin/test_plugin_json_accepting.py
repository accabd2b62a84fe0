"""A JSON near miss names the configuration that accepts it (issue 29).

Real pytest runs (pytester) against loopback fakes: the reference answers
``{"sentiment": "positive", "confidence": 0.9}``, the candidate ``confidence: 1`` and a field of its
own; the product's assertion (the sentiment) passes, pytest-slam fails the test on the fields, and
its message names each field with the key that accepts it. The lines it prints, pasted into
pyproject.toml as they are, make the same pair equivalent; so does the mark it prints.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from html_helpers import chromium
from report_helpers import read_report
from slam_helpers import needs_chromium

from pytest_slam.testing import FakeOpenAI

SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm
MSG = [{"role": "user", "content": "Sentiment of 'great support' as JSON"}]

def test_sentiment():
    r = openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0,
                                                response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content)["sentiment"] == "positive"
"""
REFERENCE = '{"sentiment": "positive", "confidence": 0.9}'
NEAR = '{"sentiment": "positive", "confidence": 1, "reason": "says great"}'


def message(report: Path) -> str:
    (outcome,) = read_report(report)["outcomes"]
    return str(outcome["message"])


def pair_verdict(report: Path) -> str:
    (outcome,) = read_report(report)["outcomes"]
    return str(outcome["pairs"][0]["scores"][0]["verdict"])


def _offered(
    pytester: pytest.Pytester, ref: FakeOpenAI, mini: FakeOpenAI
) -> tuple[str, str, pytest.RunResult]:
    """A first run that records the reference and fails the near miss: (pyproject head, models
    option, the run)."""
    head = f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n'
    pytester.makefile(".toml", pyproject=head)
    models = f"--slm-models={mini.base_url}#mini"
    first = pytester.runpytest(
        "-p", "no:cacheprovider", models, "--slm-record=new", "--slm-report=r.json"
    )  # fmt: skip
    first.assert_outcomes(failed=1)
    return head, models, first


def _table(said: str) -> list[str]:
    """The paste-able table's lines, as printed."""
    return re.findall(r"^ +(\[tool\.slam\.equivalence\.modules\.\S+\]|\w+ = .*)$", said, re.M)


def _pasted(
    pytester: pytest.Pytester, head: str, table: list[str], models: str
) -> pytest.RunResult:
    """The run again with the table pasted into pyproject.toml as printed."""
    pytester.makefile(".toml", pyproject=head + "\n".join(table) + "\n")
    return pytester.runpytest("-p", "no:cacheprovider", models, "--slm-report=r.json")


def test_a_near_miss_names_each_field_and_the_pasted_configuration_accepts_it(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_sentiment=SUITE)
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI(NEAR) as mini:
        # the product's assertion passed; the fields did not
        head, models, first = _offered(pytester, ref, mini)
        said = message(pytester.path / "r.json")
        assert "$.confidence expected 0.9, got 1" in said
        assert "the product's own assertions passed" in said
        table = _table(said)
        assert table == [
            '[tool.slam.equivalence.modules."test_sentiment.py"]',
            'by = "json"',
            "tolerance = 0.1  # numbers within it match: $.confidence",
            'ignore = ["$.reason"]  # not compared',
        ]
        mark = 'slm_equivalence(by="json", tolerance=0.1, ignore=["$.reason"])'
        assert f"or for this test only: @pytest.mark.{mark}" in said
        first.stdout.fnmatch_lines(["*tolerance = 0.1  # numbers within it match: $.confidence"])

        pasted = _pasted(pytester, head, table, models)  # pasted as printed
        pasted.assert_outcomes(passed=1)
        assert pair_verdict(pytester.path / "r.json") == "equivalent"

        pytester.makefile(".toml", pyproject=head)
        marked = SUITE.replace("def test_sentiment", f"@pytest.mark.{mark}\ndef test_sentiment")
        pytester.makepyfile(test_sentiment=marked)
        by_mark = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-report=r.json")
        by_mark.assert_outcomes(passed=1)
        assert pair_verdict(pytester.path / "r.json") == "equivalent"


TOOL_SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm
TOOLS = [{"type": "function", "function": {"name": "rate", "parameters": {"type": "object"}}}]

def test_rate():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Rate 'great support'"}], tools=TOOLS)
    assert r.choices[0].message.tool_calls[0].function.name == "rate"
"""


def tool_call(arguments: dict[str, object]) -> dict[str, object]:
    return {"content": None, "tool_calls": [{"name": "rate", "arguments": arguments}]}


def test_a_tool_call_near_miss_names_its_arguments_and_the_pasted_table_accepts_it(
    pytester: pytest.Pytester,
) -> None:
    """As with_structured_output sends it: a tool call whose arguments differ in one number."""
    pytester.makepyfile(test_rate=TOOL_SUITE)
    reference = tool_call({"sentiment": "positive", "confidence": 0.9})
    near = tool_call({"sentiment": "positive", "confidence": 1})
    with FakeOpenAI(lambda _: reference) as ref, FakeOpenAI(lambda _: near) as mini:
        head, models, _ = _offered(pytester, ref, mini)
        said = message(pytester.path / "r.json")
        table = _table(said)
        assert table == [
            '[tool.slam.equivalence.modules."test_rate.py"]',
            'by = "json"',
            "tolerance = 0.1  # numbers within it match: $.confidence",
        ]
        pasted = _pasted(pytester, head, table, models)
    pasted.assert_outcomes(passed=1)
    assert pair_verdict(pytester.path / "r.json") == "equivalent"


def test_a_json_difference_the_product_also_failed_on_gets_no_accepting_hint(
    pytester: pytest.Pytester,
) -> None:
    """When the product's own assertion failed, the difference mattered: no configuration is
    offered to accept it."""
    pytester.makepyfile(test_sentiment=SUITE)
    with (
        FakeOpenAI(REFERENCE) as ref,
        FakeOpenAI('{"sentiment": "negative", "confidence": 0.9}') as mini,
    ):
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    assert "tolerance" not in result.stdout.str() and "ignore =" not in result.stdout.str()


@pytest.mark.parametrize(
    ("gap", "shown"), [(1 - 0.9, 0.1), (0.23, 0.23), (0.0149999, 0.015), (2.0, 2.0)]
)
def test_the_tolerance_offered_is_the_shortest_decimal_that_accepts_the_gap(
    gap: float, shown: float
) -> None:
    from pytest_slam.compare.accepting import tolerance_for

    assert tolerance_for(gap) == shown and tolerance_for(gap) >= gap


def test_a_gap_between_decimals_is_offered_as_written_and_pasted_back_it_accepts_the_pair(
    pytester: pytest.Pytester,
) -> None:
    """0.9 against 0.85 (the six-stack bench's near miss, bench/bench_stacks.py): the offered
    tolerance is 0.05, not the floats' 0.05000000000000004, and pasted back it makes the pair
    equivalent."""
    pytester.makepyfile(test_sentiment=SUITE)
    near = '{"sentiment": "positive", "confidence": 0.85}'
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI(near) as mini:
        head, models, _ = _offered(pytester, ref, mini)
        table = _table(message(pytester.path / "r.json"))
        assert table == [
            '[tool.slam.equivalence.modules."test_sentiment.py"]',
            'by = "json"',
            "tolerance = 0.05  # numbers within it match: $.confidence",
        ]
        pasted = _pasted(pytester, head, table, models)
    pasted.assert_outcomes(passed=1)
    assert pair_verdict(pytester.path / "r.json") == "equivalent"


SCHEMA_SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm
SCHEMA = {"type": "object", "properties": {"sentiment": {"type": "string"},
          "confidence": {"type": "number"}}, "required": ["sentiment", "confidence"]}
FORMAT = {"type": "json_schema", "json_schema": {"name": "Rating", "schema": SCHEMA}}

def test_sentiment():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Rate 'great support'"}],
        response_format=FORMAT)  # as with_structured_output, instructor and output_type send it
    assert r.choices[0].message.content
"""


def test_a_json_schema_near_miss_gets_the_table_and_pasted_back_it_makes_the_pair_equivalent(
    pytester: pytest.Pytester,
) -> None:
    """The json_schema path (fields and the request's schema) names its fields like the json
    scorer does; the table pasted into pyproject.toml as printed accepts the pair, and the
    request's schema is still checked."""
    pytester.makepyfile(test_sentiment=SCHEMA_SUITE)
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI(NEAR) as mini:
        head, models, _ = _offered(pytester, ref, mini)
        said = message(pytester.path / "r.json")
        table = _table(said)
        assert table == [
            '[tool.slam.equivalence.modules."test_sentiment.py"]',
            'by = "json"',
            "tolerance = 0.1  # numbers within it match: $.confidence",
            'ignore = ["$.reason"]  # not compared',
        ]
        pasted = _pasted(pytester, head, table, models)  # pasted as printed
        pasted.assert_outcomes(passed=1)
        (outcome,) = read_report(pytester.path / "r.json")["outcomes"]
        (score,) = outcome["pairs"][0]["scores"]
        assert score["verdict"] == "equivalent"
        assert score["scorer"] == "json+json_schema"  # the request's schema is still the contract


def test_a_json_schema_answer_that_breaks_the_schema_gets_no_table(
    pytester: pytest.Pytester,
) -> None:
    """No tolerance or ignore makes an answer valid against the request's schema: none offered."""
    pytester.makepyfile(test_sentiment=SCHEMA_SUITE)
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI('{"sentiment": "positive"}') as mini:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    said = message(pytester.path / "r.json")
    assert "schema error" in said and "ignore =" not in said and "tolerance =" not in said


def test_when_no_field_matches_no_table_proposes_to_ignore_them_all(
    pytester: pytest.Pytester,
) -> None:
    """0 of N fields right: ignoring them all would switch the comparison off; the message says
    nothing matched instead of offering that."""
    pytester.makepyfile(test_sentiment=SCHEMA_SUITE)
    other = '{"sentiment": "mixed", "confidence": 0.2}'
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI(other) as mini:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    said = message(pytester.path / "r.json")
    assert "ignore =" not in said and "tolerance =" not in said
    assert "no field of the candidate's answer matches the reference's (0 of 2)" in said


@needs_chromium
def test_the_html_report_shows_the_table_line_by_line_as_it_pastes(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """In the report's opened row the message keeps its lines: the table copies as printed."""
    pytester.makepyfile(test_sentiment=SCHEMA_SUITE)
    with FakeOpenAI(REFERENCE) as ref, FakeOpenAI(NEAR) as mini:
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-html=r.html",
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    page = pytester.path / "r.html"
    dom = chromium(f"{page.as_uri()}#open=all", "--dump-dom", tmp_path=tmp_path)
    found = re.search(r'<pre class="message">(.*?)</pre>', dom, re.S)
    assert found is not None, "the opened row shows no message"
    lines = [line.strip() for line in html.unescape(found.group(1)).splitlines()]
    assert '[tool.slam.equivalence.modules."test_sentiment.py"]' in lines
    assert "tolerance = 0.1  # numbers within it match: $.confidence" in lines
