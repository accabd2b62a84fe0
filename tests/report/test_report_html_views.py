"""The HTML report at size: the gate as its headline, failures first, filters, search, the test x
model matrix and every pair reachable page by page, checked in the page and in real headless
Chromium, driven by the address (``#outcome=failures&model=...``) as a user's link would."""

from __future__ import annotations

import copy
import json
from html.parser import HTMLParser
from typing import Any

import pytest
import report_helpers as synth
from html_helpers import chromium, report_data
from slam_helpers import needs_chromium

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.html import PAGE_ROWS, render_html, write_html
from pytest_slam.report.htmldata import anchor

FAILURES = {"failed", "error", "candidate_failed", "not_swapped"}


def _page(gate: Gate, **evaluate_args: Any) -> str:
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    return render_html(apply_gate(verdict, evaluate(gate, verdict, **evaluate_args)), outcomes)


def test_the_gate_is_the_headline_with_its_breaches() -> None:
    page = _page(Gate(min_mean_equivalence=0.8))
    head = page.split('<section id="headline"')[1].split("</section>")[0]
    assert head.startswith(' class="headline gate-FAIL" data-gate="FAIL">')
    assert 'Model swap verdict: gate <span class="word">FAIL</span>' in head
    assert "<li>smollm2-135m: min_mean_equivalence: 0.495 is below the minimum 0.800</li>" in head
    assert "4 test(s) x 3 model(s): 1 error, 2 failed, 8 passed, 1 skipped" in head
    assert page.index('id="headline"') < page.index('<table id="models">')  # before all else
    assert "<li>gate: FAIL</li>" not in page  # no longer a bullet under the cost notes


@pytest.mark.parametrize(
    ("gate", "args", "word", "reason"),
    [
        (Gate(min_mean_equivalence=0.4), {}, "PASS", None),
        (Gate(), {}, "not configured", "no [tool.slam.gate] rule applied"),
        (Gate(min_mean_equivalence=0.4), {"incomplete": "the run was interrupted"},
         "INCOMPLETE", "the run was interrupted"),
    ],
)  # fmt: skip
def test_every_gate_status_heads_the_page(gate, args, word, reason) -> None:
    head = _page(gate, **args).split('<section id="headline"')[1].split("</section>")[0]
    assert f'data-gate="{word}"' in head and f'<span class="word">{word}</span>' in head
    assert (reason is None) == ('<ul id="breaches">' not in head)
    assert reason is None or reason in head


def test_rows_come_failures_first_and_hold_every_pair() -> None:
    rows, pairs = report_data(_page(Gate(min_mean_equivalence=0.8)))
    outcomes = [r[2] for r in rows["rows"]]
    assert outcomes == ["error", "failed", "failed", *["passed"] * 8, "skipped"]
    assert [rows["models"][r[1]] for r in rows["rows"][:3]] == [synth.SMOL] * 3
    assert (
        len(pairs)
        == sum(r[7] for r in rows["rows"])
        == sum(len(o["pairs"]) for o in synth.outcomes())
    )


