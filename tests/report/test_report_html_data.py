"""The HTML report's data as written in one pass: each row's line of JSON made visible once, at C
speed unless it holds a control, and a word diff computed once per distinct pair of answers."""

from __future__ import annotations

import json

from pytest_slam.records import Call, Outcome, Pair
from pytest_slam.report.diffview import diff_runs
from pytest_slam.report.htmlcalls import shown, shown_json
from pytest_slam.report.htmldata import _Diffs, pairs_data
from pytest_slam.util.textcodec import dumps, visible


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


def _outcome(n: int, text: str, reference: str) -> Outcome:
    call = Call("mini", "candidate", {"messages": [{"role": "user", "content": f"q{n}"}]},
                text=text)  # fmt: skip
    pair = Pair(call_index=0, key=f"k{n}", golden_file="g.json", reference_text=reference)
    return Outcome(nodeid=f"t.py::t{n}[mini]", test=f"t.py::t{n}", model="mini",
                   outcome="passed", calls=[call], pairs=[pair])  # fmt: skip


def test_a_repeated_pair_of_answers_shows_the_same_words_as_a_fresh_diff() -> None:
    """The diff of a pair of answers seen before (a label, the same reply) is remembered, a few
    hundred at most: each pair still shows the runs its own diff gives, controls as markers."""
    answers = [("Refund them now.", "Refund the customer."), ("No\u202e.", "Yes."), ("a b", "a c")]
    outcomes = [_outcome(n, *answers[n % 3]) for n in range(12)]
    diffs = _Diffs(size=2)  # cleared as it fills: found again, never stale
    for outcome in outcomes:
        (data,) = pairs_data([(outcome, outcome.pairs[0])], diffs)
        runs, ratio = diff_runs(visible(outcome.pairs[0].reference_text or ""),
                                visible(outcome.calls[0].text))  # fmt: skip
        assert data[6:8] == [f"{ratio:.0%}", runs]  # type: ignore[index]
    assert len(diffs._known) <= 2


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
