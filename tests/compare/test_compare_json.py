"""Unit tests for the structured scorers (json, json_schema) and their JSON helpers."""

from __future__ import annotations

import json

import pytest

from pytest_slam.compare.jsontree import (
    NotJson,
    format_path,
    leaves,
    matches,
    parse_answer,
    parse_pattern,
)
from pytest_slam.compare.structured import JsonSchemaScorer, JsonScorer

REF = json.dumps({"id": 7, "name": "Ada", "items": [{"sku": "a", "ts": 1}, {"sku": "b", "ts": 2}]})


def test_identical_json_ignores_formatting_and_key_order() -> None:
    cand = json.dumps(json.loads(REF), indent=4, sort_keys=True)
    score = JsonScorer().score(cand, REF)
    assert (score.value, score.explanation) == (1.0, "all 6 leaves match")


def test_fraction_of_matching_leaves_and_first_paths() -> None:
    cand = {"id": 8, "name": "Ada", "items": [{"sku": "a", "ts": 1}, {"sku": "c", "ts": 2}]}
    score = JsonScorer().score(json.dumps(cand), REF)
    assert score.value == pytest.approx(4 / 6)
    assert score.explanation == (
        '4/6 leaves match; $.id expected 7, got 8; $.items[1].sku expected "b", got "c"'
    )


def test_ignore_paths_with_wildcards() -> None:
    cand = {"id": 99, "name": "Ada", "items": [{"sku": "a", "ts": 50}, {"sku": "b", "ts": 60}]}
    scorer = JsonScorer(ignore=["$.id", "items[*].ts"])
    assert scorer.score(json.dumps(cand), REF).value == 1.0
    assert JsonScorer(ignore=["$.id"]).score(json.dumps(cand), REF).value == pytest.approx(3 / 5)


def test_missing_and_unexpected_keys() -> None:
    score = JsonScorer().score('{"a": 1, "extra": true}', '{"a": 1, "b": [1, 2]}')
    assert score.value == pytest.approx(1 / 4)
    assert "$.b[0] missing (expected 1)" in score.explanation
    assert "$.extra unexpected (true)" in score.explanation


def test_numeric_tolerance_and_bool_is_not_number() -> None:
    assert JsonScorer().score('{"p": 0.30000001}', '{"p": 0.3}').value == 0.0
    assert JsonScorer(tolerance=1e-6).score('{"p": 0.30000001}', '{"p": 0.3}').value == 1.0
    assert JsonScorer(rel_tolerance=0.01).score('{"p": 101}', '{"p": 100}').value == 1.0
    assert JsonScorer().score('{"n": 1.0}', '{"n": 1}').value == 1.0
    assert JsonScorer(tolerance=1).score('{"f": true}', '{"f": 1}').value == 0.0
    assert JsonScorer().score('{"n": "1"}', '{"n": 1}').value == 0.0


def test_a_tolerance_compares_json_numbers_as_the_decimals_they_are_written_as() -> None:
    """0.85 and 0.9 are 0.05 apart; their floats are 0.05000000000000004 apart, which a
    tolerance of 0.05 (by hand, or as offered) used not to accept."""
    assert JsonScorer(tolerance=0.05).score('{"c": 0.85}', '{"c": 0.9}').value == 1.0
    assert JsonScorer(tolerance=0.05).score('{"c": 0.9}', '{"c": 0.85}').value == 1.0
    assert JsonScorer(tolerance=0.1).score('{"c": 0.3}', '{"c": 0.2}').value == 1.0
    assert JsonScorer(tolerance=0.049).score('{"c": 0.85}', '{"c": 0.9}').value == 0.0
    assert JsonScorer(tolerance=0.05).score('{"c": 0.851}', '{"c": 0.9}').value == 1.0
    assert JsonScorer(tolerance=0.05).score('{"c": 0.849}', '{"c": 0.9}').value == 0.0
    assert JsonScorer(tolerance=1e9).score('{"c": Infinity}', '{"c": 1}').value == 0.0


def test_an_integer_too_large_for_a_float_is_compared_not_a_crash() -> None:
    """A model may write a 400-digit number: floats overflow on it (math.isclose raised
    OverflowError out of the test's check); it is compared exactly, and by its gap."""
    huge = "9" * 400
    assert JsonScorer().score(f'{{"a": {huge}}}', f'{{"a": {huge}}}').value == 1.0
    assert JsonScorer().score(f'{{"a": {huge}}}', '{"a": 1}').value == 0.0
    assert JsonScorer(tolerance=0.5).score(f'{{"a": {huge}}}', '{"a": 1}').value == 0.0
    assert (
        JsonScorer(tolerance=2).score(f'{{"a": 1{huge}}}', f'{{"a": 1{huge[:-1]}8}}').value == 1.0
    )


def test_type_change_at_a_path_counts_both_sides() -> None:
    score = JsonScorer().score('{"a": {"b": 1}}', '{"a": 1}')
    assert score.value == 0.0
    assert "$.a missing" in score.explanation and "$.a.b unexpected" in score.explanation


