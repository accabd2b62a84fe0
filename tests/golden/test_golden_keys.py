"""Canonical requests: transport details never change a key, anything the model sees does."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_slam.golden.keys import canonical_json, canonical_request, request_key

BASE = {
    "model": "gpt-4",
    "messages": [
        {"role": "system", "content": "You triage support tickets."},
        {"role": "user", "content": "My invoice is wrong, café ☕"},
    ],
    "temperature": 0,
}


def test_key_is_sha256_of_canonical_json_first_16_hex():
    text = json.dumps(
        canonical_request(BASE), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    assert canonical_json(canonical_request(BASE)) == text
    assert "café ☕" in text
    assert request_key(BASE) == hashlib.sha256(text.encode()).hexdigest()[:16]


@pytest.mark.parametrize(
    "transport",
    [
        {"stream": True},
        {"stream": True, "stream_options": {"include_usage": True}},
        {"timeout": 30},
        {"user": "customer-42"},
        {"metadata": {"run": "ci"}},
        {"store": True},
        {"service_tier": "flex"},
        {"extra_headers": {"Authorization": "Bearer sk-test"}},
        {"extra_query": {"api-version": "2024-02-01"}},
        {"prompt_cache_key": "tenant-7"},
    ],
)
def test_transport_fields_do_not_change_the_key(transport):
    assert request_key({**BASE, **transport}) == request_key(BASE)
    assert not set(transport) & set(canonical_request({**BASE, **transport}))


@pytest.mark.parametrize(
    "change",
    [
        {"model": "gpt-4o"},
        {"temperature": 0.7},
        {"messages": [{"role": "user", "content": "My invoice is wrong"}]},
        {"messages": [*BASE["messages"][:1], {"role": "user", "content": "My invoice is wrong "}]},
        {"top_p": 0.5},
        {"seed": 1},
        {"max_tokens": 10},
        {"max_completion_tokens": 10},
        {"stop": ["\n"]},
        {"n": 2},
        {"response_format": {"type": "json_object"}},
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}]},
        {"logit_bias": {"50256": -100}},
        {"reasoning_effort": "low"},
        {"top_k": 5},  # unknown vendor field: kept, a miss beats a wrong hit
    ],
)
def test_what_the_model_sees_changes_the_key(change):
    assert request_key({**BASE, **change}) != request_key(BASE)


def test_representation_only_differences_share_a_key():
    same = {
        "model": "gpt-4",
        "temperature": 0.0,
        "top_p": 1,
        "n": 1,
        "presence_penalty": 0,
        "logit_bias": {},
        "stop": None,
        "tools": [],
        "tool_choice": "none",
        "response_format": {"type": "text"},
        "messages": [
            {
                "role": "system",
                "content": [{"type": "text", "text": "You triage support tickets."}],
            },
            {"role": "user", "content": "My invoice is wrong, café ☕", "name": None},
        ],
    }
    assert request_key(same) == request_key(BASE)
    assert request_key({**BASE, "stop": "END"}) == request_key({**BASE, "stop": ["END"]})
    assert request_key({**BASE, "extra_body": {"seed": 3}}) == request_key({**BASE, "seed": 3})


def test_defaults_are_only_dropped_when_they_are_defaults():
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    with_tools = {**BASE, "tools": tools}
    assert request_key({**with_tools, "tool_choice": "auto"}) == request_key(with_tools)
    assert request_key({**with_tools, "tool_choice": "none"}) != request_key(with_tools)
    assert request_key({**BASE, "temperature": 1}) == request_key({**BASE, "temperature": None})
    assert request_key({**BASE, "logprobs": True}) != request_key(BASE)
    two_parts = [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]
    msgs = [{"role": "user", "content": two_parts}]
    assert canonical_request({"messages": msgs})["messages"][0]["content"] == two_parts


def test_an_sdk_message_sent_back_matches_the_plain_dict():
    from openai.types.chat import ChatCompletionMessage

    reply = ChatCompletionMessage(role="assistant", content="Refund issued.")
    as_sdk = {**BASE, "messages": [*BASE["messages"], reply.model_dump()]}
    as_dict = {
        **BASE,
        "messages": [*BASE["messages"], {"role": "assistant", "content": "Refund issued."}],
    }
    assert request_key(as_sdk) == request_key(as_dict)


def test_not_a_dict_is_a_readable_error():
    with pytest.raises(TypeError, match="chat request body"):
        canonical_request(["gpt-4"])  # type: ignore[arg-type]


bodies = st.fixed_dictionaries(
    {"model": st.sampled_from(["gpt-4", "gpt-4o"])},
    optional={
        "messages": st.lists(
            st.fixed_dictionaries(
                {"role": st.sampled_from(["user", "assistant"]), "content": st.text()},
                optional={"name": st.none() | st.text(max_size=3)},
            ),
            max_size=3,
        ),
        "temperature": st.none() | st.integers(0, 2) | st.floats(0, 2),
        "stop": st.none() | st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=2),
        "stream": st.booleans(),
        "tool_choice": st.sampled_from(["auto", "none"]),
        "top_k": st.none() | st.integers(1, 50),
    },
)


@given(bodies, st.randoms())
def test_keys_are_stable_under_dict_order_and_canonicalizing_twice(body, rnd):
    items = list(body.items())
    rnd.shuffle(items)
    assert request_key(dict(items)) == request_key(body)
    once = canonical_request(body)
    assert canonical_request(once) == once
    assert request_key(once) == request_key(body)
