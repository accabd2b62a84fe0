"""A run's judge pairs asked ahead of their tests (run/test/judge_ahead.py), end to end.

Real pytest runs (pytester) of a product suite recorded once against a FakeOpenAI reference, then
replayed against a FakeOpenAI candidate with a FakeOpenAI judge that answers after a delay and
keeps every request it was sent. What is checked is what the judge saw and what the run reported,
never a timing.
"""

from __future__ import annotations

import collections
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from plugin_golden_helpers import run, write_project
from report_helpers import read_report
from slam_helpers import PRODUCT, said

from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(12)]
SUITE = """
import json, os, time, urllib.request, pytest, product

pytestmark = pytest.mark.slm

def judge_asked():
    url = os.environ["JUDGE_URL"].removesuffix("/v1") + "/fake/stats"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["chat_requests"]

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    if question == "question 0" and os.environ.get("JUDGE_AHEAD"):
        # the first test waits until every later pair's judge request, asked ahead, has come:
        # what is asked live after that is what could not be asked ahead, never a late one
        until = time.monotonic() + 30
        while judge_asked() < int(os.environ["JUDGE_AHEAD"]) and time.monotonic() < until:
            time.sleep(0.05)
    user = os.environ.get("USER_FIELD") if question == "question 5" else None
    extra = {{"user": user}} if user else {{}}
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": question}}], temperature=0, **extra)
"""
CASCADE = 'equivalence = { at_least = 0.99, fail_below = 0.01, then = ["judge"] }\n'
PAIRWISE = 'equivalence = { by = "judge", mode = "pairwise" }\n'


def _verdict(request: dict[str, Any]) -> str:
    """The judge's answer: a tie when asked to compare, a good grade when asked to grade."""
    return "Both say it. [[C]]" if "Assistant A" in request["messages"][-1]["content"] else (
        "Same facts. Rating: [[8]]"
    )  # fmt: skip


def _candidate(request: dict[str, Any]) -> str:
    """Its own words; a request with ``user`` set gets another answer (asked live, not fetched)."""
    said = "mini says: " + request["messages"][-1]["content"]
    return said + (f" for {request['user']}" if request.get("user") else "")


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI]]:
    with (
        FakeOpenAI(lambda req: "GPT-4 says: " + req["messages"][-1]["content"]) as gpt4,
        FakeOpenAI(_candidate, model="gpt-4o-mini-2024-07-18") as mini,
        # a batching server (steps of 0.2 s): a test may hold its first requests back
        FakeOpenAI(_verdict, model="gpt-4-judge", latency_s=0.2, batch=32) as judge,
    ):
        yield gpt4, mini, judge


