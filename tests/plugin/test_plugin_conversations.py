"""Conversations and agent loops replay against a candidate that answers differently every call.

A follow-up turn carries the candidate's own earlier answer, so its exact request has no golden on
replay; it is compared with the reference's turn at the same place (golden/turns.py) and named
"conversation diverged at turn k". Real pytest sessions (pytester), the real openai client, the
reference and the candidate as FakeOpenAI servers on loopback.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from report_helpers import read_report

from pytest_slam.compare.policy import EMPTY_REFERENCE
from pytest_slam.swap.request import CANDIDATE_SEED
from pytest_slam.testing import FakeOpenAI

PRODUCT = """
from openai import OpenAI

client = OpenAI()
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def chat_twice():
    messages = [{"role": "user", "content": "Name a colour."}]
    first = client.chat.completions.create(model="gpt-4", messages=messages, temperature=1)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "Now name a fruit of that colour."}]
    second = client.chat.completions.create(model="gpt-4", messages=messages, temperature=1)
    return second.choices[0].message.content


def weather_agent():
    # three steps: a tool call, another tool call, the answer
    messages = [{"role": "user", "content": "Weather in Paris and in Rome?"}]
    for _ in range(3):
        r = client.chat.completions.create(model="gpt-4", messages=messages, tools=TOOLS)
        message = r.choices[0].message
        messages.append(message)
        if not message.tool_calls:
            return message.content
        for call in message.tool_calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"})
"""
TESTS = """
import pytest
import product

pytestmark = [pytest.mark.slm, pytest.mark.slm_equivalence(at_least=0.5)]

def test_chat_twice():
    assert product.chat_twice()

def test_weather_agent():
    assert product.weather_agent()
"""


def model(tag: str) -> Any:
    """A model for both products; ``tag`` a callable giving each answer its suffix."""

    def answer(request: dict[str, Any]) -> Any:
        messages = request["messages"]
        if request.get("tools"):
            tools = sum(1 for m in messages if m["role"] == "tool")
            if tools < 2:
                city = ("Paris", "Rome")[tools]
                call = {"function": {"name": "get_weather", "arguments": {"city": city}}}
                return {
                    "content": f"Looking up the weather in {city}{tag()}.",
                    "tool_calls": [call],
                }
            return f"It is 18 C and sunny in both Paris and Rome{tag()}."
        if len(messages) == 1:
            return f"Blue is a fine colour{tag()}."
        return f"Blueberries are a fruit of that colour{tag()}."

    return answer


def varying() -> Any:
    """A candidate that answers differently on every call (a counter in every answer)."""
    counter = itertools.count(1)
    return model(lambda: f", take {next(counter)}")


def _project(pytester: pytest.Pytester, reference: FakeOpenAI, **files: str) -> None:
    """A project whose reference (GPT-4) is ``reference``, with ``files`` (name: source)."""
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n")
    pytester.makepyfile(**files)


def _golden(pytester: pytest.Pytester) -> dict[str, Any]:
    (path,) = (pytester.path / "__slam__").rglob("test_conversations.json")
    entries: dict[str, Any] = read_report(Path(path))["entries"]
    return entries


def _report(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    report: dict[str, Any] = read_report(pytester.path / name)
    return report


def test_a_conversation_and_a_tool_loop_replay_every_turn_compared(
    pytester: pytest.Pytester,
) -> None:
    with FakeOpenAI(model(str), model="gpt-4-0613") as reference:
        _project(pytester, reference, product=PRODUCT, test_conversations=TESTS)
        with FakeOpenAI(varying(), model="cand") as candidate:
            models = f"--slm-models={candidate.base_url}#cand"
            pytester.runpytest(models, "--slm-record=new").assert_outcomes(passed=2)
            assert reference.hits == 5  # 2 turns + 3 steps, each recorded once at its place
            recorded = _golden(pytester)
            places = sorted((test.split("::")[1], turn) for rec in recorded.values()
                            for test, turns in rec["turns"].items() for turn in turns)  # fmt: skip
            assert places == [("test_chat_twice", 1), ("test_chat_twice", 2),
                              ("test_weather_agent", 1), ("test_weather_agent", 2),
                              ("test_weather_agent", 3)]  # fmt: skip
            for run in ("replay1.json", "replay2.json"):
                result = pytester.runpytest(models, f"--slm-report={run}")
                result.assert_outcomes(passed=2)
                result.stdout.fnmatch_lines(["*conversations: 3 call(s) in 2 test(s) diverged*"])
                report = _report(pytester, run)
                by_test = {o["test"].split("::")[1]: o["pairs"] for o in report["outcomes"]}
                chat, agent = by_test["test_chat_twice"], by_test["test_weather_agent"]
                for pairs in (chat, agent):  # every turn compared, none missing
                    assert [p["missing"] for p in pairs] == [False] * len(pairs)
                    assert all(p["scores"] and p["reference_text"] for p in pairs)
                assert [p["diverged_at"] for p in chat] == [None, 2]
                assert [p["diverged_at"] for p in agent] == [None, 2, 2]
                assert chat[1]["reference_text"] == "Blueberries are a fruit of that colour."
                explanation = agent[2]["scores"][0]["explanation"]
                assert explanation.startswith(
                    "conversation diverged at turn 2: compared with the reference's turn 3; "
                )
                (row,) = report["models"]
                assert (row["pairs"], row["missing_golden"], row["pairs_equivalent"]) == (5, 0, 5)
                assert report["gate"] is None or report["gate"]["models"][0]["breaches"] == []
    assert reference.hits == 5  # replay never asked the reference
    assert _golden(pytester) == recorded  # nor changed the golden files
    # the candidate really answered differently: turn 2 of the chat was never sent twice the same
    seconds = [json.dumps(r.json["messages"]) for r in candidate.requests
               if len(r.json["messages"]) == 3 and not r.json.get("tools")]  # fmt: skip
    assert len(seconds) == 3 and len(set(seconds)) == 3
    assert {r.json["seed"] for r in candidate.requests} == {CANDIDATE_SEED}  # pinned
    assert all("seed" not in r.json for r in reference.requests)  # the reference as asked


def test_a_diverged_turn_that_differs_fails_naming_the_divergence(
    pytester: pytest.Pytester,
) -> None:
    with FakeOpenAI(model(str), model="gpt-4-0613") as reference:
        _project(pytester, reference, product=PRODUCT, test_conversations=TESTS)
        recorded = pytester.runpytest(  # GPT-4 as its own candidate: its own conversation
            f"--slm-models={reference.base_url}#gpt", "--slm-record=new", "-k", "chat"
        )
        recorded.assert_outcomes(passed=1)

        def wrong(request: dict[str, Any]) -> str:
            return "Blue." if len(request["messages"]) == 1 else "I refuse to talk about fruit."

        with FakeOpenAI(wrong, model="cand") as candidate:
            result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "-k", "chat")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*call 2: equivalence 0.* < 0.50 (fuzzy): conversation diverged at turn 2: compared "
        "with the reference's turn 2; *"
    ])  # fmt: skip


RETRY_PRODUCT = """
import json
from openai import OpenAI

