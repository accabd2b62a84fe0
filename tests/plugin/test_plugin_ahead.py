"""Answers fetched ahead of the tests (swap/ahead.py, run/test/fetching.py), end to end.

Real pytest runs (pytester) of a product suite recorded once against a FakeOpenAI reference, then
replayed against a FakeOpenAI candidate that keeps every request it was sent. What is checked is
what the candidate saw and what the run reported, never a timing.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from plugin_golden_helpers import run, sent_to, write_project
from report_helpers import read_report
from slam_helpers import PRODUCT, said, wait_for

from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(12)]
SUITE = """
import json, os, time, urllib.request, pytest, product

pytestmark = pytest.mark.slm

def mini_asked():
    url = os.environ["MINI_URL"].removesuffix("/v1") + "/fake/stats"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["chat_requests"]

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    if question == "question 0" and os.environ.get("AHEAD"):
        # the first test waits until the later tests' requests, fetched ahead, have come: what
        # the run then asks live is what could not be fetched, on a machine of any speed
        until = time.monotonic() + 30
        while mini_asked() < int(os.environ["AHEAD"]) and time.monotonic() < until:
            time.sleep(0.05)
    if question == os.environ.get("SKIP_QUESTION"):
        pytest.skip("skipped at run time")
    user = os.environ.get("USER_FIELD") if question == "question 5" else None
    extra = {{"user": user}} if user else {{}}
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": question}}], temperature=0, **extra)
"""
NONE_ALONE = "alone_first = 0"  # no call sent alone first (swap/limits.py's latency sample)
CONVERSATION = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

def test_two_turns():
    client = OpenAI()
    messages = [{"role": "user", "content": "first turn"}]
    first = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "second turn"}]
    second = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
    assert second.choices[0].message.content
"""


