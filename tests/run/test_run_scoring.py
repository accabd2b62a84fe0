"""A test's equivalence configuration from its three scopes (run/score/scoring.py), and which requests
ask for JSON output."""

from __future__ import annotations

from pytest_slam.run.score.scoring import request_schema, scoped_config, wants_json


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
        "by": "exact",  # fuzzy's bands are on fuzzy's scale: not exact's
        "then": ["judge"],
    }


def test_another_scorer_or_other_bands_do_not_inherit_the_error_measured_below() -> None:
    # a band_error was measured for fuzzy's bands: a semantic 0.85 is not "equivalent, error
    # 0.01" by them, and bands a module moves were never measured at all
    error = {"pass": 0.01, "fail": 0.02, "n": 900}
    judged = {"pass": 0.03, "n": 400}
    top = {"by": "fuzzy", "method": "ratio", "at_least": 0.8, "fail_below": 0.4,
           "band_error": error, "judge_error": judged, "then": ["judge"],
           "modules": {"tests/test_s.py": {"by": "semantic"},
                       "tests/test_b.py": {"at_least": 0.9},
                       "tests/test_f.py": {"fail_below": 0.3},
                       "tests/test_m.py": {"at_least": 0.9, "band_error": {"pass": 0.0}},
                       "tests/test_o.py": {"method": "token_set"}}}  # fmt: skip
    semantic = scoped_config(top, "tests/test_s.py", None)
    assert semantic == {"by": "semantic", "then": ["judge"], "judge_error": judged}
    moved = scoped_config(top, "tests/test_b.py", None)
    assert "band_error" not in moved and moved["at_least"] == 0.9 and moved["fail_below"] == 0.4
    assert "band_error" not in scoped_config(top, "tests/test_f.py", None)
    assert scoped_config(top, "tests/test_m.py", None)["band_error"] == {"pass": 0.0}  # its own
    assert scoped_config(top, "tests/test_o.py", None)["band_error"] == error  # same bands
    assert scoped_config(top, "tests/test_y.py", None)["band_error"] == error
    # a test's mark is a layer too
    assert "band_error" not in scoped_config(top, "tests/test_y.py", {"at_least": 0.95})
    marked = scoped_config(top, "tests/test_y.py", {"by": "semantic", "at_least": 0.9})
    assert marked == {"by": "semantic", "at_least": 0.9, "then": ["judge"], "judge_error": judged}


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