client = OpenAI()


def extract():
    # what instructor and pydantic-ai do: resend the conversation with the validation error
    messages = [{"role": "user", "content": "Give the user as JSON with name and age."}]
    for _ in range(3):
        r = client.chat.completions.create(model="gpt-4", messages=messages,
                                           response_format={"type": "json_object"})
        text = r.choices[0].message.content
        try:
            data = json.loads(text)
            assert {"name", "age"} <= set(data)
            return data
        except (ValueError, AssertionError) as exc:
            messages += [{"role": "assistant", "content": text},
                         {"role": "user", "content": f"Fix the errors: {exc!r} in {text}"}]
"""
RETRY_TEST = """
import pytest
import product

@pytest.mark.slm
@pytest.mark.slm_equivalence("fuzzy", at_least=0.5)
def test_extract():
    assert product.extract()["name"] == "Ann"
"""


def test_a_validation_retry_replays_as_a_diverged_turn(pytester: pytest.Pytester) -> None:
    counter = itertools.count(1)

    def sloppy(request: dict[str, Any]) -> str:
        """Invalid JSON first (different every call), then the right object."""
        if len(request["messages"]) == 1:
            return f"name: Ann, age: {next(counter)}"
        return '{"name": "Ann", "age": 31}'

    with FakeOpenAI(sloppy, model="gpt-4-0613") as reference:
        _project(pytester, reference, product=RETRY_PRODUCT, test_conversations=RETRY_TEST)
        with FakeOpenAI(sloppy, model="cand") as candidate:
            models = f"--slm-models={candidate.base_url}#cand"
            pytester.runpytest(models, "--slm-record=new").assert_outcomes(passed=1)
            result = pytester.runpytest(models, "--slm-report=r.json")
    result.assert_outcomes(passed=1)
    (outcome,) = _report(pytester, "r.json")["outcomes"]
    assert [(p["missing"], p["diverged_at"]) for p in outcome["pairs"]] == [(False, None),
                                                                            (False, 2)]  # fmt: skip
    assert outcome["pairs"][1]["reference_text"] == '{"name": "Ann", "age": 31}'


N_TEST = """
import pytest
from openai import OpenAI

