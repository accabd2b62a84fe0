"""The HTML report: self-contained, escaped, with diffs; and rendered by real headless Chromium."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
import report_helpers as synth
from html_helpers import chromium, report_data, sides
from slam_helpers import needs_chromium

from pytest_slam.records import Call
from pytest_slam.report.aggregate import ModelRow, aggregate
from pytest_slam.report.diffview import Segment, diff_and_similarity
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.html import render_html, write_html
from pytest_slam.report.terminal import render_table
from pytest_slam.review.verdicts import dump_lines, make_verdict

REVIEWS = {synth.QWEN: ("win", "tie", "tie"), synth.SMOL: ("loss", "both_bad"), "gone": ("win",)}


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    """The synthetic run, its golden file with `slam review` verdicts beside it (one of a model
    this run did not select)."""
    folder = tmp_path_factory.mktemp("html")
    outcomes = synth.outcomes()
    for pair in (p for o in outcomes for p in o["pairs"]):
        pair["golden_file"] = str(folder / "support.json")
    verdicts = [make_verdict(key=f"k{i}", model=model, answer_hash="a", reference_hash="r",
                             verdict=v, reviewer="ana")
                for model, seen in REVIEWS.items() for i, v in enumerate(seen)]  # fmt: skip
    (folder / "support.review.jsonl").write_text(dump_lines(verdicts), encoding="utf-8")
    verdict = aggregate(outcomes, synth.run_info())
    verdict = apply_gate(verdict, evaluate(Gate(min_mean_equivalence=0.8), verdict))
    return write_html(folder / "report.html", verdict, outcomes)


def test_self_contained_no_network(report_html) -> None:
    page = report_html.read_text()
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+[^\s\"'<>]*", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched
    assert "<link" not in page and " src=" not in page.replace("src=x", "")
    assert page.count("<script>") == 1 and page.count("<style>") == 1


def test_answers_with_html_are_packed_text(report_html) -> None:
    """Answers travel packed and the script sets them as text: never markup in the page."""
    page = report_html.read_text()
    assert '<script>alert("pwned")' not in page and "<img src=x" not in page
    _, pairs = report_data(page)
    assert any(synth.XSS in sides(p)[1] for p in pairs)


def test_charts_and_tables_are_in_the_page(report_html) -> None:
    page = report_html.read_text()
    assert page.count('<g class="point') == 4 and page.count('<g class="point reference"') == 1
    assert page.count('<g class="box e2e"') == 4 and page.count('<g class="box ttft"') == 4
    rows, pairs = report_data(page)
    assert len(rows["rows"]) == 12 and len(pairs) == sum(len(o["pairs"]) for o in synth.outcomes())
    assert '<td class="FAIL">FAIL</td>' in page and '<td class="PASS">PASS</td>' in page


def test_model_table_shows_95_intervals_and_each_pair_of_candidates_once(report_html) -> None:
    page = report_html.read_text()
    assert re.search(r'<td class="equivalence">0\.87 \[0\.8\d, 0\.9\d\]</td>', page)  # qwen
    # smollm2: 1 of 4, its 95% interval under the counts
    pass_rate = r'<td class="pass-rate">25% \(1/4\)<br><small>\[0\.00, 0\.\d\d\]</small></td>'
    assert re.search(pass_rate, page)
    assert '<td class="pass-rate">-</td>' in page  # the reference is the yardstick
    listed = re.findall(r"<li>(.*?)</li>", page.split('<ul id="comparisons">')[1].split("</ul>")[0])
    assert len(listed) == 6  # 3 candidate pairs x (equivalence, pass rate), each once
    assert listed[0].startswith("qwen2.5-1.5b better than smollm2-135m on equivalence (+0.218 [")
    assert "qwen2.5-1.5b and gpt-4o-mini: cannot tell apart on pass rate" in listed[-1]
    assert "paired:" not in page and "equivalence 95% interval" not in page  # not twice


def test_human_review_verdicts_per_model_with_wilson_intervals(report_html) -> None:
    page = report_html.read_text()
    table = page.split('<table id="review">')[1].split("</table>")[0]
    rows = re.findall(r'<tr data-model="([^"]+)">(.*?)</tr>', table)
    assert [m for m, _ in rows] == [synth.QWEN, synth.SMOL]  # "gone" is not in this run
    cells = dict((m, re.findall(r"<td>(.*?)</td>", r)) for m, r in rows)
    # win, tie, loss, both bad, not worse; 1 of 3 is 33% [6%-79%] (Wilson)
    assert cells[synth.QWEN] == [synth.QWEN, "3", "33% [6%-79%]", "67% [21%-94%]", "0% [0%-56%]",
                                 "0% [0%-56%]", "100% [44%-100%]"]  # fmt: skip
    assert cells[synth.SMOL][-1] == "0% [0%-66%]"
    assert "(1 reviewer(s))" in page


def test_no_review_file_means_no_review_section() -> None:
    outcomes = synth.qwen_outcomes()
    page = render_html(aggregate(outcomes, synth.run_info((synth.QWEN,))), outcomes)
    assert "Human review" not in page and '<table id="review">' not in page


def test_tool_calls_of_both_sides_are_side_by_side() -> None:
    outcomes = synth.qwen_outcomes()[:1]
    weather = {"id": "c1", "type": "function",
               "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}  # fmt: skip
    delete = {"id": "c2", "type": "function",
              "function": {"name": "delete_account", "arguments": '{"user": 7}'}}  # fmt: skip
    outcomes[0]["calls"][0]["tool_calls"] = [delete]
    outcomes[0]["pairs"][0]["reference_tool_calls"] = [weather]
    page = render_html(aggregate(outcomes, synth.run_info((synth.QWEN,))), outcomes)
    # one "-> name({arguments})" line per call under the text; the word diff covers them too
    ref, cand = sides(report_data(page)[1][0])
    assert ref == ('Priority: high. Route to billing.\n-> <del>get_weather</del>'
                   '({"<del>city</del>": <del>"Paris"</del>})')  # fmt: skip
    assert cand == ('Priority: high. Route to billing.\n-> <ins>delete_account</ins>'
                    '({"<ins>user</ins>": <ins>7</ins>})')  # fmt: skip


def test_a_judge_that_ran_is_one_cost_line_in_the_page_and_the_table() -> None:
    outcomes = synth.qwen_outcomes() + synth.mini_outcomes()
    for o in outcomes[:2] + outcomes[4:5]:
        o["calls"].append(Call(model="gpt-4o", role="judge", request={}, text="Rating: [[8]]",
                               prompt_tokens=500, completion_tokens=6, e2e_ms=400.0,
                               cost_usd=0.0026).as_dict())  # fmt: skip
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN, synth.MINI)))
    line = (f"judge for {synth.QWEN}, {synth.MINI}: 3 call(s), $0.0078, 1500+18 tokens, "
            "E2E p50 400 ms; not counted in the candidate figures")  # fmt: skip
    assert render_html(verdict, outcomes).count(f"<li>{line}</li>") == 1
    table = " ".join(" ".join(render_table(verdict, width=200)).split())
    assert table.count("judge for ") == 1 and line in table


def test_side_by_side_diff_marks_words() -> None:
    left, right, _ = diff_and_similarity("Refund approved in 3 days.", "Refund denied in 3 days!")
    assert left == [Segment("same", "Refund "), Segment("del", "approved "),
                    Segment("same", "in 3 days"), Segment("del", ".")]  # fmt: skip
    assert right == [Segment("same", "Refund "), Segment("ins", "denied "),
                     Segment("same", "in 3 days"), Segment("ins", "!")]  # fmt: skip
    assert "".join(s.text for s in left) == "Refund approved in 3 days."


def test_diff_in_the_page_uses_ins_and_del() -> None:
    outcomes = synth.qwen_outcomes()[:1]
    page = render_html(aggregate(outcomes, synth.run_info((synth.QWEN,))), outcomes)
    # reference "Priority: high. Route to billing." vs candidate "... Route to billing."
    assert sides(report_data(page)[1][0]) == ("Priority: high. Route to billing.",) * 2
    smol = synth.smol_outcomes()[:1]
    page = render_html(aggregate(smol, synth.run_info((synth.SMOL,))), smol)
    assert sides(report_data(page)[1][0]) == ("Priority: high. <del>Route to billing</del>.",
                                              "Priority: high. <ins>Billing</ins>.")  # fmt: skip


class _Dom(HTMLParser):
    """Collects what the checks need from Chromium's serialized DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, str]] = {}
        self.rows: list[list[str | None]] = []
        self.in_tests = False
        self.tags: dict[str, int] = {}
        self.open_details = 0

    def handle_starttag(self, tag: str, attrs: list) -> None:
        a = dict(attrs)
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag == "table":
            self.tables[a.get("id", "")] = a
            self.in_tests = a.get("id") == "tests"
        elif tag == "tr" and self.in_tests and "data-index" in a:
            self.rows.append([])
        elif tag == "td" and self.in_tests and self.rows:
            self.rows[-1].append(a.get("data-sort"))
        elif tag == "details" and "open" in a:
            self.open_details += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.in_tests = False


