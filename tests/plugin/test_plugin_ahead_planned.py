"""What the goldens let a run foresee and fetch ahead (run/test/fetching.py, golden/foresee.py), end to
end: a label classifier's calls whose prompts name the labels, a conversation's later turns with
the candidate's own earlier answers, a tool loop's, and a refresh's later turns.

Real pytest runs (pytester) of product suites recorded once, then replayed against a FakeOpenAI
candidate that keeps every request it was sent. The first test waits (up to a bound, never timed)
until the requests the others will send have come, so what the run then asks live is what could
not be foreseen, on a machine of any speed. What is checked is what the servers saw and what the
run reported.
"""

from __future__ import annotations

import collections
import json
import re
from pathlib import Path
from typing import Any

import pytest
from plugin_golden_helpers import run, write_project
from report_helpers import read_report
from slam_helpers import PRODUCT, said

from pytest_slam.golden.store import GoldenStore
from pytest_slam.testing import FakeOpenAI

CASES = 5
WAIT = """
import json, os, time, urllib.request, pytest
from openai import OpenAI

pytestmark = pytest.mark.slm
client = OpenAI()

def wait_for_the_others():
    # the first test waits until the later tests' requests, fetched ahead, have come
    if not os.environ.get("AHEAD"):
        return
    url = os.environ["STATS_URL"].removesuffix("/v1") + "/fake/stats"
    until = time.monotonic() + 20
    while time.monotonic() < until:
        with urllib.request.urlopen(url, timeout=5) as answer:
            if json.load(answer)["chat_requests"] >= int(os.environ["AHEAD"]):
                return
        time.sleep(0.05)
"""
CLASSIFIER = (
    WAIT
    + """
LABELS = "Classify the sentiment as positive, negative, or neutral. Answer with one word."

def classify(text):
    r = client.chat.completions.create(model="gpt-4", temperature=0, messages=[
        {"role": "system", "content": LABELS}, {"role": "user", "content": text}])
    return r.choices[0].message.content

@pytest.mark.parametrize("case", range(@CASES@))
def test_classify(case):
    if case == 0:
        wait_for_the_others()
    got = [classify(f"case {case} review {j}") for j in range(4)]
    assert got == [("positive", "negative")[(case + j) % 2] for j in range(4)]
"""
).replace("@CASES@", str(CASES))
CONVERSATION = (
    WAIT
    + """
@pytest.mark.parametrize("case", range(@CASES@))
def test_chat(case):
    if case == 0:
        wait_for_the_others()
    messages = []
    for turn in range(3):
        text = f"case {case} turn {turn}"
        if turn == 1 and os.environ.get("CHANGE") == str(case):
            text += ", reworded"  # the product changed its second turn since it was recorded
        messages.append({"role": "user", "content": text})
        r = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
        messages.append({"role": "assistant", "content": r.choices[0].message.content})
    assert messages[-1]["content"].endswith(f"case {case} turn 2")
"""
).replace("@CASES@", str(CASES))
TOOL_LOOP = (
    WAIT
    + """
TOOLS = [{"type": "function", "function": {"name": "weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]

@pytest.mark.parametrize("city", [f"city {i}" for i in range(@CASES@)])
def test_weather(city):
    if city == "city 0":
        wait_for_the_others()
    messages = [{"role": "user", "content": f"weather in {city}?"}]
    first = client.chat.completions.create(
        model="gpt-4", messages=messages, tools=TOOLS, temperature=0)
    message = first.choices[0].message
    messages.append(message.model_dump(exclude_none=True))
    for call in message.tool_calls:
        where = json.loads(call.function.arguments)["city"]
        messages.append({"role": "tool", "tool_call_id": call.id, "content": f"sunny in {where}"})
    second = client.chat.completions.create(
        model="gpt-4", messages=messages, tools=TOOLS, temperature=0)
    assert second.choices[0].message.content.endswith(f"sunny in {city}")
"""
).replace("@CASES@", str(CASES))
NUMBERS = re.compile(r"case (\d+) review (\d+)")


def _label(req: dict[str, Any]) -> str:
    found = NUMBERS.search(req["messages"][-1]["content"])
    assert found is not None
    return ("positive", "negative")[(int(found[1]) + int(found[2])) % 2]


def _saying(who: str) -> Any:
    return lambda req: f"{who} says: " + req["messages"][-1]["content"]


