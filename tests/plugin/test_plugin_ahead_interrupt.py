"""Ctrl-C while answers are fetched ahead (issue 49, "paid twice"): nothing is sent twice.

A real pytest run in its own process group, sent SIGINT twice as a terminal's Ctrl-C is, while
requests fetched ahead are in flight on kept-alive connections at a loopback fake that holds them:
a replay's candidate, and a refresh's reference (``--slm-record=all``).
Before the fix, the end of the run shut those connections down, the upstream client took the
shutdown for a server that had closed an idle connection, and sent each request again: a hosted
candidate (or, in a refresh, the reference) was paid twice. What is checked is what the fake
server was sent, counted by body, and that the golden files are left as they were.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from plugin_golden_helpers import golden_files, run, write_project
from slam_helpers import PRODUCT, wait_for

from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(24)]
ANSWERED_AT_ONCE = 12  # then every request waits: by then each fetching thread has a kept-alive
# connection, and the requests it sends next are in flight on it when Ctrl-C comes
HELD = 4  # --slm-concurrency: the requests in flight, held, at the Ctrl-C
SUITE = """
import json, os, time, urllib.request, pytest, product

pytestmark = pytest.mark.slm

def asked():
    url = os.environ["WATCH_URL"].removesuffix("/v1") + "/fake/stats"
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.load(answer)["chat_requests"]

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    if question == "question 0" and os.environ.get("WAIT_FOR"):
        # the later tests' requests fetched ahead: answered, then held in flight at the fake
        until = time.monotonic() + 60
        while asked() < int(os.environ["WAIT_FOR"]) and time.monotonic() < until:
            time.sleep(0.05)
        open(os.environ["IN_FLIGHT"], "w").close()
        time.sleep(120)  # Ctrl-C comes here
    assert product.ask(question)
"""


class Holding:
    """A candidate's answer that, once ``hold`` is set, answers the first ``ANSWERED_AT_ONCE``
    requests and holds every later one until ``release`` (or 60 s)."""

    def __init__(self) -> None:
        self.holding, self.released = False, threading.Event()
        self.answered = 0
        self.lock = threading.Lock()

    def hold(self) -> None:
        with self.lock:
            self.holding, self.answered = True, 0

    def __call__(self, request: dict[str, Any]) -> str:
        with self.lock:
            wait = self.holding and self.answered >= ANSWERED_AT_ONCE
            self.answered += 1
        if wait:
            self.released.wait(60)
        return "said: " + request["messages"][-1]["content"]


def _sent(fake: FakeOpenAI) -> collections.Counter[str]:
    """Each chat request the fake was sent, by its whole body."""
    return collections.Counter(
        repr(sorted(r.json.items())) for r in fake.requests if r.json and "messages" in r.json
    )


def _ctrl_c_twice(pytester: pytest.Pytester, held: FakeOpenAI, *args: str) -> tuple[int, str]:
    """The run, interrupted twice once requests fetched ahead are held in flight at ``held``."""
    in_flight = pytester.path / "in-flight"
    env = {**os.environ, "IN_FLIGHT": str(in_flight), "WATCH_URL": held.base_url,
           "WAIT_FOR": str(ANSWERED_AT_ONCE + HELD)}  # fmt: skip
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(var, None)
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
            "--slm-concurrency", str(HELD), *args]  # fmt: skip
    proc = subprocess.Popen(
        argv,
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a terminal's foreground process group
    )
    try:
        wait_for(lambda: in_flight.exists() or proc.poll() is not None, 120, "requests held")
        if proc.poll() is not None:
            pytest.fail(f"the inner run ended before its requests were held:\n{proc.stdout}")
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=0.3)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # the impatient second press
        out, _ = proc.communicate(timeout=patient(120))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out


@pytest.mark.parametrize("held", ["candidate", "reference"])
def test_ctrl_c_twice_mid_fetch_sends_no_request_twice_and_keeps_every_golden(
    pytester: pytest.Pytester, held: str
) -> None:
    """The candidate's answers fetched ahead in a replay, or the reference's in a refresh (each
    a paid call to a hosted API): the requests in flight at the Ctrl-C are cut, never resent."""
    holding = Holding()
    reference = "GPT-4 says: {}".format
    with (
        FakeOpenAI(
            holding
            if held == "reference"
            else lambda req: reference(req["messages"][-1]["content"])
        ) as gpt4,
        FakeOpenAI(
            holding if held == "candidate" else "mini says", model="gpt-4o-mini-2024-07-18"
        ) as mini,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
        write_project(pytester, gpt4, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=len(QUESTIONS))
        goldens = golden_files(pytester.path)
        watched = mini if held == "candidate" else gpt4
        watched.requests.clear()
        holding.hold()
        try:
            refresh = ["--slm-record=all"] if held == "reference" else []
            ret, out = _ctrl_c_twice(pytester, watched, *refresh)
        finally:
            holding.released.set()
        sent = _sent(watched)
    # the second press may land in pytest's own end of session: interrupted either way
    assert ret in (pytest.ExitCode.INTERRUPTED, -signal.SIGINT), out
    assert sum(sent.values()) >= ANSWERED_AT_ONCE + HELD  # the fetches were under way
    assert [body for body, n in sent.items() if n > 1] == []  # old: the held ones, resent
    assert golden_files(pytester.path) == goldens
    assert not [p for p in Path(pytester.path / "__slam__").rglob("*.tmp")]