class View(HTMLParser):
    """What a user sees of the rows section in Chromium's DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []  # the table's drawn rows, cell texts
        self.matrix: list[tuple[str, dict[str, tuple[str, str]]]] = []  # test, model -> cell
        self.open: list[str] = []  # ids of the answer blocks drawn open
        self.hidden: set[str] = set()  # ids of hidden tables
        self.body: dict[str, str | None] = {}
        self.texts: list[str] = []
        self._cell: list[str] | None = None
        self._where = ""
        self._model = ""
        self._href = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "body":
            self.body = a
        elif tag == "table":
            self._where = a.get("id") or ""
            if "hidden" in a:
                self.hidden.add(self._where)
        elif tag == "tr" and self._where == "tests" and "data-index" in a:
            self.rows.append([])
        elif tag == "tr" and self._where == "matrix" and "data-test" in a:
            self.matrix.append((a["data-test"] or "", {}))
        elif tag == "td" and self._where == "tests" and self.rows and "colspan" not in a:
            self._cell = []
        elif tag == "td" and self._where == "matrix" and "data-model" in a:
            self._model, self._cell = a["data-model"] or "", []
        elif tag == "a" and self._model:
            self._href = a.get("href") or ""
        elif tag == "details" and "open" in a:
            self.open.append(a.get("id") or "")

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        self.texts.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._where = ""
        if tag != "td" or self._cell is None:
            return
        text = "".join(self._cell).strip()
        if self._model:
            self.matrix[-1][1][self._model] = (text, self._href)
            self._model = self._href = ""
        else:
            self.rows[-1].append(text)
        self._cell = None


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    verdict = apply_gate(verdict, evaluate(Gate(min_mean_equivalence=0.8), verdict))
    return write_html(tmp_path_factory.mktemp("views") / "report.html", verdict, outcomes)


def _view(page, hash_: str, tmp_path) -> View:
    view = View()
    view.feed(chromium(f"{page.as_uri()}#{hash_}", "--dump-dom", tmp_path=tmp_path))
    assert view.body.get("data-ready") == "1" and view.body.get("data-answers") == "1"
    return view


@needs_chromium
def test_chromium_filters_by_outcome_model_and_test(report, tmp_path) -> None:
    view = _view(report, f"outcome=failures&model={synth.SMOL}", tmp_path)
    assert [(r[1], r[2]) for r in view.rows] == [(synth.SMOL, "error"), (synth.SMOL, "failed"),
                                                 (synth.SMOL, "failed")]  # fmt: skip
    assert "rows 1-3 of 3 (12 in all)" in view.texts
    view = _view(report, "test=SUMMARIZE", tmp_path)  # a part of the test id, any case
    assert {r[0] for r in view.rows} == {"tests/test_support.py::test_summarize"}
    assert sorted(r[1] for r in view.rows) == sorted(synth.MODELS)
    view = _view(report, "outcome=skipped", tmp_path)
    assert [(r[1], r[2]) for r in view.rows] == [(synth.MINI, "skipped")]
    view = _view(report, "verdict=none&outcome=passed&model=nobody", tmp_path)
    assert view.rows == [] and view.body.get("data-shown") == "0"


@needs_chromium
def test_chromium_search_reads_tests_messages_and_answers(report, tmp_path) -> None:
    view = _view(report, "q=maybe%20later", tmp_path)  # only in one candidate's answer
    assert [(r[0].split("::")[1], r[1]) for r in view.rows] == [("test_summarize", synth.SMOL)]
    view = _view(report, "q=refund%20amount", tmp_path)  # only in one failure's message
    assert [r[1] for r in view.rows] == [synth.SMOL] and "AssertionError" in view.rows[0][-1]
    view = _view(report, "q=no%20such%20words%20anywhere", tmp_path)
    assert view.rows == []


@needs_chromium
def test_chromium_draws_the_test_by_model_matrix(report, tmp_path) -> None:
    view = _view(report, "view=matrix", tmp_path)
    assert "tests" in view.hidden and "matrix" not in view.hidden
    assert len(view.matrix) == len(synth.TESTS)
    first, cells = view.matrix[0]  # failures first: the test where smollm2 errs
    assert first == "tests/test_support.py::test_extract"
    assert cells[synth.SMOL][0].split()[0] == "error"  # then, opened, why
    for test, row in view.matrix:
        assert set(row) == set(synth.MODELS)
        for model, (text, href) in row.items():
            assert text.split()[0] in {"passed", "failed", "error", "skipped"}
            assert href == f"#view=matrix&{anchor(test, model)}"  # its pair, from this view
    summarize = dict(view.matrix)["tests/test_support.py::test_summarize"]
    assert summarize[synth.QWEN][0].startswith("passed 0.85")  # outcome, mean equivalence (2 pairs)
    view = _view(report, "view=matrix&outcome=failures", tmp_path)  # tests with a failure,
    assert [t.split("::")[1] for t, _ in view.matrix] == ["test_extract", "test_reply",
                                                          "test_summarize"]  # fmt: skip
    assert dict(view.matrix)["tests/test_support.py::test_summarize"][synth.QWEN][0].startswith(
        "passed"
    )  # with every model's cell
    view = _view(report, f"view=matrix&model={synth.QWEN}", tmp_path)
    assert all(set(row) == {synth.QWEN} for _, row in view.matrix)


@needs_chromium
def test_chromium_reaches_every_pair_page_by_page(tmp_path) -> None:
    """More rows than a page holds: the last row's link opens it on its page, answer drawn."""
    base = synth.qwen_outcomes()[0]
    outcomes = []
    for i in range(PAGE_ROWS + 30):
        o = copy.deepcopy(base)
        o["test"] = f"tests/test_many.py::test_{i:03d}"
        o["nodeid"] = f"{o['test']}[{synth.QWEN}]"
        o["calls"][0]["text"] = f"Priority: high. Route to billing desk {i}."
        outcomes.append(o)
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    page = write_html(tmp_path / "many.html", verdict, outcomes)
    view = _view(page, "", tmp_path)
    assert len(view.rows) == PAGE_ROWS and f"rows 1-{PAGE_ROWS} of {PAGE_ROWS + 30} " in " ".join(
        view.texts
    )
    view = _view(page, "page=2", tmp_path)
    assert [r[0] for r in view.rows][-1] == "tests/test_many.py::test_129" and len(view.rows) == 30
    last = anchor("tests/test_many.py::test_129", synth.QWEN)
    view = _view(page, last, tmp_path)  # a link to one pair: its page, opened
    assert view.open == [last] and "desk 129" in "".join(view.texts)
    assert " page 2 of 2 " in view.texts


