"""The tool-call scorer and the side-by-side view of tool calls: names, JSON arguments, parallel calls."""

from __future__ import annotations

import json

import pytest

from pytest_slam.compare import get_scorer
from pytest_slam.compare.structured import JsonScorer
from pytest_slam.compare.text import FuzzyScorer
from pytest_slam.compare.toolcalls import ToolCallScorer, describe, parse_calls
from pytest_slam.report.diffview import answer_text, tool_calls_side_by_side


def call(name: str, args: dict | str, call_id: str = "call_x") -> dict:
    text = args if isinstance(args, str) else json.dumps(args)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}


WEATHER = call("get_weather", {"city": "Paris", "unit": "C"})


def test_different_function_names_score_zero() -> None:
    score = ToolCallScorer().score_calls([call("delete_account", {"user": "42"})], [WEATHER])
    assert score.value == 0.0 and score.scorer == "tool_calls"
    assert "called delete_account" in score.explanation
    assert 'instead of get_weather({"city": "Paris", "unit": "C"})' in score.explanation


def test_same_name_and_equal_arguments_score_one_whatever_the_spacing_and_key_order() -> None:
    same = call("get_weather", '{ "unit": "C",\n "city": "Paris" }', call_id="call_other")
    score = ToolCallScorer().score_calls([same], [WEATHER])
    assert (score.value, score.explanation) == (1.0, "1/1 calls match")


def test_partial_argument_agreement_scores_in_between() -> None:
    score = ToolCallScorer().score_calls(
        [call("get_weather", {"city": "Paris", "unit": "F"})], [WEATHER]
    )
    assert score.value == 0.5
    assert '$.unit expected "C", got "F"' in score.explanation


def test_json_options_apply_to_the_arguments() -> None:
    cand = [call("book", {"room": 4, "request_id": "a1", "price": 100.4})]
    ref = [call("book", {"room": 4, "request_id": "z9", "price": 100.0})]
    assert ToolCallScorer().score_calls(cand, ref).value == pytest.approx(1 / 3)
    loose = get_scorer("tool_calls", ignore=["$.request_id"], tolerance=0.5)
    assert loose.score_calls(cand, ref).value == 1.0
    lent = ToolCallScorer.like(JsonScorer(ignore=["$.request_id"], tolerance=0.5))
    assert lent.score_calls(cand, ref).value == 1.0
    assert type(ToolCallScorer.like(FuzzyScorer())) is ToolCallScorer


def test_parallel_calls_match_in_any_order() -> None:
    paris, rome = WEATHER, call("get_weather", {"city": "Rome", "unit": "C"})
    score = ToolCallScorer().score_calls([rome, paris], [paris, rome])
    assert (score.value, score.explanation) == (1.0, "2/2 calls match")


def test_a_missing_or_extra_call_counts_as_zero_of_the_larger_side() -> None:
    mail = call("send_email", {"to": "a@b.c"})
    missing = ToolCallScorer().score_calls([WEATHER], [WEATHER, mail])
    assert (
        missing.value == 0.5 and 'missing call send_email({"to": "a@b.c"})' in missing.explanation
    )
    extra = ToolCallScorer().score_calls([mail, WEATHER], [WEATHER])
    assert extra.value == 0.5 and "unexpected call send_email" in extra.explanation


def test_one_side_without_calls_scores_zero_and_neither_scores_one() -> None:
    scorer = ToolCallScorer()
    assert scorer.score_calls([], [WEATHER]).explanation.startswith("candidate called no tool")
    assert scorer.score_calls([], [WEATHER]).value == 0.0
    assert scorer.score_calls([WEATHER], []).value == 0.0
    assert scorer.score_calls([], []).explanation == "neither side called a tool"
    assert scorer.score_calls([], []).value == 1.0


def test_arguments_that_are_not_json_match_only_when_equal() -> None:
    scorer = ToolCallScorer()
    assert scorer.score_calls([call("f", "not json")], [call("f", "not json")]).value == 1.0
    assert scorer.score_calls([call("f", "not json")], [call("f", "{}")]).value == 0.0


def test_score_reads_tool_calls_as_json_text_like_any_named_scorer() -> None:
    scorer = get_scorer("tool_calls")
    assert scorer.score(json.dumps([WEATHER]), json.dumps([WEATHER])).value == 1.0
    assert scorer.score("", json.dumps({"role": "assistant", "tool_calls": [WEATHER]})).value == 0.0
    bad = scorer.score("Sure! It is sunny.", json.dumps([WEATHER]))
    assert bad.value == 0.0 and bad.explanation.startswith("candidate tool calls are not readable")
    assert parse_calls("") == []


def test_describe_cuts_long_arguments() -> None:
    long = call("f", {"text": "x" * 200})
    assert describe(long).startswith('f({"text": "xxx') and describe(long).endswith("...)")


def test_side_by_side_lines_up_calls_of_the_same_function() -> None:
    mail = call("send_email", {"to": "a@b.c"})
    lines = tool_calls_side_by_side([WEATHER, mail], [call("delete_account", {}), WEATHER])
    assert lines[0].split() == ["reference", "|", "candidate"]
    assert lines[1].split(" | ") == [
        'get_weather({"city": "Paris", "unit": "C"})',
        'get_weather({"city": "Paris", "unit": "C"})',
    ]
    assert [side.strip() for side in lines[2].split(" ≠ ")] == [
        'send_email({"to": "a@b.c"})',
        "delete_account({})",
    ]
    assert tool_calls_side_by_side([WEATHER], None)[1].endswith("≠ (no call)")


def test_answer_text_appends_one_line_per_call() -> None:
    assert answer_text("Checking.", [WEATHER]) == (
        'Checking.\n-> get_weather({"city": "Paris", "unit": "C"})'
    )
    assert answer_text("", [WEATHER]) == '-> get_weather({"city": "Paris", "unit": "C"})'
    assert answer_text("Plain.", None) == "Plain."
