"""The HTML report: self-contained, escaped, with diffs; and rendered by real headless Chromium."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest
import test_report_helpers as synth

from pytest_slam.report.aggregate import ModelRow, aggregate
from pytest_slam.report.diffview import Segment, diff_and_similarity
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.html import render_html, write_html

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"
)


@pytest.fixture(scope="module")
def report_html(tmp_path_factory):
    outcomes = synth.outcomes()
    verdict = aggregate(outcomes, synth.run_info())
    verdict = apply_gate(verdict, evaluate(Gate(min_mean_equivalence=0.8), verdict))
    return write_html(tmp_path_factory.mktemp("html") / "report.html", verdict, outcomes)


def test_self_contained_no_network(report_html) -> None:
    page = report_html.read_text()
    urls = set(re.findall(r"(?:https?:)?//[\w.-]+[^\s\"'<>]*", page))
    assert urls == {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched
    assert "<link" not in page and " src=" not in page.replace("src=x", "")
    assert page.count("<script>") == 1 and page.count("<style>") == 1


def test_answers_with_html_are_escaped(report_html) -> None:
    page = report_html.read_text()
    assert '<script>alert("pwned")' not in page and "<img src=x" not in page
    assert "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_charts_and_tables_are_in_the_page(report_html) -> None:
    page = report_html.read_text()
    assert page.count('<g class="point') == 4 and page.count('<g class="point reference"') == 1
    assert page.count('<g class="box e2e"') == 4 and page.count('<g class="box ttft"') == 4
    assert page.count('<tr data-index="') == 12
    assert '<td class="FAIL">FAIL</td>' in page and '<td class="PASS">PASS</td>' in page


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
    assert '<pre class="ref">Priority: high. Route to billing.</pre>' in page
    smol = synth.smol_outcomes()[:1]
    page = render_html(aggregate(smol, synth.run_info((synth.SMOL,))), smol)
    assert '<pre class="ref">Priority: high. <del>Route to billing</del>.</pre>' in page
    assert '<pre class="cand">Priority: high. <ins>Billing</ins>.</pre>' in page


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


def _chromium(url: str, *args: str, tmp_path) -> str:
    cmd = [
        CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
        "--no-first-run", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000",
        *args, url,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@needs_chromium
def test_chromium_runs_the_sort_script_from_the_url_hash(report_html, tmp_path) -> None:
    dom = _Dom()
    dom.feed(_chromium(f"{report_html.as_uri()}#sort=e2e:desc&open=all", "--dump-dom",
                       tmp_path=tmp_path))  # fmt: skip
    tests = dom.tables["tests"]
    assert tests.get("data-ready") == "1" and tests.get("data-sorted-by") == "e2e:desc"
    e2e = [row[6] for row in dom.rows]  # column 7: E2E p95; empty values sort last
    measured = [float(v) for v in e2e if v]
    assert measured == sorted(measured, reverse=True) and measured[0] == 2500.0
    assert e2e[len(measured) :] == [""] * (len(e2e) - len(measured))
    assert dom.open_details == len(synth.outcomes()) - 2  # every outcome with pairs
    assert dom.tags.get("script") == 1 and "img" not in dom.tags  # answers stayed text
    assert dom.tags.get("svg") == 2


@needs_chromium
def test_chromium_sorts_text_ascending(report_html, tmp_path) -> None:
    dom = _Dom()
    dom.feed(_chromium(f"{report_html.as_uri()}#sort=model", "--dump-dom", tmp_path=tmp_path))
    assert dom.tables["tests"].get("data-sorted-by") == "model:asc"
    models = [row[1] for row in dom.rows]
    assert models == sorted(models) and models[0] == synth.MINI


@needs_chromium
def test_chromium_screenshot_shows_the_page(report_html, tmp_path) -> None:
    shot = tmp_path / "report.png"
    _chromium(report_html.as_uri(), f"--screenshot={shot}", tmp_path=tmp_path)
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