def test_candidate_not_json_gives_parse_error() -> None:
    score = JsonScorer().score("I cannot answer that.", REF)
    assert score.value == 0.0
    assert score.explanation == ("candidate is not valid JSON: Expecting value at line 1 column 1")
    assert JsonScorer().score("", REF).explanation == "candidate is not valid JSON: empty answer"
    assert JsonScorer().score(REF, "nope").explanation.startswith("reference is not valid JSON")


def test_fenced_and_prose_wrapped_json_is_accepted_and_reported() -> None:
    fenced = f"Here you go:\n```json\n{REF}\n```\nHope this helps!"
    score = JsonScorer().score(fenced, REF)
    assert score.value == 1.0
    assert "extracted from a ``` fence" in score.explanation
    prose = f"Sure! The result is {REF} as requested."
    assert "surrounding prose" in JsonScorer().score(prose, REF).explanation
    strict = JsonScorer(lenient=False).score(fenced, REF)
    assert strict.value == 0.0 and "not valid JSON" in strict.explanation


def test_broken_fenced_json_reports_the_fence_error() -> None:
    score = JsonScorer().score('```json\n{"a": 1,}\n```', '{"a": 1}')
    assert score.value == 0.0
    assert score.explanation.startswith("candidate is not valid JSON: fenced block:")


def test_many_differences_are_capped_in_the_explanation() -> None:
    ref = json.dumps({f"k{i}": i for i in range(20)})
    cand = json.dumps({f"k{i}": -i - 1 for i in range(20)})
    score = JsonScorer().score(cand, ref)
    assert score.value == 0.0
    assert score.explanation.endswith("+15 more")


def test_huge_json_still_scores() -> None:
    ref = {"rows": [{"i": i, "v": i * 2} for i in range(20_000)]}
    cand = {"rows": [{"i": i, "v": i * 2 if i % 10 else -1} for i in range(20_000)]}
    score = JsonScorer().score(json.dumps(cand), json.dumps(ref))
    assert score.value == pytest.approx(1 - 2_000 / 40_000)


def test_everything_ignored_is_a_match_that_says_so() -> None:
    score = JsonScorer(ignore=["$"]).score('{"a": 1}', '{"a": 2}')
    assert (score.value, score.explanation) == (1.0, "every path is ignored")


def test_bad_ignore_pattern_and_tolerance() -> None:
    with pytest.raises(ValueError, match=r"cannot read ignore path '\$\.\.ts'"):
        JsonScorer(ignore=["$..ts"])
    with pytest.raises(ValueError, match="tolerance"):
        JsonScorer(tolerance=-1)


def test_paths_and_patterns() -> None:
    flat = leaves({"a b": [{}, {"c": None}], "d": []})
    assert set(flat) == {("a b", 0), ("a b", 1, "c"), ("d",)}
    assert format_path(("a b", 1, "c")) == '$["a b"][1].c'
    assert matches(parse_pattern('$["a b"][*]'), ("a b", 1, "c"))
    with pytest.raises(ValueError, match=r"cannot read ignore path '\$\.a\.0'"):
        parse_pattern("$.a.0")  # an index is written [0]
    assert matches(parse_pattern("*.c"), ("x", "c"))
    assert not matches(parse_pattern("items[0]"), ("items", "0"))


def test_parse_answer_policy() -> None:
    assert parse_answer("[1, 2]") == ([1, 2], "")
    assert parse_answer("text {broken then [3]")[0] == [3]
    with pytest.raises(NotJson, match="empty answer"):
        parse_answer("   ")


SCHEMA = {
    "type": "object",
    "required": ["label", "confidence"],
    "properties": {
        "label": {"enum": ["bug", "feature"]},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
}


def test_schema_valid_candidate_ignores_reference() -> None:
    score = JsonSchemaScorer(schema=SCHEMA).score('{"label": "bug", "confidence": 0.9}', "")
    assert (score.value, score.explanation) == (1.0, "valid against the schema")


def test_schema_errors_are_listed_with_paths() -> None:
    score = JsonSchemaScorer(schema=SCHEMA).score('{"label": "question", "confidence": 3}', "")
    assert score.value == 0.0
    assert score.explanation.startswith("2 schema error(s): ")
    assert "$.confidence: 3 is greater than the maximum of 1" in score.explanation
    assert "$.label: 'question' is not one of ['bug', 'feature']" in score.explanation


def test_schema_candidate_not_json_and_fenced() -> None:
    scorer = JsonSchemaScorer(schema=json.dumps(SCHEMA))
    assert scorer.score("bug", "").explanation.startswith("candidate is not valid JSON")
    fenced = scorer.score('```json\n{"label": "bug", "confidence": 1}\n```', "")
    assert fenced.value == 1.0 and "fence" in fenced.explanation


def test_schema_itself_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="invalid schema"):
        JsonSchemaScorer(schema={"type": "banana"})
    with pytest.raises(ValueError, match="schema is not valid JSON"):
        JsonSchemaScorer(schema="{not json")