# ids whose text order differs from a reader's: [2] [20] [103] [1039] [1046] ...
NATURAL_IDS = sorted({*range(1, 320, 2), 103, 1039, 1046, 20})


def _natural_report(tmp_path) -> Any:
    """More failures than a page holds, each with the product's assertion text; ids that sort
    differently as text and as numbers."""
    base = synth.qwen_outcomes()[0]
    outcomes = []
    for i in sorted(NATURAL_IDS, key=str):  # handed over in text order: the report reorders
        o = copy.deepcopy(base)
        o["test"] = f"tests/test_many.py::test_case[{i}]"
        o["nodeid"] = f"tests/test_many.py::test_case[{i}-{synth.QWEN}]"
        o["calls"][0]["text"] = f"Priority: high. Route to billing desk {i}, then close it."
        if i % 3:  # two thirds fail on the product's own assertion
            o["outcome"] = "failed"
            o["message"] = f"AssertionError: the triage said low for case {i}"
        outcomes.append(o)
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    return write_html(tmp_path / "natural.html", verdict, outcomes)


ROWS_JS = """Array.from(document.querySelectorAll('#tests tbody tr[data-index]')).map(
    function (tr) { return Array.from(tr.cells).map(function (c) { return c.textContent; }); })"""


@needs_chromium
def test_chromium_opening_a_pair_keeps_the_view_and_back_returns_to_it(tmp_path) -> None:
    """A filtered view on its second page; a row's link opens its answers in that view; the
    browser's back comes to the same filter and page. Failed rows say the product's assertion;
    ids come in a reader's order (by default and sorted by test)."""
    from review_helpers import Browser
    from slam_helpers import wait_for

    page = _natural_report(tmp_path)
    failed = [i for i in NATURAL_IDS if i % 3]
    assert len(failed) > PAGE_ROWS  # two pages of failures
    browser = Browser(tmp_path / "profile")
    try:
        view = f"outcome=failures&model={synth.QWEN}&page=2"
        browser.open(f"{page.as_uri()}#{view}")
        wait_for(lambda: browser.js("document.body.dataset.answers") == "1", 60, "the answers")
        before = browser.js(ROWS_JS)
        ids = [int(r[0].split("[")[1].rstrip("]")) for r in before]
        assert ids == failed[PAGE_ROWS:]  # page 2 of the failures, in natural order
        assert all(r[2] == "failed" for r in before)
        assert before[0][-1] == f"AssertionError: the triage said low for case {ids[0]}"
        assert browser.js("document.getElementById('page').textContent") == " page 2 of 2 "

        browser.js("document.querySelectorAll('#tests tbody tr[data-index] a')[2].click()")
        target = anchor(f"tests/test_many.py::test_case[{ids[2]}]", synth.QWEN)
        wait_for(lambda: browser.js(f"!!document.getElementById('{target}')"), 60, "the pair")
        assert browser.js("location.hash") == f"#{view}&{target}"
        assert browser.js("document.getElementById('f-outcome').value") == "failures"
        assert browser.js("document.getElementById('f-model').value") == synth.QWEN
        assert browser.js("document.getElementById('page').textContent") == " page 2 of 2 "
        assert f"desk {ids[2]}," in browser.js(f"document.getElementById('{target}').textContent")

        browser.js("history.back()")
        wait_for(lambda: browser.js("location.hash") == f"#{view}", 60, "back")
        wait_for(lambda: browser.js(ROWS_JS)[0] == before[0], 60, "the same rows")
        assert [r[0] for r in browser.js(ROWS_JS)] == [r[0] for r in before]
        assert browser.js("document.getElementById('f-outcome').value") == "failures"
        assert browser.js("document.getElementById('page').textContent") == " page 2 of 2 "

        browser.js("location.hash = 'sort=test:desc'")  # sorted by test: still a reader's order
        sorted_by = "document.getElementById('tests').getAttribute('data-sorted-by')"
        wait_for(lambda: browser.js(sorted_by) == "test:desc", 60, "the sort")
        top = [int(r[0].split("[")[1].rstrip("]")) for r in browser.js(ROWS_JS)]
        assert top == sorted(NATURAL_IDS, reverse=True)[:PAGE_ROWS]

        browser.js("location.hash = 'view=matrix'")  # a cell shows the start of the answer
        wait_for(lambda: browser.js("document.querySelectorAll('#matrix td .start').length"), 60,
                 "the matrix's answers")  # fmt: skip
        cell = browser.js("[document.querySelector('#matrix td .start').textContent,"
                          " document.querySelector('#matrix td.cell').title]")  # fmt: skip
        assert cell[0].startswith("Priority: high. Route to billing desk ")
        assert cell[1].endswith(", then close it.")  # the whole of a short answer on hover
        header = browser.js("document.querySelector('#matrix th[data-model] small').textContent")
        passed = len(NATURAL_IDS) - len(failed)
        share = f"{passed / len(NATURAL_IDS):.0%}"
        assert header == f"{share} ({passed}/{len(NATURAL_IDS)})"
    finally:
        browser.close()


