"""Golden keys of tool loops: tool-call ids are made up anew by every answer, so they are replaced by
their order of appearance; everything else about a request without them keeps its old key."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_slam.golden.keys import canonical_request, request_key

BEFORE_TOOL_IDS = "6eddae1"  # the last commit whose keys did not normalise tool-call ids
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]


def loop(first_id: str, second_id: str, answers: tuple[str, str] = ("18 C", "21 C")) -> dict:
    """The second request of a tool loop: two parallel calls, their results, in the product's order."""
    calls = [
        {"id": first_id, "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        {"id": second_id, "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Rome"}'}},
    ]  # fmt: skip
    return {
        "model": "gpt-4",
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": "Weather in Paris and Rome?"},
            {"role": "assistant", "content": None, "tool_calls": calls},
            {"role": "tool", "tool_call_id": first_id, "content": answers[0]},
            {"role": "tool", "tool_call_id": second_id, "content": answers[1]},
        ],
    }


def test_random_tool_call_ids_do_not_change_the_key() -> None:
    assert request_key(loop("call_AbC123", "call_zz9")) == request_key(loop("call_q1", "call_q2"))
    messages = canonical_request(loop("call_AbC123", "call_zz9"))["messages"]
    assert [c["id"] for c in messages[1]["tool_calls"]] == ["call_0", "call_1"]
    assert [m["tool_call_id"] for m in messages[2:]] == ["call_0", "call_1"]


def test_which_result_answers_which_call_still_changes_the_key() -> None:
    swapped = loop("call_a", "call_b")
    swapped["messages"][2]["tool_call_id"], swapped["messages"][3]["tool_call_id"] = (
        "call_b",
        "call_a",
    )
    assert request_key(swapped) != request_key(loop("call_a", "call_b"))
    assert request_key(loop("a", "b", ("21 C", "18 C"))) != request_key(loop("a", "b"))


def test_arguments_and_names_are_not_normalised() -> None:
    other = loop("call_a", "call_b")
    other["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"city": "Lyon"}'
    assert request_key(other) != request_key(loop("call_a", "call_b"))


def test_ids_are_numbered_over_the_whole_conversation() -> None:
    body = loop("x1", "x2")
    third = {"id": "x3", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
    turn = {"role": "assistant", "content": None, "tool_calls": [third]}
    body["messages"] += [turn, {"role": "tool", "tool_call_id": "x3", "content": "?"}]
    messages = canonical_request(body)["messages"]
    assert (
        messages[4]["tool_calls"][0]["id"] == "call_2" and messages[5]["tool_call_id"] == "call_2"
    )


def _keys_at_head() -> ModuleType:
    """golden/keys.py before tool-call ids were normalised, to prove other keys did not change."""
    try:
        source = subprocess.run(
            ["git", "show", f"{BEFORE_TOOL_IDS}:pytest_slam/golden/keys.py"],
            cwd=Path(__file__).parent, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the git history of pytest-slam")
    spec = importlib.util.spec_from_loader("keys_at_head", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["keys_at_head"] = module
    exec(compile(source, "keys_at_head", "exec"), module.__dict__)
    return module


text = st.text(max_size=12)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "developer"]), "content": text},
    optional={"name": text},
)
REQUEST = st.fixed_dictionaries(
    {"model": st.sampled_from(["gpt-4", "gpt-4o"]), "messages": st.lists(MESSAGE, max_size=4)},
    optional={
        "temperature": st.one_of(st.none(), st.floats(0, 2), st.integers(0, 2)),
        "tools": st.just(TOOLS),
        "stop": st.one_of(text, st.lists(text, max_size=2)),
        "stream": st.booleans(),
        "n": st.integers(1, 3),
        "logprobs": st.booleans(),
    },
)


@pytest.fixture(scope="module")
def old_keys() -> ModuleType:
    return _keys_at_head()


@settings(max_examples=200, deadline=None)
@given(body=REQUEST)
def test_requests_without_tool_ids_keep_their_old_key(old_keys: ModuleType, body: dict) -> None:
    assert request_key(body) == old_keys.request_key(body)
