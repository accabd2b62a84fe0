"""The matching key of a conversation turn (golden/turns.py) and the places golden files keep."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.reference import MissingGolden, ReferenceService
from pytest_slam.golden.store import GoldenStore
from pytest_slam.golden.turns import reference_turn, request_shape, shape_key
from pytest_slam.records import GoldenAnswer, GoldenRecord, ModelSpec

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]
TEST = "tests/test_agent.py::test_weather"


def loop(
    answer: str, city: str, result: str, call_id: str, follow_up: str = "Thanks."
) -> dict[str, Any]:
    """Turn 3 of a tool loop, whose earlier answers are ``answer`` calling get_weather(city)."""
    return {
        "model": "gpt-4", "tools": TOOLS,
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": answer, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "get_weather", "arguments": json.dumps({"city": city})}}]},
            {"role": "tool", "tool_call_id": call_id, "content": result},
            {"role": "user", "content": follow_up},
        ],
    }  # fmt: skip


BASE = loop("Let me look.", "Paris", "18 C", "call_abc")


@pytest.mark.parametrize(
    "other",
    [
        loop("One moment, checking.", "Paris", "18 C", "call_abc"),  # the candidate's own text
        loop("Let me look.", "Paris, France", "18 C", "call_abc"),  # its arguments
        loop("Let me look.", "Paris", "It is 18 C and sunny", "call_abc"),  # the tool's result
        loop("Let me look.", "Paris", "18 C", "call_abc", "Fix: 'age' is missing in {...}"),
        {**BASE, "seed": 7},  # the seed pytest-slam pins
    ],
    ids=["text", "arguments", "tool result", "later user text", "seed"],
)
def test_what_the_candidate_caused_is_set_aside(other: dict[str, Any]) -> None:
    assert request_key(other) != request_key(BASE)  # no exact golden on replay
    assert shape_key(other) == shape_key(BASE)
    # the strict shape (recording) keeps the later user texts: the product may have changed them
    later = other["messages"][-1] != BASE["messages"][-1]
    assert (shape_key(other, strict=True) == shape_key(BASE, strict=True)) is not later


@pytest.mark.parametrize(
    "other",
    [
        {
            **BASE,
            "messages": [{"role": "system", "content": "You are terse."}, *BASE["messages"][1:]],
        },
        {
            **BASE,
            "messages": [
                BASE["messages"][0],
                {"role": "user", "content": "Rome?"},
                *BASE["messages"][2:],
            ],
        },
        {**BASE, "messages": BASE["messages"][:-1]},  # one message fewer: another turn's shape
        {
            **BASE,
            "messages": [
                *BASE["messages"][:2],
                {
                    **BASE["messages"][2],
                    "tool_calls": [
                        {
                            **BASE["messages"][2]["tool_calls"][0],
                            "function": {"name": "delete_account", "arguments": "{}"},
                        }
                    ],
                },
                *BASE["messages"][3:],
            ],
        },  # another tool in the sequence
        {**BASE, "temperature": 0.2},
        {**BASE, "tools": []},
        {**BASE, "model": "gpt-4o"},
    ],
    ids=["system prompt", "first user text", "roles", "tool name", "temperature", "tools", "model"],
)
def test_what_the_product_wrote_is_kept(other: dict[str, Any]) -> None:
    assert shape_key(other) != shape_key(BASE)


def test_the_shape_is_readable_roles_tools_and_the_opening_prompt() -> None:
    assert request_shape(BASE)["messages"] == [
        {"role": "system", "content": "You are a weather bot."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "tools": ["get_weather"]},
        {"role": "tool"},
        {"role": "user"},
    ]
    assert request_shape(BASE, strict=True)["messages"][-1] == {
        "role": "user",
        "content": "Thanks.",
    }


def record(
    body: dict[str, Any], text: str, turns: dict[str, list[int]], at: str = "2026-01-01T00:00:00Z"
) -> GoldenRecord:
    answer = GoldenAnswer(text=text, recorded_at=at)
    return GoldenRecord(key=request_key(body), request=body, answers=[answer], turns=turns)


def test_the_reference_turn_is_the_same_test_place_and_shape_the_last_recorded_winning() -> None:
    asked = loop("Different words.", "Paris", "19 C", "call_q")
    here = record(BASE, "old", {TEST: [3]})
    newer = record(loop("x", "Paris", "18 C", "c"), "new", {TEST: [3]}, "2026-02-01T00:00:00Z")
    elsewhere = [
        record(BASE, "other test", {"tests/test_agent.py::test_rome": [3]}),
        record(BASE, "other turn", {TEST: [2]}),
        record({**BASE, "temperature": 0.0}, "other shape", {TEST: [3]}),
    ]
    assert reference_turn([here, *elsewhere], TEST, 3, asked) is here
    assert reference_turn([*elsewhere, newer, here], TEST, 3, asked) is newer
    assert reference_turn(elsewhere, TEST, 3, asked) is None


def test_a_changed_follow_up_prompt_is_matched_on_replay_and_recorded_anew() -> None:
    asked = loop("Let me look.", "Paris", "18 C", "call_abc", "And tomorrow?")
    here = record(BASE, "Sunny.", {TEST: [3]})
    assert reference_turn([here], TEST, 3, asked) is here  # replay: the lenient shape
    assert reference_turn([here], TEST, 3, asked, lenient=False) is None  # recording: strict
    anew = record(asked, "Rain tomorrow.", {TEST: [3]}, "2025-01-01T00:00:00Z")  # recorded earlier
    assert reference_turn([here, anew], TEST, 3, asked) is anew  # the strict shape first


def test_places_are_kept_in_the_file_and_old_files_read_without_them(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    first = {**BASE, "messages": BASE["messages"][:2]}
    store.record("tests/test_agent.py", record(first, "Let me look.", {TEST: [1]}), TEST)
    store.record("tests/test_agent.py", record(BASE, "Sunny.", {TEST: [3]}), TEST)
    path = store.path_for("tests/test_agent.py")
    entries = json.loads(path.read_text())["entries"]
    assert entries[request_key(BASE)]["turns"] == {TEST: [3]}
    # an entry of an older file (no "turns") reads with none, and a visit adds its place
    del entries[request_key(first)]["turns"]
    path.write_text(json.dumps({"schema": "pytest-slam/golden/1", "reference": "openai:gpt-4",
                                "entries": entries}, indent=2))  # fmt: skip
    again = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    assert again.lookup("tests/test_agent.py", request_key(first)).turns == {}  # type: ignore[union-attr]
    assert [r.answers[0].text for r in again.at_place("tests/test_agent.py", TEST, 3)] == ["Sunny."]
    assert again.at_place("tests/test_agent.py", TEST, 1) == []
    again.mark_used("tests/test_agent.py", request_key(first), TEST, 1)
    again.save("tests/test_agent.py")
    entries = json.loads(path.read_text())["entries"]
    assert entries[request_key(first)]["turns"] == {TEST: [1]}
    # a record with no place writes no "turns" at all (files of other callers stay as they were)
    store.record("tests/test_other.py", record(first, "x", {}))
    text = store.path_for("tests/test_other.py").read_text()
    assert '"turns"' not in text


def test_replay_serves_the_place_and_a_miss_says_there_is_none(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    spec = ModelSpec("openai:gpt-4", "openai", "gpt-4")
    service = ReferenceService(spec, store, mode="none")
    store.record("tests/test_agent.py", record(BASE, "Sunny.", {TEST: [3]}), TEST)
    asked = loop("Other words.", "Paris", "19 C", "call_q")
    served = service.answer("tests/test_agent.py", TEST, asked, TEST, turn=3)
    assert served.key == request_key(BASE) != request_key(asked)
    with pytest.raises(MissingGolden, match="nor for call 2 of this test"):
        service.answer("tests/test_agent.py", TEST, asked, TEST, turn=2)
    with pytest.raises(MissingGolden, match=r"\(key \w+\) in"):  # no place known: as before
        service.answer("tests/test_agent.py", TEST, asked, TEST)


def test_found_reads_the_file_and_nothing_else(tmp_path: Path) -> None:
    """The lookup alone: it marks no entry visited and never asks the reference, whose spec
    here has no server (asking it would raise); ``answer`` marks the visit."""
    written = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    written.record("tests/test_agent.py", record(BASE, "Sunny.", {TEST: [3]}), TEST)
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")  # the next run's: nothing visited
    spec = ModelSpec("openai:gpt-4", "openai", "gpt-4")
    service = ReferenceService(spec, store, mode="new")  # a record run: a miss would be asked
    asked = loop("Other words.", "Paris", "19 C", "call_q")
    assert service.found("tests/test_agent.py", TEST, BASE) is not None
    placed = service.found("tests/test_agent.py", TEST, asked, turn=3)
    assert placed is not None and placed.key == request_key(BASE)
    assert service.found("tests/test_agent.py", TEST, asked, turn=2) is None  # no ask, no raise
    assert store.visited == {}
    service.answer("tests/test_agent.py", TEST, BASE, TEST, turn=3)
    assert request_key(BASE) in store.visited["tests/test_agent.py"]


def test_the_miss_before_the_candidate_refuses_what_the_pairing_would(tmp_path: Path) -> None:
    """An exact entry with no answers is a miss for the pairing (``answer`` raises), even with a
    reference turn at the call's place: the miss found before the candidate is asked says so too."""
    from types import SimpleNamespace

    written = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    asked = loop("Other words.", "Paris", "19 C", "call_q")
    written.record("tests/test_agent.py", record(BASE, "Sunny.", {TEST: [3]}), TEST)
    empty = GoldenRecord(key=request_key(asked), request=asked, answers=[], tests=[TEST])
    written.record("tests/test_agent.py", empty, TEST)
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    service = ReferenceService(ModelSpec("openai:gpt-4", "openai", "gpt-4"), store, mode="none")
    ctx = SimpleNamespace(module="tests/test_agent.py", test=TEST, nodeid=TEST)
    with pytest.raises(MissingGolden):
        service.answer("tests/test_agent.py", TEST, asked, TEST, turn=3)
    miss = service.miss_before(ctx, asked, 3)  # type: ignore[arg-type]
    assert miss is not None and miss[0] == request_key(asked)
    assert service.miss_before(ctx, BASE, 3) is None  # an entry with its answer: no miss