@needs_chromium
def test_chromium_a_matrix_cell_opens_to_the_whole_answer_and_the_reason(report, tmp_path) -> None:
    """A grid cell shows the answer's start; opened, every call's whole answer and the row's
    reason (its failure message) are there, as written, not only on hover or in the table."""
    import html
    import re

    dom = chromium(f"{report.as_uri()}#view=matrix", "--dump-dom", tmp_path=tmp_path)
    cell = re.search(
        rf'<tr data-test="tests/test_support.py::test_summarize">.*?'
        rf'<td class="cell failed" data-model="{re.escape(synth.SMOL)}"[^>]*>(.*?)</td>',
        dom,
        re.S,
    )
    assert cell is not None, "no smollm2 cell for test_summarize"
    more = re.search(r'<details class="more">(.*?)</details>', cell.group(1), re.S)
    assert more is not None, cell.group(1)
    answer = re.search(r'<pre class="answer">(.*?)</pre>', more.group(1), re.S)
    reason = re.search(r'<pre class="message">(.*?)</pre>', more.group(1), re.S)
    assert answer is not None and reason is not None, more.group(1)
    assert html.unescape(answer.group(1)) == (
        "call 1:\nCustomer charged twice.\n\ncall 2:\nRefund maybe later."
    )
    assert html.unescape(reason.group(1)) == "AssertionError: summary misses the refund amount"


