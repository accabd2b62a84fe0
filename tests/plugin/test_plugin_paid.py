"""Nothing paid for nothing (issue 51 item 4), end to end: a killed refresh's paid reference
answers are used by the next refresh (golden/paid.py), and a request that missed its golden is
not fetched ahead again until its golden changes (golden/misses.py).

Real pytest runs against FakeOpenAI servers that keep every request they were sent: what is
checked is what each server was asked and what the golden files hold.
"""

from __future__ import annotations

import collections
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from disk_helpers import (
    PYTEST,
    files_under,
    needs_read_only_mount,
    no_traceback,
    run_read_only,
)
from plugin_golden_helpers import run, sent_to, write_project
from slam_helpers import PRODUCT, wait_for

from pytest_slam.golden.store import GoldenStore
from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(12)]
SUITE = """
import os, time, pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    if question == "question 0" and os.environ.get("STALL"):
        time.sleep(120)  # the refresh is killed here, its later answers fetched and paid
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": question}}], temperature=0)
"""


def _answering(name: str) -> FakeOpenAI:
    return FakeOpenAI(lambda req: f"{name} says: " + req["messages"][-1]["content"])


def _texts(root: Path) -> dict[str, str]:
    """Each golden entry's first answer, by its request's last message."""
    store = GoldenStore(root / "__slam__", "gpt-4")
    entries = store.load("test_product.py").entries.values()
    return {str(r.request["messages"][-1]["content"]): r.answers[0].text or "" for r in entries}  # type: ignore[index]


def test_a_killed_refresh_s_paid_answers_are_used_by_the_next_refresh(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """The refresh is killed (SIGKILL: nothing of it runs after) while its first test stalls and
    the reference's answers for the later tests have been fetched: the next refresh records
    those without asking the reference again, and asks it only for the others."""
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    with _answering("GPT-4") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
    paid = pytester.path / ".slam" / "paid"
    with _answering("GPT-4 (May)") as reference:
        write_project(pytester, reference, mini)
        argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--slm-record=all"]
        proc = subprocess.Popen(
            argv, cwd=pytester.path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "STALL": "1"}, start_new_session=True,
        )  # fmt: skip
        try:
            wait_for(lambda: len(list(paid.glob("*.json"))) >= 8, 60, "answers fetched, kept")
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(60)
        kept = {json.loads(p.read_text())["call"]["text"] for p in paid.glob("*.json")}
        paid_for = {t.removeprefix("GPT-4 (May) says: ") for t in kept}
        sent = sent_to(reference)  # a request in flight at the kill was paid and not kept
        assert len(paid_for) >= 8 and paid_for <= set(sent) and max(sent.values()) == 1
        reference.requests.clear()

        run(pytester, "--slm-record=all").assert_outcomes(passed=len(QUESTIONS))
        asked = sent_to(reference)
    assert asked == collections.Counter(set(QUESTIONS) - paid_for)  # old code: all 12 again
    assert _texts(pytester.path) == {q: f"GPT-4 (May) says: {q}" for q in QUESTIONS}
    assert list(paid.glob("*.json")) == []  # recorded: no longer kept


STAMPED = """
import json, os, time, urllib.request, pytest, product

pytestmark = pytest.mark.slm

def mini_asked():
    url = os.environ["MINI_URL"].removesuffix("/v1") + "/fake/stats"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["chat_requests"]

@pytest.mark.parametrize("question", ["question 0", "question 1", "question 2"])
def test_answer(question):
    if question == "question 0":  # the later tests' requests, fetched ahead, have come
        until = time.monotonic() + 30
        while mini_asked() < int(os.environ.get("AHEAD", "0")) and time.monotonic() < until:
            time.sleep(0.05)
    if question == "question 2":  # a prompt with the time in it: never the recorded one
        question += " at " + os.environ["STAMP"]
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
"""


