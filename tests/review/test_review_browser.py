"""Blind review end to end: a real pytest run writes the report, `slam review` serves it, and real
headless Chromium reviews five pairs with the keyboard; the verdicts land beside the goldens."""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from review_helpers import (
    MODELS,
    Browser,
    make_project,
    review_server,
    slam,
)
from slam_helpers import needs_chromium, wait_for

from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import ReviewPair, collect
from pytest_slam.review.verdicts import read_verdicts

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "review.png"
KEYS = {  # what the reviewer presses for each pair, and the choice it means
    "1": ("1", "Digit1", 49, "a"),
    "2": ("2", "Digit2", 50, "b"),
    "3": ("3", "Digit3", 51, "tie"),
    "4": ("4", "Digit4", 52, "both_bad"),
}
NAMES = (*MODELS, "gpt-4", "qwen", "llama")


@pytest.fixture
def browser(tmp_path):
    chrome = Browser(tmp_path / "profile")
    yield chrome
    chrome.close()


def current(browser: Browser) -> str:
    return browser.js("document.querySelector('section.pair:not([hidden])').dataset.id")


def done(browser: Browser) -> int:
    return int(browser.js("document.getElementById('progress').dataset.done"))


def press(browser: Browser, digit: str) -> None:
    before = done(browser)
    key, code, vk, _ = KEYS[digit]
    browser.key(key, code, vk, key)
    wait_for(lambda: done(browser) == before + 1, 60, "the verdict to be saved")


def no_model_names(browser: Browser) -> None:
    html = browser.js("document.documentElement.outerHTML").lower()
    assert not [name for name in NAMES if name in html]


def review_five(browser: Browser) -> dict[str, str]:
    """The reviewer's session: a note on the first pair, a look ahead and back, five verdicts."""
    chosen = {}
    browser.key("n", "KeyN", 78, "n")
    browser.send("Input.insertText", {"text": "terse; key sk-abc123def456 pasted"}, page=True)
    browser.key("Escape", "Escape", 27)  # leave the note, so "1" is a verdict, not text
    for digit in "12343":
        if digit == "4":
            first = current(browser)
            browser.key("ArrowRight", "ArrowRight", 39)
            assert current(browser) != first
            browser.key("ArrowLeft", "ArrowLeft", 37)
            assert current(browser) == first
        chosen[current(browser)] = KEYS[digit][3]
        press(browser, digit)
        if len(chosen) == 3 and os.environ.get("SLAM_WRITE_SCREENSHOTS") == "1":
            SCREENSHOT.parent.mkdir(exist_ok=True)  # for the README: a pair with a list
            SCREENSHOT.write_bytes(browser.screenshot(height=640))
    return chosen


def assert_saved(project: Path, pairs: dict[str, ReviewPair], chosen: dict[str, str]) -> None:
    """Each key press became the right verdict, seen from the candidate's side."""
    verdicts = read_verdicts(project / "__slam__/gpt-4/test_product.review.jsonl")
    assert len(verdicts) == 5 and {v.reviewer for v in verdicts} == {"ana"}
    for v in verdicts:
        (pid,) = [i for i, p in pairs.items() if (p.key, p.model, p.answer_hash) == v.ident[:3]]
        flip = {"a": "win", "b": "loss"} if pairs[pid].candidate_is_a else {"a": "loss", "b": "win"}
        assert v.verdict == flip.get(chosen[pid], chosen[pid])
    (noted,) = [v for v in verdicts if v.note]
    assert noted.note == "terse; key [redacted] pasted"  # a pasted secret is never committed


@needs_chromium
def test_review_five_pairs_with_the_keyboard(pytester, browser) -> None:
    project = make_project(pytester)
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs = {p.id: p for p in collect(load_report(project / "slam-report.json").outcomes, store)[0]}
    assert len(pairs) == 6  # 3 tests x 2 candidates
    with review_server(project, "--reviewer", "ana") as url:
        browser.open(url)
        no_model_names(browser)
        assert browser.js("document.querySelectorAll('script').length") == 1  # answers stay text
        page = browser.js("document.body.innerText")
        assert "<script>document.title='pwned'</script>" in page and "0 of 6 reviewed" in page
        assert browser.js("document.title") == "Blind review - pytest-slam"
        assert browser.js("document.querySelectorAll('pre code.lang-python').length") == 3
        chosen = review_five(browser)
        assert done(browser) == 5 and "5 of 6 reviewed" in browser.js("document.body.innerText")
        no_model_names(browser)
        shot = browser.screenshot()
        assert shot[:8] == b"\x89PNG\r\n\x1a\n" and len(shot) > 20_000
        port = urlsplit(url).port
    urls = browser.requested_urls()
    assert sum(u.endswith("/verdict") for u in urls) == 5
    assert all(u.startswith((f"http://127.0.0.1:{port}/", "data:")) for u in urls)
    assert_saved(project, pairs, chosen)

    stats = slam(project, "review", "--stats")
    assert stats.returncode == 0, stats.stderr
    rows = {line.split()[0]: line.split() for line in stats.stdout.splitlines()}
    assert sum(int(rows[m][1]) for m in MODELS if m in rows) == 5
    assert "  fuzzy: kappa " in stats.stdout


@needs_chromium
def test_review_resumes_where_the_reviewer_stopped(pytester, browser) -> None:
    project = make_project(pytester)
    with review_server(project, "--reviewer", "ana") as url:
        browser.open(url)
        first = current(browser)
        press(browser, "3")
    with review_server(project, "--reviewer", "ana") as url:
        browser.open(url)
        assert browser.js("document.querySelectorAll('section.pair').length") == 5
        assert current(browser) != first and "1 of 6 reviewed" in browser.js(
            "document.body.innerText"
        )
    with review_server(project, "--reviewer", "ben") as url:  # another reviewer sees every pair
        browser.open(url)
        assert browser.js("document.querySelectorAll('section.pair').length") == 6
    labels = project / "labels.jsonl"
    assert slam(project, "review", "--export-labels", str(labels)).returncode == 0
    (row,) = [json.loads(line) for line in labels.read_text().splitlines()]
    assert row["label"] == 1 and set(row) == {"candidate", "reference", "label", "unit", "module"}