def test_a_transcript_shows_a_models_tool_call_ids_with_their_controls_marked() -> None:
    """A tool call's id and a tool result's id come from the model: a bidi override in one is a
    marker in the page, never applied (as every other text of the transcript), once the line
    of the page's JSON is written (``shown_json``)."""
    from pytest_slam.records import Call
    from pytest_slam.report.htmlcalls import shown_json
    from pytest_slam.report.htmldata import transcript_step

    tool_call = {"id": "c\u202e1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    first = Call("mini", "candidate", {"messages": [{"role": "user", "content": "go"}]},
                 tool_calls=[tool_call])  # type: ignore[list-item]  # fmt: skip
    result = {"role": "tool", "tool_call_id": "c\u202e1", "content": "done"}
    second = Call("mini", "candidate", {"messages": [
        {"role": "user", "content": "go"}, {"role": "assistant", "tool_calls": [tool_call]}, result
    ]}, text="ok")  # fmt: skip
    steps = json.loads(
        shown_json(transcript_step([first, second], 0) + transcript_step([first, second], 1))
    )
    shown = " ".join(str(who) for who, _ in steps)  # type: ignore[misc]
    assert "\u202e" not in shown and "tool call c⟨U+202E⟩1" in shown
    assert "tool result c⟨U+202E⟩1" in shown


def test_a_calls_raw_request_and_answer_mark_a_models_controls_and_repeat_nothing() -> None:
    """The call as its pair's line carries it (issue 52 item 5, issue 53: the page's script
    derives its views, ``calls.js``) shows every string, keys too, with bidi controls as markers;
    a later call keeps only the messages its previous call had not sent, and its text, when the
    pair already carries it as the candidate's answer, is the number 1, not a second copy."""
    from pytest_slam.records import Call
    from pytest_slam.report.htmlcalls import call_line, shown_json
    from pytest_slam.util.textcodec import visible

    user = {"role": "user", "content": "go\u202e"}
    first = Call("mini", "candidate", {"messages": [user], "x\u202e": "y\u202e"}, text="a\u202e")
    second = Call("mini", "candidate", {"messages": [
        user, {"role": "assistant", "content": "a\u202e"}, {"role": "user", "content": "more"}
    ]}, text="b", prompt_tokens=1234, completion_tokens=5, e2e_ms=412.0)  # fmt: skip
    calls = [first, second]
    lines = json.loads(
        shown_json([call_line(calls, i, i - 1, i - 1, visible(calls[i].text))[0] for i in (0, 1)])
    )
    assert "\u202e" not in str(lines)
    one, two = lines
    assert one[:5] == [
        -1, 0, 0, 0, {"messages": [{"role": "user", "content": "go⟨U+202E⟩"}], "x⟨U+202E⟩": "y⟨U+202E⟩"}
    ]  # fmt: skip
    assert one[6] == "a⟨U+202E⟩"  # its shown text differs from the raw one: carried
    assert two[:4] == [0, 1, 1, 1]  # the first message: call 1's
    assert two[4]["messages"] == [{"role": "assistant", "content": "a⟨U+202E⟩"},
                                  {"role": "user", "content": "more"}]  # fmt: skip
    assert two[6] == 1 and two[9:11] == [1234, 5] and two[13:16] == [None, 412, 0]