@pytest.fixture
def gpt4() -> Any:
    with FakeOpenAI(lambda req: "GPT-4 says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def _recorded(
    pytester: pytest.Pytester,
    gpt4: FakeOpenAI,
    mini: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch | None = None,
    ahead: int = len(QUESTIONS) - 1,
) -> None:
    """The suite recorded; with ``monkeypatch``, its replay's first test waits for ``ahead``
    requests fetched ahead (the later tests')."""
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    write_project(pytester, gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
    mini.requests.clear()
    if monkeypatch is not None:
        monkeypatch.setenv("MINI_URL", mini.base_url)
        monkeypatch.setenv("AHEAD", str(ahead))


def _calls(report: Path) -> list[dict[str, Any]]:
    outcomes = read_report(report)["outcomes"]
    return [c for o in outcomes for c in o["calls"]]


def test_a_replay_fetches_ahead_and_asks_each_request_once(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    answer = lambda req: "mini says: " + req["messages"][-1]["content"]  # noqa: E731
    # a batching server that answers nothing until two requests wait: in flight together on a
    # machine of any speed
    with FakeOpenAI(answer, model="gpt-4o-mini-2024-07-18", latency_s=0.01, batch=32) as mini:
        _recorded(pytester, gpt4, mini, monkeypatch)
        write_project(pytester, gpt4, mini, extra=NONE_ALONE)  # two at once from the first
        mini.hold()
        releaser = threading.Thread(target=lambda: (mini.wait_queued(2, 60), mini.release()))
        releaser.start()
        result = run(pytester, "--slm-report=r.json")
        releaser.join()
    result.assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)  # each once, none twice
    calls = _calls(pytester.path / "r.json")
    ahead = [c for c in calls if c["fetched_ahead"]]
    assert len(ahead) == len(QUESTIONS) - 1  # all but the first test's, sent before it ran
    assert all(isinstance(c["in_flight"], int) and c["in_flight"] >= 1 for c in calls)
    line = f"mini: {len(QUESTIONS) - 1} call(s) fetched ahead, {len(QUESTIONS) - 1} used"
    assert line in said(result)
    assert "latency measured with calls in flight at once (mini up to" in said(result)


def test_concurrency_one_asks_one_at_a_time_with_the_same_outcomes_and_answers(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    _recorded(pytester, gpt4, mini)
    run(pytester, "--slm-report=ahead.json").assert_outcomes(passed=len(QUESTIONS))
    serial = run(pytester, "--slm-concurrency", "1", "--slm-report=serial.json")
    serial.assert_outcomes(passed=len(QUESTIONS))
    assert "fetched ahead" not in said(serial)
    assert "latency measured with calls in flight" not in said(serial)  # one at a time
    every = _calls(pytester.path / "serial.json")
    assert [c["in_flight"] for c in every] == [1] * len(QUESTIONS)
    assert not any(c["fetched_ahead"] for c in every)

    def kept(name: str) -> list[tuple[str, str, str]]:
        outcomes = read_report(pytester.path / name)["outcomes"]
        return [(o["nodeid"], o["outcome"], o["calls"][0]["text"]) for o in outcomes]

    assert kept("ahead.json") == kept("serial.json")
    # a baseline made one call at a time does not judge latency measured 16 at a time
    again = run(pytester, "--slm-baseline=serial.json")
    assert "mini: E2E p95 not compared, its calls were sent 16 at a time and 1 at a time" in said(
        again
    )


def test_a_request_that_differs_from_its_golden_is_asked_live_and_the_fetched_one_unused(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``user`` is no part of the golden key (the same golden answer) but is sent upstream: the
    fetched request is not the one the test sends, so the test's is asked live."""
    _recorded(pytester, gpt4, mini, monkeypatch)
    monkeypatch.setenv("USER_FIELD", "end-user-7")
    result = run(pytester, "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    sent = [
        r.json
        for r in mini.requests
        if r.json and r.json["messages"][-1]["content"] == "question 5"
    ]
    assert [body.get("user") for body in sent] == [None, "end-user-7"]  # fetched, then live
    [changed] = [c for c in _calls(pytester.path / "r.json") if c["text"].endswith("question 5")]
    assert changed["fetched_ahead"] is False and changed["request"]["user"] == "end-user-7"
    assert "1 fetched, unused" in said(result)


def test_a_skipped_or_deselected_test_is_never_paired_with_a_fetched_answer(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recorded(pytester, gpt4, mini, monkeypatch, ahead=len(QUESTIONS) - 2)  # not question 3
    monkeypatch.setenv("SKIP_QUESTION", "question 7")
    deselect = "test_product.py::test_answer[mini-question 3]"
    result = run(pytester, "--deselect", deselect, "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS) - 2, skipped=1, deselected=1)
    asked = sent_to(mini)
    assert "question 3" not in asked  # deselected: never planned
    assert asked["question 7"] == 1  # fetched before the test skipped itself
    assert "1 fetched, unused" in said(result)
    texts = [c["text"] for c in _calls(pytester.path / "r.json")]
    assert not any("question 7" in t for t in texts)


def test_a_conversations_later_turn_is_asked_after_the_candidates_own_answer(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(test_chat=CONVERSATION, test_product=SUITE.format(questions=QUESTIONS))
    pytester.makepyfile(product=PRODUCT)
    write_project(pytester, gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS) + 1)
    mini.requests.clear()
    run(pytester, "-p", "no:randomly").assert_outcomes(passed=len(QUESTIONS) + 1)
    second = [r.json for r in mini.requests if r.json and len(r.json["messages"]) == 3]
    assert len(second) == 1  # asked once, live
    assert second[0]["messages"][1]["content"] == "mini says: first turn"  # its own answer


def test_a_candidate_refusing_half_its_calls_with_429_still_answers_every_test(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    _recorded(pytester, gpt4, mini)
    answer = lambda req: "mini says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, fail=[429] * len(QUESTIONS), retry_after_s=0.01) as refusing:
        write_project(pytester, gpt4, refusing)
        result = run(pytester, "--slm-report=r.json")
        result.assert_outcomes(passed=len(QUESTIONS))
    answered = [c for c in _calls(pytester.path / "r.json") if c["error"] is None]
    assert len(answered) == len(QUESTIONS)
    assert "the server refused calls" in said(result)


def test_two_workers_ask_each_request_once(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    _recorded(pytester, gpt4, mini)
    result = run(pytester, "-n", "2", "--slm-report=r.json", "--slm-cache")
    result.assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)
    # the answer cache too: one line, the workers' answers added up
    assert said(result).count("answer cache: ") == 1, said(result)
    assert f"0 answers served from it (their latency as first measured), {len(QUESTIONS)} " \
        "answers kept" in said(result)  # fmt: skip
    used = sum(1 for c in _calls(pytester.path / "r.json") if c["fetched_ahead"])
    assert used
    # the controller says one line for both workers, the calls added up (each worker printed
    # its own, naming none: issue 52)
    lines = re.findall(r"mini: \d+ call\(s\) fetched ahead", said(result))
    assert len(lines) == 1, said(result)
    assert f"fetched ahead, {used} used" in said(result), said(result)
    assert re.search(
        r"\(up to \d+ at once, concurrency \d+( on each of 2 workers)?\)", said(result)
    )


# -- the opt-in answer cache (swap/cache.py) ---------------------------------------------------------


def test_the_cache_reuses_an_answer_only_for_the_same_model_and_body(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    _recorded(pytester, gpt4, mini)
    first = run(pytester, "--slm-cache", "--slm-report=first.json")
    first.assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)
    assert not any(c["cached"] for c in _calls(pytester.path / "first.json"))

    mini.requests.clear()
    again = run(pytester, "--slm-cache", "--slm-report=again.json")
    again.assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter()  # nothing asked: every answer kept
    calls = _calls(pytester.path / "again.json")
    assert all(c["cached"] for c in calls)
    # each line of the cache counts answers, in the same words (issue 52: "49 kept", "37 removed")
    assert (f"answer cache: {len(QUESTIONS)} answers served from it (their latency as first "
            "measured), 0 answers kept") in said(again)  # fmt: skip
    assert (pytester.path / ".slam" / ".gitignore").read_text().endswith("*\n")  # never committed

    run(pytester, "--slm-report=off.json").assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)  # not opted in: asked anew

    mini.requests.clear()
    write_project(pytester, gpt4, mini, extra="", key_env=None)
    pytester.path.joinpath("pyproject.toml").write_text(
        pytester.path.joinpath("pyproject.toml").read_text().replace("gpt-4o-mini", "gpt-4o-nano")
    )
    run(pytester, "--slm-cache").assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)  # another model id: not reused

    mini.requests.clear()
    cleared = subprocess.run(
        [sys.executable, "-m", "pytest_slam.cli", "cache", "clear"],
        cwd=pytester.path, capture_output=True, text=True, timeout=patient(60),
    )  # fmt: skip
    assert cleared.returncode == 0, cleared.stderr
    kept = 2 * len(QUESTIONS)  # the answers of both model ids
    assert f"answer cache: {kept} answers removed from .slam/cache" in cleared.stdout
    run(pytester, "--slm-cache").assert_outcomes(passed=len(QUESTIONS))
    assert sent_to(mini) == collections.Counter(QUESTIONS)  # cleared: asked again


def test_ctrl_c_with_fetches_in_flight_ends_them_and_keeps_every_golden(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """SIGINT to the run's process group (a terminal's Ctrl-C) while answers are being fetched
    ahead (each answer 30 s away): the run ends at once as interrupted, with no traceback, and the
    golden files are byte for byte what they were."""
    _recorded(pytester, gpt4, mini)
    # the SDK's lazy modules loaded at import: a SIGINT that lands while pydantic builds their
    # schemas becomes pydantic's SchemaError (a failed test) instead of an interrupt
    pytester.makepyfile(product=PRODUCT + "\nclient.chat.completions.create\n")
    golden = {p: p.read_bytes() for p in (pytester.path / "__slam__").rglob("*") if p.is_file()}
    answer = lambda req: "slow says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, latency_s=30.0) as slow:
        write_project(pytester, gpt4, slow, extra=NONE_ALONE)  # not 30 s alone first
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider"]
        proc = subprocess.Popen(
            argv, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(lambda: len(slow.requests) >= 8, 60, "answers fetched ahead, in flight")
            os.killpg(proc.pid, signal.SIGINT)
            out, _ = proc.communicate(timeout=patient(60))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        assert proc.returncode == 2, out  # pytest's "interrupted"
        assert "KeyboardInterrupt" in out and "Traceback" not in out, out
    after = {p: p.read_bytes() for p in (pytester.path / "__slam__").rglob("*") if p.is_file()}
    assert after == golden


STREAMING_PRODUCT = """
from openai import OpenAI

client = OpenAI()

def ask(question):
    stream = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0,
        stream=True, stream_options={"include_usage": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage is not None:
            usage = chunk.usage.completion_tokens
    assert usage, "no usage chunk"
    return text
"""


def test_a_streaming_product_gets_the_fetched_stream_whole_with_its_usage(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetched call's stream is relayed to a streaming caller as the candidate sent it (its
    pieces and the usage chunk it asked for): the same text as a live stream."""
    asking = SUITE.split("    user = ")[0]  # the wait for what is fetched ahead, then:
    suite = asking.format(questions=QUESTIONS) + "    assert product.ask(question)\n"
    pytester.makepyfile(product=STREAMING_PRODUCT, test_product=suite)
    write_project(pytester, gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
    mini.requests.clear()
    monkeypatch.setenv("MINI_URL", mini.base_url)
    monkeypatch.setenv("AHEAD", str(len(QUESTIONS) - 1))
    result = run(pytester, "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    calls = _calls(pytester.path / "r.json")
    assert sum(c["fetched_ahead"] for c in calls) == len(QUESTIONS) - 1
    assert all(c["streamed"] for c in calls)
    assert sorted(c["text"] for c in calls) == sorted(f"mini says: {q}" for q in QUESTIONS)
    assert sent_to(mini) == collections.Counter(QUESTIONS)


def test_a_refresh_fetches_nothing_ahead_and_asks_each_request_once(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """``--slm-record=all`` records each reference answer again before its candidate call, so the
    cap a fetched request carried may not be the call's: no candidate answer is fetched, each is
    asked live (the reference's are fetched: tests/plugin/test_plugin_refresh_ahead.py)."""
    _recorded(pytester, gpt4, mini)
    result = run(pytester, "--slm-record=all", "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    assert not re.search(r"mini: \d+ call\(s\) fetched ahead", said(result))
    assert not any(c["fetched_ahead"] for c in _calls(pytester.path / "r.json"))
    assert sent_to(mini) == collections.Counter(QUESTIONS)


TIMED_SUITE = """
import os, pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", ["question 0", "question 1", "question 2"])
def test_answer(question):
    timeout = float(os.environ.get("CALL_TIMEOUT", "600"))
    assert product.client.with_options(timeout=timeout, max_retries=0).chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
"""


def test_a_kept_answer_slower_than_the_callers_timeout_is_the_candidates_failure(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer not asked now (kept by the cache, or fetched ahead) is served only when it came
    within the caller's own timeout, as a live call would have: a kept answer that took 0.4 s
    never reaches a caller who gives up after 0.2 s; the call is a failure, marked cached."""
    with FakeOpenAI(lambda req: "slow says: " + req["messages"][-1]["content"],
                    latency_s=0.4) as slow:  # fmt: skip
        pytester.makepyfile(product=PRODUCT, test_product=TIMED_SUITE)
        write_project(pytester, gpt4, slow)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        run(pytester, "--slm-cache").assert_outcomes(passed=3)  # kept, 0.4 s each
        slow.requests.clear()
        monkeypatch.setenv("CALL_TIMEOUT", "0.2")
        result = run(pytester, "--slm-cache", "--slm-report=r.json")
    result.assert_outcomes(
        failed=3
    )  # old code: passed=3, the kept answers served whatever they took
    assert sent_to(slow) == collections.Counter()  # kept: not asked again
    calls = _calls(pytester.path / "r.json")
    assert len(calls) == 3 and all(c["cached"] and not c["text"] for c in calls)
    assert all("the caller gave up" in (c["error"] or "") for c in calls)