def _weather(who: str) -> Any:
    def answer(req: dict[str, Any]) -> Any:
        last = req["messages"][-1]
        if last["role"] == "tool":
            return f"{who}: " + last["content"]
        city = last["content"].removeprefix("weather in ").removesuffix("?")
        return {"content": None,
                "tool_calls": [{"function": {"name": "weather", "arguments": {"city": city}}}]}  # fmt: skip

    return answer


def _bodies(fake: FakeOpenAI) -> collections.Counter[str]:
    """Each chat request ``fake`` was sent, by its messages (tool-call ids aside: they are the
    model's own, new each time)."""
    ids = re.compile(r'"(id|tool_call_id)": "call_[0-9a-f]+"')
    return collections.Counter(
        ids.sub(r'"\1": _', json.dumps(r.json["messages"], sort_keys=True))
        for r in fake.requests
        if r.path.endswith("/chat/completions") and r.json
    )


def _calls(report: Path) -> list[dict[str, Any]]:
    outcomes = read_report(report)["outcomes"]
    return [c for o in outcomes for c in o["calls"]]


def _recorded(
    pytester: pytest.Pytester, suite: str, reference: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    pytester.makepyfile(test_product=suite)
    write_project(pytester, reference, candidate)
    run(pytester, "--slm-record=new").assert_outcomes(passed=CASES)


def _replayed(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI, ahead: int
) -> pytest.RunResult:
    fake.requests.clear()
    monkeypatch.setenv("STATS_URL", fake.base_url)
    monkeypatch.setenv("AHEAD", str(ahead))
    return run(pytester, "-p", "no:randomly", "--slm-report=r.json")


def test_a_label_classifiers_calls_are_all_fetched_ahead_once_each(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its prompts name the labels its answers are ("positive", 8 characters): before, a later
    call holding an earlier answer anywhere was left to its test (5 of 20 fetched here)."""
    with FakeOpenAI(_label) as gpt4, FakeOpenAI(_label, model="gpt-4o-mini") as mini:
        _recorded(pytester, CLASSIFIER, gpt4, mini)
        result = _replayed(pytester, monkeypatch, mini, (CASES - 1) * 4)
    result.assert_outcomes(passed=CASES)  # each test got its own labels
    asked = _bodies(mini)
    assert len(asked) == CASES * 4 and set(asked.values()) == {1}  # each once, none twice
    ahead = [c for c in _calls(pytester.path / "r.json") if c["fetched_ahead"]]
    assert len(ahead) == (CASES - 1) * 4  # every call of every test after the first
    assert f"mini: {len(ahead)} call(s) fetched ahead, {len(ahead)} used" in said(result)


def test_a_conversations_later_turns_are_fetched_with_the_candidates_own_answers(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded with one candidate's answers, replayed with another's: each later turn is
    foreseen with the answer the candidate gave now, fetched ahead and used."""
    with FakeOpenAI(_saying("GPT-4")) as gpt4:
        with FakeOpenAI(_saying("mini")) as mini:
            _recorded(pytester, CONVERSATION, gpt4, mini)
        with FakeOpenAI(_saying("mini v2"), model="gpt-4o-mini") as mini2:
            write_project(pytester, gpt4, mini2)
            result = _replayed(pytester, monkeypatch, mini2, (CASES - 1) * 3)
    result.assert_outcomes(passed=CASES)
    asked = _bodies(mini2)
    assert len(asked) == CASES * 3 and set(asked.values()) == {1}  # each once, none twice
    calls = _calls(pytester.path / "r.json")
    later = [c for c in calls if len(c["request"]["messages"]) > 1 and c["fetched_ahead"]]
    assert len(later) == (CASES - 1) * 2  # turns 2 and 3 of every test after the first
    assert all("mini v2 says: case" in c["request"]["messages"][1]["content"] for c in later)
    assert sum(c["fetched_ahead"] for c in calls) == (CASES - 1) * 3
    assert "fetched, unused" not in said(result)


def test_a_product_that_changed_its_second_turn_has_it_asked_live(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn foreseen from the goldens is not the request the product sends now: it is never
    its answer; the product's own is asked live (and the turn after it, which carries it)."""
    with FakeOpenAI(_saying("GPT-4")) as gpt4, FakeOpenAI(_saying("mini")) as mini:
        _recorded(pytester, CONVERSATION, gpt4, mini)
        monkeypatch.setenv("CHANGE", "3")
        result = _replayed(pytester, monkeypatch, mini, (CASES - 1) * 3)
    result.assert_outcomes(passed=CASES)
    calls = _calls(pytester.path / "r.json")
    changed = [c for c in calls if c["request"]["messages"][-1]["content"].startswith("case 3")]
    assert [c["fetched_ahead"] for c in changed] == [True, False, False]
    assert "reworded" in changed[1]["request"]["messages"][-1]["content"]
    assert set(_bodies(mini).values()) == {1}  # the product's requests asked once each
    assert "2 fetched, unused" in said(result)  # the foreseen turns 2 and 3 of case 3


def test_a_tool_loops_next_turn_is_fetched_when_the_candidate_calls_the_same_tool(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The candidate's tool call has its own id (new each answer) and the recorded arguments:
    the product's next turn carries that id in the assistant message and the tool result."""
    with FakeOpenAI(_weather("GPT-4")) as gpt4, FakeOpenAI(_weather("mini")) as mini:
        _recorded(pytester, TOOL_LOOP, gpt4, mini)
        result = _replayed(pytester, monkeypatch, mini, (CASES - 1) * 2)
    result.assert_outcomes(passed=CASES)
    asked = _bodies(mini)
    assert len(asked) == CASES * 2 and set(asked.values()) == {1}
    calls = _calls(pytester.path / "r.json")
    second = [c for c in calls if c["request"]["messages"][-1]["role"] == "tool"]
    assert sum(c["fetched_ahead"] for c in second) == CASES - 1
    assert sum(c["fetched_ahead"] for c in calls) == (CASES - 1) * 2


def test_a_refresh_fetches_the_references_later_turns_ahead(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refresh records the reference's answer to each turn the product sends; the candidate
    fed the conversation when it was recorded and feeds it again, so the later turns are the
    recorded ones: fetched ahead, each once, and the golden files hold the new answers."""
    with FakeOpenAI(_saying("mini")) as mini:
        with FakeOpenAI(_saying("GPT-4")) as gpt4:
            _recorded(pytester, CONVERSATION, gpt4, mini)
        with FakeOpenAI(_saying("GPT-4 (May)")) as may:
            write_project(pytester, may, mini)
            monkeypatch.setenv("STATS_URL", may.base_url)
            monkeypatch.setenv("AHEAD", str((CASES - 1) * 3))
            result = run(pytester, "-p", "no:randomly", "--slm-record=all")
    result.assert_outcomes(passed=CASES)
    asked = _bodies(may)
    assert len(asked) == CASES * 3 and set(asked.values()) == {1}  # each once, none twice
    fetched = re.search(r"gpt-4 \(reference\): (\d+) call\(s\) fetched ahead", said(result))
    assert fetched is not None and int(fetched[1]) >= (CASES - 1) * 3, said(result)
    assert "fetched, unused" not in said(result)
    store = GoldenStore(pytester.path / "__slam__", "gpt-4")
    texts = [r.answers[0].text for r in store.load("test_product.py").entries.values()]
    assert len(texts) == CASES * 3 and all(t.startswith("GPT-4 (May) says:") for t in texts)


MANY = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", [f"question {i}" for i in range(100)])
def test_answer(question):
    assert product.ask(question)
"""
COUNTING = """
import pytest
from pytest_slam.plugin import STASH

@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item):
    planner = item.config.stash[STASH].entry.planner  # what the run has planned by this test
    with open("planned.txt", "a", encoding="utf-8") as out:
        out.write(f"{len(planner._planned)}\\n")
"""


def test_the_plan_holds_a_window_of_the_tests_about_to_run_not_the_selection(
    pytester: pytest.Pytester,
) -> None:
    """At 4 in flight the run plans 16 calls ahead of the running test (run/test/fetching.budget):
    at its first test the plan holds 16 of the 99 tests after it (before: all 99), and it grows
    by one a test; every request is still asked once."""
    pytester.makepyfile(product=PRODUCT, test_product=MANY)
    with FakeOpenAI(_saying("GPT-4")) as gpt4, FakeOpenAI(_saying("mini")) as mini:
        write_project(pytester, gpt4, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=100)
        mini.requests.clear()
        pytester.makeconftest(COUNTING)
        result = run(pytester, "-p", "no:randomly", "--slm-concurrency", "4")
    result.assert_outcomes(passed=100)
    planned = [int(n) for n in (pytester.path / "planned.txt").read_text().split()]
    assert planned[0] == 16 and planned[1] == 17  # a window, then one more a test
    assert planned[-1] == 99  # by the end, every test after the first
    assert len(_bodies(mini)) == 100 and set(_bodies(mini).values()) == {1}