def test_a_replayed_call_reads_its_entry_once_for_the_miss_check_and_the_pairing(
    tmp_path: Path,
) -> None:
    """The entry ``miss_before`` read before the candidate was asked is the one the pairing's
    ``answer`` serves after the test: the golden file is read once a call, and the visit is still
    marked by ``answer`` alone."""
    from types import SimpleNamespace

    written = GoldenStore(tmp_path / "__slam__", "openai:gpt-4", write_through=True)
    written.record("tests/test_agent.py", record(BASE, "Sunny.", {TEST: [3]}), TEST)
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    service = ReferenceService(ModelSpec("openai:gpt-4", "openai", "gpt-4"), store, mode="none")
    reads: list[str] = []
    lookup = store.lookup

    def counted(module: str, key: str) -> GoldenRecord | None:
        reads.append(key)
        return lookup(module, key)

    store.lookup = counted  # type: ignore[method-assign]
    ctx = SimpleNamespace(module="tests/test_agent.py", test=TEST, nodeid=TEST)
    assert service.miss_before(ctx, BASE, 3) is None  # type: ignore[arg-type]
    assert store.visited == {}
    served = service.answer("tests/test_agent.py", TEST, BASE, TEST, turn=3)
    assert served.answers[0].text == "Sunny." and reads == [request_key(BASE)]
    assert request_key(BASE) in store.visited["tests/test_agent.py"]
    service.answer("tests/test_agent.py", TEST, BASE, TEST, turn=3)  # handed once: read again
    assert reads == [request_key(BASE)] * 2
