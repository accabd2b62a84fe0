"""run/test/fetching.py and golden/foresee.py: which golden requests a test will send, read from its
entries by their structure, and a later turn foreseen from an earlier answer (no socket)."""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
from pathlib import Path

from golden_helpers import rec, store_at, write_module
from hypothesis import given
from hypothesis import strategies as st

from pytest_slam.golden.foresee import depends, foreseen
from pytest_slam.golden.keys import request_key
from pytest_slam.records import JSON, Call, GoldenAnswer, GoldenRecord
from pytest_slam.run.test.fetching import Chain, Module
from pytest_slam.swap.ahead import Fetched, Planned
from pytest_slam.swap.broker import Job
from pytest_slam.swap.chat import ChatResult

MODULE = "tests/test_x.py"
LABELS = "Classify the sentiment as positive, negative, or neutral. Answer with one word."


def _user(*texts: str) -> dict[str, object]:
    return {"messages": [{"role": "user", "content": t} for t in texts]}


def test_a_later_request_depends_only_on_an_answer_carried_whole() -> None:
    plain = _user("summarize: the earlier answer text")
    assert not depends(plain, [])
    assert not depends(plain, ["the earlier answer text"])  # a substring of the instructions
    assert depends(_user("the earlier answer text"), ["the earlier answer text"])  # a message
    assert depends(_user("  negative\n"), ["negative"])  # whole, whitespace aside
    quoted = _user(json.dumps({"previous": "negative", "text": "I hated it"}))
    assert depends(quoted, ["negative"])  # a JSON field's value
    nested = _user(json.dumps({"previous": {"label": "negative"}}))
    assert depends(nested, ['{"label": "negative"}'])  # an answer written as JSON, as a field
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "negative"}]}]}
    assert depends(parts, ["negative"])
    with_answer = {
        "messages": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    }
    assert depends(with_answer, [])
    assert depends({"messages": [{"role": "tool", "content": "1", "tool_call_id": "a"}]}, [])
    assert depends({"input": "no messages"}, [])


def test_a_label_classifiers_later_calls_do_not_depend_on_its_labels() -> None:
    """The held-out product of issue 49: every prompt names the labels, every answer is one;
    before, an 8-character answer ("positive", "negative") found in a later prompt made it
    dependent."""
    answers = ["positive", "negative", "neutral"]
    for review in ("Great phone", "Terrible battery", "It is a phone"):
        request = {"messages": [{"role": "system", "content": LABELS},
                                {"role": "user", "content": review}]}  # fmt: skip
        assert not depends(request, answers)


@given(
    st.text(min_size=1, max_size=40).filter(lambda t: t.strip() == t and t.strip()),
    st.text(max_size=40),
    st.text(max_size=40),
)
def test_an_answer_inside_other_text_is_never_a_dependence(
    answer: str, before: str, after: str
) -> None:
    text = f"{before}[{answer}]{after}"  # the answer inside other text, never the whole of it
    assert not depends(_user(text), [answer])
    assert depends(_user(text, answer), [answer])  # as a whole message: it is


def test_places_are_each_tests_entries_by_call_number_the_latest_first(tmp_path: Path) -> None:
    first = dataclasses.replace(rec("one"), turns={"tests/test_x.py::test_a": [1]})
    second = dataclasses.replace(rec("two"), turns={"tests/test_x.py::test_a": [2]})
    older = rec("one, as first asked")
    older = dataclasses.replace(
        older,
        turns={"tests/test_x.py::test_a": [1]},
        answers=[dataclasses.replace(older.answers[0], recorded_at="2023-01-01T00:00:00Z")],
    )
    untold = dataclasses.replace(rec("three"), tests=["tests/test_x.py::test_b"])  # no turns kept
    write_module(tmp_path, MODULE, first, second, older, untold)
    read = Module.read(store_at(tmp_path), MODULE)
    assert {t: r.key for t, r in read.turns("tests/test_x.py::test_a").items()} == {
        1: first.key,
        2: second.key,
    }
    assert read.turns("tests/test_x.py::test_b")[1].key == untold.key  # taken as a first call


