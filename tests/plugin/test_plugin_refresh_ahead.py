"""A refresh's reference answers fetched ahead (golden/prefetch.py), end to end.

Real pytest runs (pytester) of a product suite recorded once against a FakeOpenAI reference, then
refreshed (``--slm-record=all``) against a reference that now answers otherwise and keeps every
request it was sent. What is checked is what the reference saw and what the golden files hold,
never a timing.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from plugin_golden_helpers import golden_files, run, sent_to, write_project
from slam_helpers import PRODUCT, said, wait_for

from pytest_slam.golden.store import GoldenStore
from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(12)]
SUITE = """
import os, pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    if question == os.environ.get("REWORD"):
        question += ", reworded"
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": question}}], temperature=0)
"""
FETCHED = re.compile(  # the first test's own may be asked live: 11 or 12; the adaptive limit
    # may have doubled past 16 by the end (a round of answers that paid), whatever the machine's load
    r"gpt-4 \(reference\): 1[12] call\(s\) fetched ahead, 1[12] used "
    r"\(up to \d+ at once, concurrency \d+\)"
)
TIMING = re.compile(r'"(recorded_at|ttft_ms|e2e_ms)": ("[^"]*"|[0-9.eE+-]+|null)')


def _replying(who: dict[str, str]) -> Callable[[dict[str, Any]], str]:
    return lambda req: f"{who['name']} says: " + req["messages"][-1]["content"]


def _recorded(pytester: pytest.Pytester, mini: FakeOpenAI, who: dict[str, str]) -> dict[str, bytes]:
    """The suite recorded once, as ``who`` answers; its golden files."""
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    with FakeOpenAI(_replying(who)) as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
    mini.requests.clear()
    return golden_files(pytester.path)


def _put_back(root: Path, files: dict[str, bytes]) -> None:
    folder = root / "__slam__"
    shutil.rmtree(folder)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def _timeless(files: dict[str, bytes]) -> dict[str, str]:
    """The golden files with their timing fields blanked (when and how fast it was recorded)."""
    return {name: TIMING.sub(r'"\1": _', data.decode("utf-8")) for name, data in files.items()}


def _answers(root: Path) -> dict[str, tuple[str, str | None]]:
    """Each golden entry's (text, recorded_at), by its request's last message."""
    store = GoldenStore(root / "__slam__", "gpt-4")
    out = {}
    for rec in store.load("test_product.py").entries.values():
        messages = rec.request["messages"]
        assert isinstance(messages, list) and isinstance(messages[-1], dict)
        out[str(messages[-1]["content"])] = (rec.answers[0].text, rec.answers[0].recorded_at)
    return out


def test_a_refresh_asks_the_reference_ahead_once_each_and_writes_what_one_at_a_time_writes(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    who = {"name": "GPT-4"}
    initial = _recorded(pytester, mini, who)
    who["name"] = "GPT-4 (May)"  # the reference now answers otherwise: every answer is rewritten
    refreshed: dict[str, dict[str, str]] = {}
    for way, args in (("one at a time", ["--slm-concurrency", "1"]), ("default", [])):
        _put_back(pytester.path, initial)
        with FakeOpenAI(_replying(who), latency_s=0.2) as reference:
            write_project(pytester, reference, mini)
            result = run(pytester, "--slm-record=all", *args)
            result.assert_outcomes(passed=len(QUESTIONS))
        assert sent_to(reference) == collections.Counter(QUESTIONS), way  # each once, none twice
        assert (reference.peak_in_flight > 1) == (way == "default"), way
        refreshed[way] = _timeless(golden_files(pytester.path))
        assert bool(FETCHED.search(said(result))) == (way == "default"), said(result)
        assert "fetched, unused" not in said(result)
    assert refreshed["default"] == refreshed["one at a time"]  # byte for byte, timings aside
    assert refreshed["default"] != _timeless(initial)
    answers = _answers(pytester.path)
    assert sorted(text for text, _ in answers.values()) == sorted(
        f"GPT-4 (May) says: {q}" for q in QUESTIONS
    )


def test_two_candidates_tests_share_each_reference_request_asked_once(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """Each test runs once per candidate, with the same requests: a refresh records each entry
    once, for whichever test asks it first, so each is fetched once and claimed by that test."""
    who = {"name": "GPT-4"}
    _recorded(pytester, mini, who)
    who["name"] = "GPT-4 (May)"
    with FakeOpenAI(_replying(who), latency_s=0.1) as reference:
        write_project(pytester, reference, mini)
        toml = pytester.path / "pyproject.toml"
        two = f'candidates = ["mini", "{mini.base_url}#nano"]'
        toml.write_text(toml.read_text().replace('candidates = ["mini"]', two))
        result = run(pytester, "--slm-record=all")
        result.assert_outcomes(passed=2 * len(QUESTIONS))
    assert sent_to(reference) == collections.Counter(QUESTIONS)
    assert reference.peak_in_flight > 1
    assert "fetched, unused" not in said(result)


def test_a_reference_refusing_the_first_calls_with_429_still_records_every_answer(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """Its first six calls refused (429 with Retry-After): the limit adapts, says so, and each
    refused call is asked again, so every test records its answer (``reference_retries = 2``
    alone would give up on the first two, asked three times each one at a time)."""
    who = {"name": "GPT-4"}
    _recorded(pytester, mini, who)
    who["name"] = "GPT-4 (May)"
    with FakeOpenAI(_replying(who), fail=[429] * 6, retry_after_s=0.01) as reference:
        write_project(pytester, reference, mini)
        result = run(pytester, "--slm-record=all")
        result.assert_outcomes(passed=len(QUESTIONS))
    assert set(sent_to(reference)) == set(QUESTIONS)
    assert "gpt-4: the server refused calls" in said(result)
    answers = _answers(pytester.path)
    assert all(answers[q][0] == f"GPT-4 (May) says: {q}" for q in QUESTIONS)


def test_a_refresh_asks_a_changed_request_live_and_never_records_the_fetched_one(
    pytester: pytest.Pytester, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    who = {"name": "GPT-4"}
    _recorded(pytester, mini, who)
    before = _answers(pytester.path)
    who["name"] = "GPT-4 (May)"
    monkeypatch.setenv("REWORD", "question 5")  # its golden entry holds the old wording
    with FakeOpenAI(_replying(who), latency_s=0.1) as reference:
        write_project(pytester, reference, mini)
        result = run(pytester, "--slm-record=all")
        result.assert_outcomes(passed=len(QUESTIONS))
    expected = collections.Counter([*QUESTIONS, "question 5, reworded"])
    assert sent_to(reference) == expected  # the old wording fetched ahead once, the new live once
    assert "1 fetched, unused" in said(result)
    after = _answers(pytester.path)
    assert after["question 5"] == before["question 5"]  # the fetched answer was never written
    assert after["question 5, reworded"][0] == "GPT-4 (May) says: question 5, reworded"
    assert after["question 4"][0] == "GPT-4 (May) says: question 4"


def test_a_failed_fetched_call_fails_its_test_as_a_live_one_does(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """The reference fails one request every time (a 500, asked again as ``reference_retries``
    says): fetched ahead or asked live, the same test fails with the same line, the request is
    asked as many times, and its golden entry is left as it was."""
    who = {"name": "GPT-4"}
    _recorded(pytester, mini, who)
    before = _answers(pytester.path)

    def reply(req: dict[str, Any]) -> str:
        if req["messages"][-1]["content"] == "question 7":
            raise RuntimeError("the reference is down for this one")
        return "GPT-4 (May) says: " + req["messages"][-1]["content"]

    failures: dict[str, list[str]] = {}
    for way, args in (("one at a time", ["--slm-concurrency", "1"]), ("default", [])):
        with FakeOpenAI(reply, latency_s=0.1) as reference:
            write_project(pytester, reference, mini)
            result = run(pytester, "--slm-record=all", *args)
            result.assert_outcomes(passed=len(QUESTIONS) - 1, failed=1)
        asked = sent_to(reference)
        assert asked == collections.Counter([*QUESTIONS, "question 7", "question 7"]), way
        assert (reference.peak_in_flight > 1) == (way == "default"), way
        # the failure's own line (pytest's short summary repeats it, cut to the width outside CI)
        lines = [
            line
            for line in result.outlines
            if line.startswith("call ")
            and line.endswith("(pytest-slam, mini)")
            and "recording from reference" in line
        ]
        failures[way] = [line.replace(reference.base_url, "URL") for line in lines]
        assert _answers(pytester.path)["question 7"] == before["question 7"], way
    assert failures["default"] == failures["one at a time"]
    [line] = failures["default"]
    assert "recording from reference 'gpt-4' at URL failed after 3 attempt(s): HTTP 500" in line


def test_ctrl_c_mid_refresh_keeps_what_was_written_and_writes_nothing_fetched(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """SIGINT to the refresh's process group while answers fetched ahead are in flight (the
    reference answers the first three questions at once, the rest only when the test lets it):
    the run ends as interrupted, with no traceback; the three answers its tests asked for are in
    the golden file, every other entry is as it was, though several were fetched."""
    who = {"name": "GPT-4"}
    _recorded(pytester, mini, who)
    before = _answers(pytester.path)
    released = threading.Event()
    fast = {f"question {i}" for i in range(3)}

    def reply(req: dict[str, Any]) -> str:
        asked = req["messages"][-1]["content"]
        if asked not in fast:
            released.wait(60)
        return f"GPT-4 (May) says: {asked}"

    with FakeOpenAI(reply) as reference:
        write_project(pytester, reference, mini)
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                "--slm-record=all"]  # fmt: skip
        proc = subprocess.Popen(
            argv, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(lambda: len(reference.requests) >= 8, 60, "reference answers fetched ahead")
            wait_for(lambda: len(mini.requests) >= 3, 60, "the first three tests' candidate calls")
            os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=patient(60))
        finally:
            released.set()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, out  # pytest's "interrupted"
    assert "KeyboardInterrupt" in out and "Traceback" not in out, out
    after = _answers(pytester.path)
    for question in QUESTIONS:
        if question in fast:
            assert after[question][0] == f"GPT-4 (May) says: {question}"
        else:
            assert after[question] == before[question], question
