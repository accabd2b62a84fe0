"""The generation cap: a candidate call without an output limit gets one; a call with its own keeps it.

Real pytest runs (pytester) through the proxy. The body a candidate received is read from the fake
server's request log; the real embedded engine (SmolLM2 via llama.cpp) shows a cut answer and the
summary line that says so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from html_helpers import report_data
from report_helpers import read_report
from slam_helpers import write_pyproject

from pytest_slam.testing import FakeOpenAI
from pytest_slam.testing.fake_openai import count_tokens

SUITE = """
import openai, pytest

pytestmark = pytest.mark.slm
MSG = [{"role": "user", "content": "How do I get a refund?"}]

def test_no_limit(slm_model):
    openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0)
    assert slm_model.calls[0].capped

def test_own_limit(slm_model):
    openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0,
                                            max_tokens=7)
    assert not slm_model.calls[0].capped
"""


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def calls(report: Path) -> dict[str, dict[str, Any]]:
    outcomes = read_report(report)["outcomes"]
    return {o["nodeid"].split("::")[1].split("[")[0]: o["calls"][0] for o in outcomes}


def test_the_cap_follows_the_reference_and_leaves_own_limits_alone(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(test_cap=SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{fake_gpt4.base_url}#gpt-4"
cap_factor = 3.0
cap_margin = 10
""")  # fmt: skip
    models = f"--slm-models={mini.base_url}#mini"
    first = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-record=new")
    first.assert_outcomes(passed=2)
    # Reference first: the record run asked the reference before the candidate, so the candidate's
    # cap already came from the reference's answer (not the 1024 fallback).
    reference_tokens = count_tokens("GPT-4 says: How do I get a refund?")
    assert [r.json.get("max_tokens") for r in mini.requests] == [3 * reference_tokens + 10, 7]
    assert len(fake_gpt4.requests) == 2  # each request recorded once, not again when paired

    mini.requests.clear()
    fake_gpt4.stop()
    replay = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-report=r.json")
    replay.assert_outcomes(passed=2)
    # in test order or not: the second test's request may be fetched ahead of the first's
    own, capped = sorted((r.json for r in mini.requests), key=lambda b: b["max_tokens"] != 7)
    assert capped["max_tokens"] == 3 * reference_tokens + 10
    assert own["max_tokens"] == 7 and "max_completion_tokens" not in own
    by_test = calls(pytester.path / "r.json")
    assert by_test["test_no_limit"]["capped"]
    assert by_test["test_no_limit"]["cap"] == capped["max_tokens"]
    assert not by_test["test_own_limit"]["capped"] and by_test["test_own_limit"]["cap"] is None
    assert "max_tokens" not in by_test["test_no_limit"]["request"]  # the golden key is unchanged
    assert "generation cap" not in replay.stdout.str()  # nothing was cut