def _recorded(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
    equivalence: str,
) -> FakeOpenAI:
    """The goldens recorded with no judge; then the project sends its pairs to the judge."""
    gpt4, mini, judge = servers
    monkeypatch.setenv("JUDGE_URL", judge.base_url)
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    write_project(pytester, gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
    write_project(pytester, gpt4, mini, f"judge = '{judge.base_url}#gpt-4-judge'\n{equivalence}")
    mini.requests.clear()
    return judge


def _judge_asked(judge: FakeOpenAI) -> collections.Counter[str]:
    """Each judge request, as its exact body."""
    return collections.Counter(
        json.dumps(r.json, sort_keys=True)
        for r in judge.requests
        if r.path.endswith("/chat/completions") and r.json
    )


def _outcomes(report: Path) -> list[dict[str, Any]]:
    return list(read_report(report)["outcomes"])


def _decided(report: Path) -> list[tuple[str, str, list[tuple[Any, ...]]]]:
    """Each test's outcome and its pairs' verdicts, as a report gives them."""
    return [
        (
            o["nodeid"],
            o["outcome"],
            [
                (s["verdict"], s["decided_by"], s["value"], s["explanation"])
                for p in o["pairs"]
                for s in p["scores"]
            ],
        )
        for o in _outcomes(report)
    ]


def _counts(report: Path) -> dict[str, Any]:
    """The candidate's row of the report: its verdict and judge figures, timing left out."""
    (row,) = [r for r in read_report(report)["models"] if r["model"] == "mini"]
    keys = [k for k in row if k.startswith(("pairs_", "judge_", "equivalence_", "tests_"))]
    counts = {k: row[k] for k in keys if "ms" not in k}
    assert counts["judge_asked"] and counts["pairs_equivalent"]  # the figures compared
    return counts


def _judge_calls(report: Path) -> list[dict[str, Any]]:
    return [c for o in _outcomes(report) for c in o["calls"] if c["role"] == "judge"]


@pytest.mark.parametrize("equivalence", [CASCADE, PAIRWISE], ids=["cascade", "pairwise"])
def test_judge_pairs_are_asked_ahead_each_once_with_the_verdicts_of_one_at_a_time(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
    equivalence: str,
) -> None:
    judge = _recorded(pytester, servers, monkeypatch, equivalence)
    per_pair = 2 if "pairwise" in equivalence else 1
    monkeypatch.setenv("JUDGE_AHEAD", str(per_pair * (len(QUESTIONS) - 1)))
    judge.hold()  # the judge answers nothing until two requests wait: asked together, on any machine
    releaser = threading.Thread(target=lambda: (judge.wait_queued(2, 60), judge.release()))
    releaser.start()
    ahead = run(pytester, "--slm-report=ahead.json")
    releaser.join()
    ahead.assert_outcomes(passed=len(QUESTIONS))
    asked = _judge_asked(judge)
    assert len(asked) == per_pair * len(QUESTIONS)  # a request per pair (and order)
    assert set(asked.values()) == {1}  # each exactly once
    assert judge.peak_in_flight > 1  # asked together, not one after each test
    calls = _judge_calls(pytester.path / "ahead.json")
    assert len(calls) == per_pair * len(QUESTIONS)
    # all but the first test's: its candidate answer is asked by the test itself, not fetched
    assert sum(c["fetched_ahead"] for c in calls) == per_pair * (len(QUESTIONS) - 1)
    n = per_pair * (len(QUESTIONS) - 1)
    assert f"judge gpt-4-judge: {n} call(s) asked ahead, {n} used (up to" in said(ahead)
    assert "unused" not in said(ahead)

    judge.requests.clear()
    monkeypatch.delenv("JUDGE_AHEAD")
    serial = run(pytester, "--slm-concurrency", "1", "--slm-report=serial.json")
    serial.assert_outcomes(passed=len(QUESTIONS))
    assert _judge_asked(judge) == asked  # the same requests, asked by each test after it ran
    assert "asked ahead" not in said(serial)
    assert not any(c["fetched_ahead"] for c in _judge_calls(pytester.path / "serial.json"))
    decided = _decided(pytester.path / "ahead.json")
    assert decided == _decided(pytester.path / "serial.json")
    assert _counts(pytester.path / "ahead.json") == _counts(pytester.path / "serial.json")
    assert {v[:2] for _, _, scores in decided for v in scores} == {("equivalent", "judge")}


def test_an_answer_asked_live_gets_a_live_judge_call_and_the_one_asked_ahead_is_unused(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``user`` is no part of the golden key but is sent upstream: question 5's fetched request
    is not the one its test sends, so the candidate is asked live and answers otherwise; the
    judge verdict asked ahead on the fetched answer is no test's."""
    judge = _recorded(pytester, servers, monkeypatch, CASCADE)
    monkeypatch.setenv("USER_FIELD", "end-user-7")
    monkeypatch.setenv("JUDGE_AHEAD", str(len(QUESTIONS) - 1))
    result = run(pytester, "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    asked = _judge_asked(judge)
    assert set(asked.values()) == {1} and len(asked) == len(QUESTIONS) + 1
    about_5 = [body for body in asked if "question 5" in body]
    assert len(about_5) == 2  # the fetched answer's (ahead, unused) and the live one's
    assert sum("question 5 for end-user-7" in body for body in about_5) == 1
    (outcome,) = [o for o in _outcomes(pytester.path / "r.json") if "question 5" in o["nodeid"]]
    (call,) = [c for c in outcome["calls"] if c["role"] == "judge"]
    assert call["fetched_ahead"] is False  # asked live, about the answer the test got
    assert "for end-user-7" in call["request"]["messages"][-1]["content"]
    n = len(QUESTIONS) - 1  # every fetched answer's pair, question 5's included
    line = f"judge gpt-4-judge: {n} call(s) asked ahead, {n - 1} used;"
    assert line in said(result)
    assert "1 judge verdict call(s) asked ahead, unused" in said(result)
    # the verdict no test used is written nowhere: the goldens hold no judge verdict
    goldens = [read_report(p) for p in (pytester.path / "__slam__").rglob("*.json")]
    assert not any(e.get("judge") for g in goldens for e in g.get("entries", {}).values())


def test_cached_verdicts_are_never_asked_ahead(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = _recorded(pytester, servers, monkeypatch, CASCADE)
    monkeypatch.setenv("JUDGE_AHEAD", str(len(QUESTIONS) - 1))
    first = run(pytester, "--slm-record=new")  # the verdicts cached in the golden files
    first.assert_outcomes(passed=len(QUESTIONS))
    n = len(QUESTIONS) - 1
    assert f"judge gpt-4-judge: {n} call(s) asked ahead, {n} used" in said(first)
    assert set(_judge_asked(judge).values()) == {1}
    judge.requests.clear()
    monkeypatch.delenv("JUDGE_AHEAD")
    replay = run(pytester, "--slm-report=r.json")
    replay.assert_outcomes(passed=len(QUESTIONS))
    assert not _judge_asked(judge)  # every verdict replayed: the judge asked nothing
    assert "asked ahead" not in said(replay)
    assert not _judge_calls(pytester.path / "r.json")


def test_a_judge_at_concurrency_one_is_asked_by_each_test(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The judge's own table says one at a time: candidates are still fetched ahead."""
    judge = _recorded(pytester, servers, monkeypatch, CASCADE)
    toml = pytester.path / "pyproject.toml"
    toml.write_text(
        toml.read_text().replace("judge = '", "judge = 'grader'\n#", 1)
        + f'\n[tool.slam.models.grader]\nbase_url = "{judge.base_url}"\nmodel = "gpt-4-judge"\n'
        "concurrency = 1\n"
    )
    result = run(pytester)
    result.assert_outcomes(passed=len(QUESTIONS))
    assert "call(s) fetched ahead" in said(result) and "asked ahead" not in said(result)
    assert judge.peak_in_flight == 1 and set(_judge_asked(judge).values()) == {1}


def test_under_xdist_each_worker_asks_its_own_pairs_ahead_each_judge_request_once(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = _recorded(pytester, servers, monkeypatch, CASCADE)
    result = run(pytester, "-n", "2", "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    asked = _judge_asked(judge)
    assert len(asked) == len(QUESTIONS) and set(asked.values()) == {1}
    assert any(c["fetched_ahead"] for c in _judge_calls(pytester.path / "r.json"))


def test_repeats_of_one_answer_ask_the_judge_once(
    pytester: pytest.Pytester,
    servers: tuple[FakeOpenAI, FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--slm-repeat 2``: each test's two answers are the same, so are their judge requests;
    the second is the first's (asked ahead once) or its cached verdict, never asked again."""
    judge = _recorded(pytester, servers, monkeypatch, CASCADE)
    result = run(pytester, "--slm-repeat", "2", "--slm-report=r.json")
    result.assert_outcomes(passed=len(QUESTIONS))
    asked = _judge_asked(judge)
    assert len(asked) == len(QUESTIONS) and set(asked.values()) == {1}
    assert "asked ahead" in said(result)
