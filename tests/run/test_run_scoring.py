"""A test's equivalence configuration from its three scopes (run/scoring.py), and which requests
ask for JSON output."""

from __future__ import annotations

from pytest_slam.run.scoring import request_schema, scoped_config, wants_json


def test_scopes_narrowest_first_and_another_scorer_drops_the_options_below() -> None:
    top = {"by": "semantic", "model": "m", "at_least": 0.8, "then": ["judge"],
           "modules": {"tests/test_x.py": {"by": "fuzzy", "method": "token_set",
                                           "at_least": 0.7, "fail_below": 0.3}}}  # fmt: skip
    assert scoped_config(top, "tests/test_y.py", None) == {
        "by": "semantic",
        "model": "m",
        "at_least": 0.8,
        "then": ["judge"],
    }
    assert scoped_config(top, "tests/test_x.py", None) == {
        "by": "fuzzy",
        "method": "token_set",
        "at_least": 0.7,
        "fail_below": 0.3,
        "then": ["judge"],
    }
    assert scoped_config(top, "tests/test_x.py", {"at_least": 0.9}) == {
        "by": "fuzzy",
        "method": "token_set",
        "at_least": 0.9,
        "fail_below": 0.3,
        "then": ["judge"],
    }
    assert scoped_config(top, "tests/test_x.py", {"by": "exact"}) == {
        "by": "exact",
        "at_least": 0.7,
        "fail_below": 0.3,
        "then": ["judge"],
    }


def test_json_output_is_what_response_format_asks_for() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    parsed = {"type": "json_schema", "json_schema": {"name": "T", "schema": schema}}
    assert wants_json({"response_format": {"type": "json_object"}})
    assert wants_json({"response_format": parsed}) and request_schema({"response_format": parsed})
    assert request_schema({"response_format": parsed}) == schema
    assert not wants_json({"response_format": {"type": "text"}}) and not wants_json({})
    assert request_schema({"response_format": {"type": "json_object"}}) is None
    responses = {"text": {"format": {"type": "json_schema", "name": "T", "schema": schema}}}
    assert wants_json(responses) and request_schema(responses) == schema
    assert not wants_json({"text": {"format": {"type": "text"}}})