@needs_chromium
def test_chromium_runs_the_sort_script_from_the_url_hash(report_html, tmp_path) -> None:
    dom = _Dom()
    page = chromium(f"{report_html.as_uri()}#sort=e2e:desc&open=all", "--dump-dom",
                    tmp_path=tmp_path)  # fmt: skip
    dom.feed(page)
    tests = dom.tables["tests"]
    assert tests.get("data-ready") == "1" and tests.get("data-sorted-by") == "e2e:desc"
    e2e = [row[6] for row in dom.rows]  # column 7: E2E p95; empty values sort last
    measured = [float(v) for v in e2e if v]
    assert measured == sorted(measured, reverse=True) and measured[0] == 2500.0
    assert e2e[len(measured) :] == [""] * (len(e2e) - len(measured))
    assert dom.open_details == len(synth.outcomes()) - 2  # every outcome with pairs
    assert dom.tags.get("script") == 1 and "img" not in dom.tags  # answers stayed text
    assert '&lt;script&gt;alert("pwned")&lt;/script&gt;&lt;img src=x' in page
    assert dom.tags.get("svg") == 2
    assert {"models", "tests", "review"} <= set(dom.tables)  # the review table survives the DOM


@needs_chromium
def test_chromium_sorts_text_ascending(report_html, tmp_path) -> None:
    dom = _Dom()
    dom.feed(chromium(f"{report_html.as_uri()}#sort=model", "--dump-dom", tmp_path=tmp_path))
    assert dom.tables["tests"].get("data-sorted-by") == "model:asc"
    models = [row[1] for row in dom.rows]
    assert models == sorted(models) and models[0] == synth.MINI


