"""The HTML report's data as written in one pass: each row's line of JSON made visible once, at C
speed unless it holds a control (the word diffs: the page's, test_report_worddiff_js.py)."""

from __future__ import annotations

import json

from pytest_slam.report.htmlcalls import shown, shown_json
from pytest_slam.util.textcodec import dumps


def test_a_line_is_the_string_by_string_walk_for_every_character() -> None:
    """Every character ``visible`` marks, whether json writes it as it is or as an escape (NUL,
    ESC, a form feed), sends the line through the walk; the line is then the walk's, and a clean
    line the same text written at once."""
    for code in [*range(0x10000), 0x1F600, 0xE0001]:
        char = chr(code)
        data = {f"key{char}": [f"a{char}b", 1, None]}
        assert shown_json(data) == dumps(shown(data), separators=(",", ":")), hex(code)
    clean = {"a": ["tab\there", 'quote " and \\ backslash', "é ✓ 😀"]}
    assert shown_json(clean) == json.dumps(clean, ensure_ascii=False, separators=(",", ":"))


def test_an_escaped_backslash_before_a_u_is_shown_as_written() -> None:
    """A model's ``\\u202e`` written out as six characters is text, not a control."""
    data = ["\\u202e and \\b"]
    assert json.loads(shown_json(data)) == data


def test_the_page_is_the_same_whatever_order_the_outcomes_come_in() -> None:
    """Workers finish in any order: each row puts its own runs and phases in order (a teardown's
    error beside its call), and the page does not move."""
    import copy

    import report_helpers as synth

    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.html import render_html

    outcomes = synth.outcomes()
    teardown = copy.deepcopy(outcomes[0])
    teardown.update(outcome="error", message="teardown failed")
    teardown["calls"][0]["text"] = "An answer of the teardown's own."
    outcomes.append(teardown)
    verdict = aggregate(outcomes, synth.run_info())
    assert render_html(verdict, outcomes[::-1]) == render_html(verdict, outcomes)