def test_the_embedded_engine_is_capped_and_the_summary_says_so(
    pytester: pytest.Pytester, smollm2_url: str
) -> None:
    pytester.makepyfile(test_cap=SUITE)
    write_pyproject(
        pytester,
        smollm2_url,
        name="smol",
        model="SmolLM2-135M-Instruct",
        extra="max_tokens_cap = 3\n",
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
    result.assert_outcomes(passed=2)
    by_test = calls(pytester.path / "r.json")
    capped, own = by_test["test_no_limit"], by_test["test_own_limit"]
    assert capped["cap"] == 3 and capped["completion_tokens"] <= 3 and capped["cut_by_cap"]
    assert not own["capped"] and own["completion_tokens"] > 3
    result.stdout.fnmatch_lines(
        ["*generation cap: the answers of 1 test(s) were cut*test_no_limit?smol?*max_tokens_cap*"]
    )


JSON_SUITE = """
import json, openai, pytest

# what is compared is not the point here: only whether the answer came whole
pytestmark = [pytest.mark.slm, pytest.mark.slm_equivalence(by="fuzzy", at_least=0.0)]
MSG = [{"role": "user", "content": "Give the refund as JSON"}]

def test_json(slm_model):
    r = openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0,
                                                response_format={"type": "json_object"})
    assert json.loads(r.choices[0].message.content)["refund"]

def test_text(slm_model):
    openai.OpenAI().chat.completions.create(model="gpt-4", messages=MSG, temperature=0)
"""
LONG_JSON = json.dumps({"refund": {"days": 30, "steps": ["open the order page"] * 9}})


def test_a_json_call_gets_the_structured_cap_and_max_tokens_cap_stays_the_override(
    pytester: pytest.Pytester,
) -> None:
    """The reference answers in a few tokens; the candidate's whole JSON answer is longer than the
    plain derived cap (2 x it + 64) but within the structured one (3 x it + 64, room for the same
    JSON written another way): the JSON call is not cut, the plain call with the same answer is, and
    that test is told so by name. ``--slm-max-tokens-cap`` is the ceiling over both, for every
    model: under it, the JSON answer is cut at the ceiling and named a cut, not a runaway."""
    pytester.makepyfile(test_cap=JSON_SUITE)
    with FakeOpenAI('{"refund": 1}') as ref, FakeOpenAI(LONG_JSON) as mini:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        models = f"--slm-models={mini.base_url}#mini"
        result = pytester.runpytest(
            "-p", "no:cacheprovider", models, "--slm-record=new", "--slm-report=r.json",
            "--slm-html=r.html", "-rP",
        )  # fmt: skip
        sent = {("json" if r.json.get("response_format") else "text"): r.json
                for r in mini.requests}  # fmt: skip
        mini.requests.clear()
        ceiling = 80
        again = pytester.runpytest(
            "-p", "no:cacheprovider", models, f"--slm-max-tokens-cap={ceiling}",
            "--slm-report=again.json",
        )  # fmt: skip
        lowered = {("json" if r.json.get("response_format") else "text"): r.json
                   for r in mini.requests}  # fmt: skip
    result.assert_outcomes(passed=2)
    reference_tokens = count_tokens('{"refund": 1}')
    derived, structured = 2 * reference_tokens + 64, 3 * reference_tokens + 64
    assert derived < count_tokens(LONG_JSON) <= structured
    assert sent["json"]["max_tokens"] == structured
    assert sent["text"]["max_tokens"] == derived
    by_test = calls(pytester.path / "r.json")
    assert by_test["test_json"]["finish_reason"] == "stop"
    assert not by_test["test_json"]["cut_by_cap"] and by_test["test_text"]["cut_by_cap"]
    outcomes = read_report(pytester.path / "r.json")["outcomes"]
    message = {o["nodeid"].split("::")[1].split("[")[0]: o["message"] for o in outcomes}
    assert message["test_json"] is None
    named = f"generation cap cut 1 answer(s) of mini at {derived} token(s)"
    assert named in message["test_text"]
    rows, _ = report_data((pytester.path / "r.html").read_text(encoding="utf-8"))
    assert any(named in (row[4] or "") for row in rows["rows"])  # the test's row, its message
    result.stdout.fnmatch_lines([
        "*- pytest-slam -*",
        "pytest-slam: test_cap.py::test_text?mini?: the generation cap cut 1 answer(s)*",
    ])  # fmt: skip
    again.assert_outcomes(passed=1, failed=1)  # the JSON cut short no longer parses
    assert lowered["json"]["max_tokens"] == ceiling  # the one-line ceiling, for every model
    assert lowered["text"]["max_tokens"] == min(derived, ceiling)
    cut_json = calls(pytester.path / "again.json")["test_json"]
    assert cut_json["cut_by_cap"] and cut_json["error_kind"] is None  # a cut, not a runaway
    assert "structured cap: the candidate ran away" not in again.stdout.str()


@pytest.mark.parametrize(
    ("extra", "cap"),
    [
        ({}, 2 * 5 + 64),
        ({"response_format": {"type": "text"}}, 2 * 5 + 64),
        ({"response_format": {"type": "json_object"}}, 3 * 5 + 64),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "t"}}}, 3 * 5 + 64),
        ({"tools": [{"type": "function", "function": {"name": "f"}}]}, 3 * 5 + 64),
        ({"tools": [], "max_tokens": 9}, None),  # the product's own limit is never changed
    ],
)
def test_a_structured_request_gets_the_structured_cap(
    extra: dict[str, Any], cap: int | None
) -> None:
    from pytest_slam.swap.chat import generation_cap
    from pytest_slam.swap.models import resolve

    body = {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}], **extra}
    spec = resolve("smollm2-135m")
    assert generation_cap(body, spec, reference_tokens=5) == cap
    # no reference answer: the ceiling; a larger cap_factor / cap_margin raises the structured cap
    assert generation_cap(body, spec, None) == (None if cap is None else spec.max_tokens_cap)
    if cap is not None and cap > 2 * 5 + 64:
        assert generation_cap(body, spec, 5, factor=4.0, margin=70) == 4 * 5 + 70
