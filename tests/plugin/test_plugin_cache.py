"""The opt-in answer cache (swap/cache.py) as users expect it (issue 49 item 6), end to end.

Real pytest runs (pytester) of a product recorded once against a FakeOpenAI reference, then run
with ``--slm-cache`` against a FakeOpenAI candidate that keeps every request it was sent: what is
checked is what the candidate was asked and what the run reported.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path
from typing import Any

import pytest
from plugin_golden_helpers import run, sent_to, write_project
from report_helpers import read_report
from slam_helpers import PRODUCT, said

from pytest_slam.testing import FakeOpenAI

TWICE = """
import pytest, product

pytestmark = pytest.mark.slm

def test_asks_twice():
    assert product.ask("Where is my parcel?")
    assert product.ask("Where is my parcel?")  # the same request again, in the same test
"""
SAMPLED = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

def test_variation():
    client = OpenAI()
    answers = [
        client.chat.completions.create(
            model="gpt-4", temperature=0.9,
            messages=[{"role": "user", "content": "Name a colour."}],
        ).choices[0].message.content
        for _ in range(3)
    ]
    assert all(answers)
"""


@pytest.fixture
def gpt4() -> Any:
    with FakeOpenAI(lambda req: "GPT-4 says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def _recorded(pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI, suite: str) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=suite)
    write_project(pytester, gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=1)
    mini.requests.clear()


def _calls(report: Path) -> list[dict[str, Any]]:
    outcomes = read_report(report)["outcomes"]
    return [c for o in outcomes for c in o["calls"]]


def test_a_run_never_reuses_an_answer_it_kept_itself(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """The same request twice in one run is asked twice (the old cache answered the second from
    the first); the next run is answered from what this one kept."""
    _recorded(pytester, gpt4, mini, TWICE)
    first = run(pytester, "--slm-cache", "--slm-report=first.json")
    first.assert_outcomes(passed=1)
    assert sent_to(mini) == collections.Counter({"Where is my parcel?": 2})  # old code: 1
    assert not any(c["cached"] for c in _calls(pytester.path / "first.json"))

    mini.requests.clear()
    again = run(pytester, "--slm-cache", "--slm-report=again.json")
    again.assert_outcomes(passed=1)
    assert sent_to(mini) == collections.Counter()  # a later run: both from the cache
    assert [c["cached"] for c in _calls(pytester.path / "again.json")] == [True, True]


def test_a_sampled_request_is_never_answered_from_the_cache(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """Temperature 0.9 and no seed: a test that measures variation gets three answers asked,
    in this run and the next, and nothing of it is kept."""
    _recorded(pytester, gpt4, mini, SAMPLED)
    for report in ("first.json", "again.json"):
        mini.requests.clear()
        run(pytester, "--slm-cache", f"--slm-report={report}").assert_outcomes(passed=1)
        assert sent_to(mini) == collections.Counter({"Name a colour.": 3})  # old code: 1, then 0
        assert not any(c["cached"] for c in _calls(pytester.path / report))
    assert not list((pytester.path / ".slam" / "cache").rglob("*.json"))


def test_a_damaged_entry_is_asked_live_and_counted_never_a_failed_test(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """One entry cut short, one whose kept call is not a call: both asked again, the run passes
    and its summary counts them."""
    _recorded(pytester, gpt4, mini, TWICE.replace('ask("Where is my parcel?")\n', 'ask("Hi")\n', 1))
    run(pytester, "--slm-cache").assert_outcomes(passed=1)
    entries = sorted((pytester.path / ".slam" / "cache").rglob("*.json"))
    assert len(entries) == 2
    cut, odd = entries
    cut.write_bytes(cut.read_bytes()[: len(cut.read_bytes()) // 2])
    data = read_report(odd)
    odd.write_text(json.dumps({**data, "call": ["not", "a", "call"]}), encoding="utf-8")

    mini.requests.clear()
    result = run(pytester, "--slm-cache", "--slm-report=r.json")
    result.assert_outcomes(passed=1)  # old code: failed, the odd entry's read raised
    assert sum(sent_to(mini).values()) == 2  # both asked live
    assert not any(c["cached"] for c in _calls(pytester.path / "r.json"))
    assert "2 damaged entries ignored" in said(result)

    mini.requests.clear()
    run(pytester, "--slm-cache").assert_outcomes(passed=1)
    assert sent_to(mini) == collections.Counter()  # kept again, whole, by the run that asked


def test_a_cache_that_cannot_be_written_is_one_line_and_the_run_goes_on(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    """``.slam/cache`` a file, not a folder (as a full disk, every write fails, as root too)."""
    _recorded(pytester, gpt4, mini, TWICE)
    (pytester.path / ".slam").mkdir(exist_ok=True)
    (pytester.path / ".slam" / "cache").write_text("not a folder\n", encoding="utf-8")
    result = run(pytester, "--slm-cache")
    result.assert_outcomes(passed=1)
    text = said(result)
    assert "answer cache: 0 answers served from it (their latency as first measured), 0 answers " \
        "kept;" in text  # fmt: skip
    assert f"could not write to {pytester.path / '.slam' / 'cache'} (" in text
    assert "nothing more kept this run (free space there, or `slam cache clear`)" in text
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


STREAMED_TIMED = """
import os, pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", ["question 0", "question 1"])
def test_answer(question):
    client = OpenAI().with_options(timeout=float(os.environ.get("CALL_TIMEOUT", "600")),
                                   max_retries=0)
    stream = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0,
        stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
"""


def test_a_kept_answer_slower_than_a_streaming_caller_s_timeout_never_reaches_it(
    pytester: pytest.Pytester, gpt4: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept answer whose first chunk came after 0.4 s is not streamed to a caller that waits
    0.2 s for one: a live call would have timed out, so this one does, marked cached."""
    answer = lambda req: "slow says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, latency_s=0.4, ttft_s=0.4) as slow:
        pytester.makepyfile(test_product=STREAMED_TIMED)
        write_project(pytester, gpt4, slow)
        run(pytester, "--slm-record=new").assert_outcomes(passed=2)
        run(pytester, "--slm-cache").assert_outcomes(passed=2)  # kept, 0.4 s each
        slow.requests.clear()
        monkeypatch.setenv("CALL_TIMEOUT", "0.2")
        result = run(pytester, "--slm-cache", "--slm-report=r.json")
    result.assert_outcomes(failed=2)  # old code: passed=2, the kept stream relayed at once
    result.stdout.fnmatch_lines(
        ["*the caller gave up (its own timeout of 0.2 s) before model 'mini'*"]
    )
    assert sent_to(slow) == collections.Counter()  # kept: not asked again
    calls = _calls(pytester.path / "r.json")
    assert len(calls) == 2 and all(c["cached"] and not c["text"] for c in calls)
    assert all("the caller gave up" in (c["error"] or "") for c in calls)