def test_the_plan_reads_a_module_keeping_no_record_and_parses_a_test_s_entries_when_planned(
    tmp_path: Path,
) -> None:
    """Issue 53: the plan kept every record of the module (20 MiB at 5,000 entries) whichever
    tests ran; it keeps their keys, and a test's records are parsed when it is planned."""
    recs = [
        dataclasses.replace(rec(f"ticket {i}"), turns={f"tests/test_x.py::test_{i}": [1]})
        for i in range(200)
    ]
    write_module(tmp_path, MODULE, *recs)
    store = store_at(tmp_path)
    read = Module.read(store, MODULE)
    entries = store.load(MODULE).entries
    assert read.places["tests/test_x.py::test_7"] == {1: recs[7].key}
    assert entries.parsed == 0  # type: ignore[attr-defined]
    assert read.turns("tests/test_x.py::test_7")[1].key == recs[7].key
    assert entries.parsed == 1  # type: ignore[attr-defined]


def test_an_unreadable_golden_file_plans_nothing(tmp_path: Path) -> None:
    folder = store_at(tmp_path)
    path = folder.path_for(MODULE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ not json", encoding="utf-8")
    read = Module.read(folder, MODULE)
    assert read.places == {} and read.turns("tests/test_x.py::test_a") == {}


# -- a later turn foreseen ---------------------------------------------------------------------

TURN_1 = {"model": "gpt-4", "messages": [{"role": "user", "content": "first turn"}]}
TURN_2 = {
    "model": "gpt-4",
    "temperature": 0,
    "messages": [
        {"role": "user", "content": "first turn"},
        {"role": "assistant", "content": "as recorded"},
        {"role": "user", "content": "second turn"},
    ],
}


def test_a_conversations_next_turn_carries_the_answer_given_now() -> None:
    swaps: dict[str, str] = {}
    body = foreseen(TURN_1, TURN_2, TURN_1, ("given now", None), swaps)
    assert body == {**TURN_2, "messages": [TURN_1["messages"][0],
                    {"role": "assistant", "content": "given now"}, TURN_2["messages"][2]]}  # fmt: skip
    assert swaps == {"as recorded": "given now"}
    # the same answer as recorded: the very golden request
    assert foreseen(TURN_1, TURN_2, TURN_1, ("as recorded", None), {}) == TURN_2
    # a refresh's reference that did not feed the conversation: the recorded answer stays
    kept = foreseen(TURN_1, TURN_2, TURN_1, ("given now", None), {}, lambda recorded: False)
    assert kept == TURN_2


def test_a_chains_whole_field_carries_the_answer_given_now() -> None:
    later = _user("Translate to French:", json.dumps({"summary": "as recorded", "n": 1}))
    body = foreseen(TURN_1, later, TURN_1, ("given now", None), {"as recorded": "given now"})
    assert body is not None
    assert json.loads(body["messages"][1]["content"]) == {"summary": "given now", "n": 1}
    assert body["messages"][1]["content"] == json.dumps({"summary": "given now", "n": 1})


def _tool_turns(call_id: str, city: str) -> tuple[dict[str, object], dict[str, object]]:
    first = {"messages": [{"role": "user", "content": "weather in Paris?"}], "tools": ["t"]}
    call = {"id": call_id, "type": "function",
            "function": {"name": "weather", "arguments": json.dumps({"city": city})}}  # fmt: skip
    second = {**first, "messages": [
        *first["messages"],
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": call_id, "content": "sunny"},
    ]}  # fmt: skip
    return first, second


def test_a_tool_loops_next_turn_when_the_same_tool_is_called_with_the_same_arguments() -> None:
    first, second = _tool_turns("call_ref", "Paris")
    _, expected = _tool_turns("call_new", "Paris")
    same = [{"id": "call_new", "type": "function",
             "function": {"name": "weather", "arguments": json.dumps({"city": "Paris"})}}]  # fmt: skip
    assert foreseen(first, second, first, ("", same), {}) == expected  # ids carried over
    other = [{**same[0], "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}]
    assert foreseen(first, second, first, ("", other), {}) is None  # its tool answers otherwise


# -- a test's chain: its dependent calls foreseen as the answers come ----------------------------


def _entry(messages: list[dict[str, object]], answer: str) -> GoldenRecord:
    request: dict[str, object] = {"model": "gpt-4", "messages": messages}
    return GoldenRecord(request_key(request), request, [GoldenAnswer(answer)])


def _conversation(fed_by: str) -> dict[int, GoldenRecord]:
    """Three turns as recorded: the reference answered ``GPT-4 n``, the product's conversation
    carried ``fed_by n`` (the candidate's answers at recording time, or the reference's)."""
    turns: dict[int, GoldenRecord] = {}
    messages: list[dict[str, object]] = []
    for n in (1, 2, 3):
        messages = [*messages, {"role": "user", "content": f"question {n}"}]
        turns[n] = _entry(messages, f"GPT-4 {n}")
        messages = [*messages, {"role": "assistant", "content": f"{fed_by} {n}"}]
    return turns


def _answered(planned: Planned, text: str) -> Planned:
    """``planned`` as its broker job leaves it once the candidate answered ``text``."""
    job: Job[Fetched] = Job(planned.order, lambda _: Fetched(), threading.Event())
    job.set_running_or_notify_cancel()
    call = Call(model="m", role="candidate", request=planned.body, text=text)
    job.set_result(Fetched(ChatResult(call), [], 1))
    planned.job = job
    return planned


def _chain(turns: dict[int, GoldenRecord], own: bool = True) -> tuple[Chain, list[Planned]]:
    def make(chain: Chain, turn: int, body: dict[str, JSON]) -> Planned:
        return Planned("t", "m", request_key(body), body, None, turn,
                       follow_up=functools.partial(chain.answered, turn))  # fmt: skip

    chain = Chain(turns, make, own=own)
    first = []
    for turn in turns:
        if turn == 1 or not depends(turns[turn].request, []):
            chain.bodies[turn] = turns[turn].request
            first.append(make(chain, turn, turns[turn].request))
        else:
            chain.waiting.append(turn)
    return chain, first


def test_a_conversation_is_foreseen_turn_by_turn_with_the_candidates_answers() -> None:
    chain, [one] = _chain(_conversation("mini"))
    two = chain.answered(1, _answered(one, "mini v2 1"))
    assert two is not None and two.order == 2
    assert [m["content"] for m in two.body["messages"]] == ["question 1", "mini v2 1", "question 2"]
    three = chain.answered(2, _answered(two, "mini v2 2"))
    assert three is not None
    assert [m["content"] for m in three.body["messages"]][1:4] == ["mini v2 1", "question 2",
                                                                  "mini v2 2"]  # fmt: skip
    assert chain.answered(3, _answered(three, "mini v2 3")) is None  # nothing left
    assert three.key == request_key(three.body)  # what the router keys the product's request by


def test_a_dependent_call_waits_for_every_answer_before_it() -> None:
    turns = {1: _entry([{"role": "user", "content": "a"}], "x"),
             2: _entry([{"role": "user", "content": "b"}], "y"),
             3: _entry([{"role": "user", "content": "a"}, {"role": "assistant", "content": "x"},
                        {"role": "user", "content": "c"}], "z")}  # fmt: skip
    chain, [one, two] = _chain(turns)
    assert chain.answered(2, _answered(two, "y")) is None  # call 1 has not answered yet
    three = chain.answered(1, _answered(one, "x now"))
    assert three is not None and three.body["messages"][1]["content"] == "x now"


def test_a_refresh_foresees_its_own_answers_only_where_the_reference_fed_the_conversation() -> None:
    fed_by_candidate, _ = _chain(_conversation("mini"), own=False)
    two = fed_by_candidate.answered(1, _answered(_chain(_conversation("mini"))[1][0], "GPT-4 new"))
    assert two is not None and two.body == _conversation("mini")[2].request  # as recorded
    fed_by_reference, [one] = _chain(_conversation("GPT-4"), own=False)
    two = fed_by_reference.answered(1, _answered(one, "GPT-4 new"))
    assert two is not None and two.body["messages"][1]["content"] == "GPT-4 new"