def test_a_request_that_missed_its_golden_is_not_fetched_again_until_the_golden_changes(
    pytester: pytest.Pytester, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Question 2 is sent with the time in it: no replay finds its golden answer (the test fails
    and says to record it; the candidate is not asked). Its golden request, fetched ahead in the
    first replay, was never used; the next replays do not fetch it, until it is recorded anew."""
    pytester.makepyfile(product=PRODUCT, test_product=STAMPED)
    monkeypatch.setenv("MINI_URL", mini.base_url)
    monkeypatch.setenv("STAMP", "09:00")
    with _answering("GPT-4") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        recorded = "question 2 at 09:00"
        for stamp, ahead, fetched in (("09:05", "2", 1), ("09:10", "1", 0), ("09:15", "1", 0)):
            mini.requests.clear()
            monkeypatch.setenv("STAMP", stamp)
            monkeypatch.setenv("AHEAD", ahead)  # question 1's fetch (and question 2's, once)
            run(pytester, "--slm-report=r.json").assert_outcomes(passed=2, failed=1)
            asked = sent_to(mini)
            assert asked[f"question 2 at {stamp}"] == 0  # a replay miss: refused
            assert asked[recorded] == fetched, stamp  # old code: fetched every run, unused
            assert asked["question 1"] == 1
        # recorded anew (another answer): its place is fetched ahead again
        run(pytester, "--slm-record=all").assert_outcomes(passed=3)
    recorded = "question 2 at 09:15"
    mini.requests.clear()
    monkeypatch.setenv("STAMP", "09:20")
    monkeypatch.setenv("AHEAD", "2")
    with _answering("GPT-4 (May)") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-report=r.json").assert_outcomes(passed=2, failed=1)
    assert sent_to(mini)[recorded] == 1


SKIPPING = """
import os, pathlib, time, pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", ["question 0", "question 1", "question 2"])
def test_answer(question):
    if question == "question 2" and os.environ.get("SKIP_LAST"):
        # its answer was fetched ahead and paid: once kept, the test never records it
        until = time.monotonic() + 30
        while not list(pathlib.Path(".slam/paid").glob("*.json")) and time.monotonic() < until:
            time.sleep(0.05)
        pytest.skip("not reached")
    assert product.client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
"""


def test_a_refresh_that_reuses_paid_answers_says_so_in_one_line(
    pytester: pytest.Pytester, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh whose last test did not reach its call leaves that answer paid and unrecorded;
    the next refresh records it without asking, and its summary says so (it said nothing: a
    user saw fewer calls to the reference and no reason, issue 52)."""
    pytester.makepyfile(product=PRODUCT, test_product=SKIPPING)
    with _answering("GPT-4") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        monkeypatch.setenv("SKIP_LAST", "1")
        run(pytester, "--slm-record=all").assert_outcomes(passed=2, skipped=1)
        assert len(list((pytester.path / ".slam" / "paid").glob("*.json"))) == 1
        monkeypatch.delenv("SKIP_LAST")
        reference.requests.clear()
        result = run(pytester, "--slm-record=all")
        result.assert_outcomes(passed=3)
        asked = sent_to(reference)
    assert asked == collections.Counter(["question 0", "question 1"])  # question 2: reused
    text = " ".join(result.stdout.str().split())
    assert re.search(
        r"reference answers: 1 answer reused, paid by an earlier refresh \(\d{4}-\d\d-\d\d "
        r"\d\d:\d\d UTC\) that did not record them \(killed, or its tests did not reach them\); "
        r"not asked again",
        text,
    ), text
    assert text.count("reference answers: ") == 1


@needs_read_only_mount
def test_a_read_only_paid_folder_keeps_nothing_and_the_refresh_records_every_answer(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """``.slam/paid`` read-only (a full disk fails the golden files first, which are larger:
    test_plugin_full_disk.py): no answer is kept, silently, and the refresh records each answer
    it fetched, asking the reference once per question; the next refresh, with space, too."""
    questions = QUESTIONS[:4]
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=questions))
    root, paid = pytester.path, pytester.path / ".slam" / "paid"
    with _answering("GPT-4") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=len(questions))
    paid.mkdir()
    with _answering("GPT-4 (May)") as reference:
        write_project(pytester, reference, mini)
        done = run_read_only([*PYTEST, "--slm-record=all"], root, [paid])
        no_traceback(done)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
        assert "not written" not in done.stdout and "reference answers:" not in done.stdout
        assert sent_to(reference) == collections.Counter(questions)  # each once
    assert _texts(root) == {q: f"GPT-4 (May) says: {q}" for q in questions}
    assert list(paid.iterdir()) == []
    with _answering("GPT-4 (June)") as reference:  # with space
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=all").assert_outcomes(passed=len(questions))
        assert sent_to(reference) == collections.Counter(questions)
    assert _texts(root) == {q: f"GPT-4 (June) says: {q}" for q in questions}
    assert list(paid.iterdir()) == []


@needs_read_only_mount
def test_a_read_only_missed_folder_notes_nothing_and_the_replay_s_verdict_stands(
    pytester: pytest.Pytester, mini: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``.slam/missed`` read-only (its notes are empty files: a file-size limit never fails
    them): a replay whose request missed its golden entry fails that test as always, exit 1, and
    notes nothing, silently; the next replay with space fetches the entry again and notes it."""
    pytester.makepyfile(product=PRODUCT, test_product=STAMPED)
    root, missed = pytester.path, pytester.path / ".slam" / "missed"
    monkeypatch.setenv("MINI_URL", mini.base_url)
    monkeypatch.setenv("STAMP", "09:00")
    with _answering("GPT-4") as reference:
        write_project(pytester, reference, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        goldens = files_under(root / "__slam__")
        missed.mkdir()
        mini.requests.clear()
        monkeypatch.setenv("STAMP", "09:05")
        monkeypatch.setenv("AHEAD", "2")  # question 1's fetch and question 2's golden request
        done = run_read_only([*PYTEST, "--slm-report=r.json"], root, [missed])
        no_traceback(done)
        assert done.returncode == pytest.ExitCode.TESTS_FAILED, done.stdout[-3000:]
        assert "1 failed, 2 passed" in done.stdout
        assert sent_to(mini)["question 2 at 09:00"] == 1  # fetched ahead, unused
        assert list(missed.iterdir()) == []  # not noted
        mini.requests.clear()
        monkeypatch.setenv("STAMP", "09:10")  # with space
        run(pytester, "--slm-report=r.json").assert_outcomes(passed=2, failed=1)
        assert sent_to(mini)["question 2 at 09:00"] == 1  # not noted: fetched again
    assert len(list(missed.iterdir())) == 1  # noted now: the next replay does not fetch it
    assert files_under(root / "__slam__") == goldens