@needs_chromium
def test_chromium_walks_the_shown_rows_answers_with_j_k_the_arrows_and_buttons(
    report, tmp_path
) -> None:
    """Previous/next (issue 52 item 5): j or the right arrow opens the next row's answers in the
    order the filters show, k or the left arrow the previous one, one row open at a time, the
    filters kept; each opened row has the same two buttons, the last one's next disabled."""
    from review_helpers import Browser
    from slam_helpers import wait_for

    rows, _ = report_data(report.read_text())
    view = f"model={synth.SMOL}"
    shown = [r[5] for r in rows["rows"] if rows["models"][r[1]] == synth.SMOL and r[7]]
    assert len(shown) >= 3
    opened = "[...document.querySelectorAll('details.answers[open]')].map(d => d.id)"
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(f"{report.as_uri()}#{view}")
        wait_for(lambda: browser.js("document.body.dataset.answers") == "1", 60, "the answers")

        def at(i: int) -> None:
            wait_for(lambda: browser.js(opened) == [shown[i]], 60, f"row {i} open alone")
            assert browser.js("location.hash") == f"#{view}&{shown[i]}"
            assert browser.js("document.getElementById('f-model').value") == synth.SMOL

        browser.key("j", "KeyJ", 74, "j")  # nothing open yet: the first row
        at(0)
        browser.key("j", "KeyJ", 74, "j")
        at(1)
        browser.key("k", "KeyK", 75, "k")
        at(0)
        browser.key("ArrowRight", "ArrowRight", 39)
        at(1)
        browser.js(f"document.querySelector('#{shown[1]} button.walk-next').click()")
        at(2)
        browser.key("ArrowLeft", "ArrowLeft", 37)
        at(1)
        for i in range(2, len(shown)):
            browser.key("j", "KeyJ", 74, "j")
            at(i)
        browser.key("j", "KeyJ", 74, "j")  # past the last: it stays
        at(len(shown) - 1)
        last = f"document.querySelector('#{shown[-1]} p.walk')"
        assert browser.js(f"{last}.querySelector('.walk-next').disabled") is True
        assert browser.js(f"{last}.querySelector('.walk-prev').disabled") is False
        assert browser.js(f"{last}.textContent").endswith(
            f"{len(shown)} of {len(shown)} with answers"
        )
    finally:
        browser.close()


@needs_chromium
def test_chromium_different_answers_only_hides_the_rows_that_match_the_reference(tmp_path) -> None:
    """The "different answers only" filter (issue 52 item 5, promptfoo's "different only"): a
    candidate that answered the reference's words (spacing aside) is hidden, as is a row with no
    answer; a different text, a missing golden answer or a failed call stays; the address keeps it
    and "clear" drops it."""
    outcomes = synth.outcomes()
    golden = synth.GOLDEN["k_triage"][0]
    for o in outcomes:  # qwen answers test_triage as the reference did, spaced otherwise
        if o["model"] == synth.QWEN and o["test"].endswith("test_triage"):
            o["calls"][0]["text"] = "  " + golden.replace(" ", "\n ") + "\n"
    verdict = aggregate(outcomes, synth.run_info())
    page = write_html(tmp_path / "report.html", verdict, outcomes)
    view = _view(page, "different=1", tmp_path)
    shown = {(r[0].split("::")[1], r[1]) for r in view.rows}
    every = {(o["test"].split("::")[1], o["model"]) for o in outcomes}
    no_answer = {(o["test"].split("::")[1], o["model"]) for o in outcomes if not o["pairs"]}
    assert no_answer and ("test_triage", synth.QWEN) not in shown
    same = {
        (o["test"].split("::")[1], o["model"])
        for o in outcomes
        if o["pairs"] and all(
            not p["missing"] and not o["calls"][p["call_index"]]["error"]
            and o["calls"][p["call_index"]]["text"].split() == p["reference_text"].split()
            for p in o["pairs"]
        )
    }  # fmt: skip
    assert {("test_triage", synth.QWEN), ("test_triage", synth.MINI)} <= same  # as the golden
    assert shown == every - no_answer - same
    assert ("test_reply", synth.SMOL) in shown  # its golden answer is missing
    assert 'id="f-different" name="different" type="checkbox"' in page.read_text()

    from review_helpers import Browser
    from slam_helpers import wait_for

    browser = Browser(tmp_path / "profile2")
    try:
        browser.open(f"{page.as_uri()}#different=1")
        assert browser.js("document.getElementById('f-different').checked") is True
        browser.js("document.getElementById('clear').click()")
        wait_for(lambda: browser.js("document.body.dataset.shown") == str(len(every)), 60, "all")
        assert browser.js("document.getElementById('f-different').checked") is False
        browser.js("document.getElementById('f-different').click()")
        wait_for(lambda: browser.js("location.hash") == "#different=1", 60, "the address")
        assert browser.js("document.body.dataset.shown") == str(len(shown))
    finally:
        browser.close()