@needs_chromium
def test_chromium_screenshot_shows_the_page(report_html, tmp_path) -> None:
    shot = tmp_path / "report.png"
    chromium(report_html.as_uri(), f"--screenshot={shot}", tmp_path=tmp_path)
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1280, 2000)
    assert len(data) > 50_000  # a blank page compresses to a few kB


def test_an_unpriced_reference_is_a_dashed_line_at_one() -> None:
    outcomes = synth.qwen_outcomes()
    verdict = aggregate(outcomes, synth.run_info((synth.QWEN,)))
    verdict.reference = ModelRow(model="curated", role="reference", calls=4)
    page = render_html(verdict, outcomes)
    assert '<g class="reference-line" data-model="curated">' in page
    assert "curated (reference, no cost recorded)" in page and "not plotted" not in page
    assert '<g class="point" data-model="qwen2.5-1.5b"' in page


def test_a_not_swapped_test_is_shown_as_such() -> None:
    outcomes = synth.qwen_outcomes()
    outcomes[0] = {**outcomes[0], "outcome": "not_swapped", "calls": [], "pairs": [],
                   "message": "pytest-slam: passed but is not swapped"}  # fmt: skip
    page = render_html(aggregate(outcomes, synth.run_info((synth.QWEN,))), outcomes)
    rows, _ = report_data(page)
    assert rows["rows"][0][2] == "not_swapped"  # failures first: no evidence comes first
    assert '<small class="not_swapped">1 not swapped</small>' in page
    assert "not swapped: 1 test(s) passed with no call the candidate answered" in page