@pytest.mark.slm
def test_two_choices():
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Name a colour."}], n=2)
    assert len(r.choices) == 2
    assert [c.index for c in r.choices] == [0, 1]
    assert r.choices[0].message.content != r.choices[1].message.content
"""


def test_n_choices_from_a_candidate_that_refuses_n_are_n_calls(pytester: pytest.Pytester) -> None:
    counter = itertools.count(1)
    with (
        FakeOpenAI(lambda body: f"Colour {next(counter)}", max_n=1, model="cand") as candidate,
        FakeOpenAI(lambda body: ["Blue", "Red"], model="gpt-4-0613") as reference,
    ):
        _project(pytester, reference, test_n=N_TEST)
        result = pytester.runpytest(
            f"--slm-models={candidate.base_url}#cand", "--slm-record=new", "--slm-report=r.json"
        )
    result.assert_outcomes(passed=1)
    sent = [(r.json.get("n"), r.json["seed"]) for r in candidate.requests]
    assert sent == [(2, CANDIDATE_SEED), (None, CANDIDATE_SEED), (None, CANDIDATE_SEED + 1)]
    (outcome,) = _report(pytester, "r.json")["outcomes"]
    (pair,) = outcome["pairs"]
    assert len(pair["scores"]) == 2  # one score per choice
    (call,) = [c for c in outcome["calls"] if c["role"] == "candidate"]
    assert call["request"]["n"] == 2 and "seed" not in call["request"]
    assert [c["text"] for c in call["other_choices"]] == ["Colour 2"]


def _one_choice(text: str) -> bytes:
    """A chat completion with one choice whatever ``n`` asked: a server that ignores ``n``."""
    message = {"role": "assistant", "content": text, "refusal": None}
    return json.dumps({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }).encode()  # fmt: skip


N_ANY = N_TEST.replace("    assert len(r.choices) == 2\n", "").split("    assert [c.index")[0]
BANDS = (
    "[tool.slam.equivalence]\nat_least = 0.9\nfail_below = 0.3\n"
    "band_error = { pass = 0.03, pass_upper = 0.05, fail = 0.02, fail_upper = 0.06, n = 400 }\n"
)


@pytest.mark.parametrize(
    ("short", "verdict", "decided_by", "error", "only"),
    [
        ("candidate", "different", "empty", 0.0, "only the reference has this choice"),
        ("reference", "undecided", None, None, "only the candidate has this choice"),
    ],
)
def test_a_choice_only_one_side_has_is_decided_as_a_blank_answer_not_by_the_bands(
    pytester: pytest.Pytester,
    short: str,
    verdict: str,
    decided_by: str | None,
    error: float | None,
    only: str,
) -> None:
    """A missing candidate choice is the certain "empty" different (error 0), a missing reference
    choice decides nothing (re-record it): never the bands' verdict, with an error they never
    measured on missing answers."""

    def two(body: dict[str, Any]) -> list[str]:
        return ["Blue", "Red"]

    def one(body: dict[str, Any]) -> bytes:
        return _one_choice("Blue")

    with (
        FakeOpenAI(one if short == "candidate" else two, model="cand") as candidate,
        FakeOpenAI(one if short == "reference" else two, model="gpt-4-0613") as reference,
    ):
        _project(pytester, reference, test_n=N_ANY)
        (pytester.path / "pyproject.toml").write_text(
            (pytester.path / "pyproject.toml").read_text() + "\n" + BANDS
        )
        pytester.runpytest(
            f"--slm-models={candidate.base_url}#cand", "--slm-record=new", "--slm-report=r.json"
        )
    (outcome,) = _report(pytester, "r.json")["outcomes"]
    (pair,) = outcome["pairs"]
    first, second = pair["scores"]
    assert (first["verdict"], first["decided_by"]) == ("equivalent", "exact")
    assert (second["verdict"], second["decided_by"], second["error"]) == (
        verdict,
        decided_by,
        error,
    )
    assert second["explanation"].startswith(f"choice 1: {only}: ")
    assert second["why_undecided"] == (None if verdict != "undecided" else EMPTY_REFERENCE)
