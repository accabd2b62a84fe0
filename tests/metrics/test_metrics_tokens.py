"""Tests of metrics.tokens against a real llama.cpp server (SmolLM2-135M) and tiktoken.

The server is the session's shared engine (conftest ``smollm2_url``), on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import socket
import statistics
import urllib.request

import pytest
from patience import patient
from slam_helpers import SHARED_DATA

from pytest_slam.metrics.tokens import (
    HEURISTIC,
    count_prompt_tokens,
    count_tokens,
    heuristic_count,
    is_estimated,
    llamacpp_count,
    message_text,
    openai_encoding,
)

DATA = SHARED_DATA
TEXT = "Hello world, how are you?"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=patient(60)) as response:
        return json.loads(response.read())


@pytest.fixture
def llama_base(smollm2_url: str) -> str:
    """Base URL (with /v1, as an OpenAI client is given it) of the session's real llama.cpp server."""
    return smollm2_url


def _prompt_tokens(base_v1: str, content: str) -> int:
    body = {"messages": [{"role": "user", "content": content}], "max_tokens": 1, "temperature": 0}
    return _post(f"{base_v1}/chat/completions", body)["usage"]["prompt_tokens"]


@pytest.mark.engine
def test_tokenize_matches_the_servers_own_usage(llama_base: str) -> None:
    count, method = count_tokens(TEXT, "smollm2-135m", base_url=llama_base)
    assert method == "llamacpp" and not is_estimated(method)
    # The chat template adds the same tokens around any message, so the difference in
    # usage.prompt_tokens between this message and an empty one is the message's own count.
    overhead = _prompt_tokens(llama_base, "")
    assert count == _prompt_tokens(llama_base, TEXT) - overhead
    assert count > 0


@pytest.mark.engine
def test_tokenize_is_deterministic_and_ignores_v1_and_slashes(llama_base: str) -> None:
    root = llama_base.removesuffix("/v1")
    counts = {llamacpp_count(TEXT, url) for url in (llama_base, llama_base + "/", root, root + "/")}
    assert len(counts) == 1
    assert llamacpp_count("", llama_base) == 0
    longer = llamacpp_count(TEXT + " " + TEXT, llama_base)
    assert longer > counts.pop()


@pytest.mark.engine
def test_server_without_tokenize_falls_back_and_says_so(llama_base: str) -> None:
    count, method = count_tokens(TEXT, "smollm2-135m", base_url=llama_base + "/no/such/route")
    assert (count, method) == (heuristic_count(TEXT), HEURISTIC)
    assert is_estimated(method)


def test_unreachable_server_falls_back() -> None:
    url = f"http://127.0.0.1:{_free_port()}/v1"  # nothing listens there
    assert count_tokens(TEXT, "smollm2-135m", base_url=url, timeout_s=2) == (7, HEURISTIC)


def test_heuristic_counts_words_punctuation_and_cjk() -> None:
    assert heuristic_count("") == 0
    assert heuristic_count("Hello, world!") == 4
    assert heuristic_count("你好世界") == 4
    assert heuristic_count("abc你好") == 3
    assert heuristic_count("   ") == 1  # some text always costs a token


def _cl100k():
    encoding, reason = openai_encoding("gpt-4")
    if encoding is None:
        pytest.skip(f"tiktoken path not exercised: {reason}")
    return encoding


def test_tiktoken_for_openai_models() -> None:
    _cl100k()
    assert count_tokens("hello world", "gpt-4") == (2, "tiktoken:cl100k_base")
    assert count_tokens("hello world", "openai:gpt-3.5-turbo-0125")[1] == "tiktoken:cl100k_base"
    assert count_tokens("<|endoftext|>", "gpt-4")[0] > 1  # special tokens count as plain text


def test_unavailable_encoding_falls_back_with_a_reason() -> None:
    encoding, reason = openai_encoding("gpt-4o")  # o200k_base: not bundled offline
    if encoding is not None:
        pytest.skip("o200k_base is loadable here; the fallback path is not exercised")
    assert re.search(r"o200k_base could not be loaded .*TIKTOKEN_CACHE_DIR", reason)
    assert count_tokens(TEXT, "gpt-4o") == (heuristic_count(TEXT), HEURISTIC)
    assert openai_encoding("smollm2-135m") == (
        None,
        "'smollm2-135m' is not an OpenAI model tiktoken knows",
    )


# The OpenAI cookbook's example ("How to count tokens with tiktoken"): the API billed 129 prompt
# tokens for it on gpt-4-0613, and the documented framing reproduces that count.
COOKBOOK = [
    {"role": "system", "content": "You are a helpful, pattern-following assistant that "
     "translates corporate jargon into plain English."},
    {"role": "system", "name": "example_user", "content": "New synergies will help drive "
     "top-line growth."},
    {"role": "system", "name": "example_assistant", "content": "Things working well together "
     "will increase revenue."},
    {"role": "system", "name": "example_user", "content": "Let's circle back when we have more "
     "bandwidth to touch base on opportunities for increased leverage."},
    {"role": "system", "name": "example_assistant", "content": "Let's talk later when we're less "
     "busy about how to do better."},
    {"role": "user", "content": "This late pivot means we don't have time to boil the ocean for "
     "the client deliverable."},
]  # fmt: skip


def test_chat_prompt_count_matches_what_the_api_billed() -> None:
    _cl100k()
    assert count_prompt_tokens(COOKBOOK, "gpt-4-0613") == (129, "tiktoken:cl100k_base")


def test_chat_prompt_count_with_content_parts_and_heuristic() -> None:
    parts = [{"role": "user", "content": [{"type": "text", "text": "Hello, world!"}]}]
    assert message_text(parts[0]["content"]) == "Hello, world!"
    assert count_prompt_tokens(parts, "mystery-model") == (3 + 3 + 1 + 4, HEURISTIC)


@pytest.mark.engine
def test_llamacpp_prompt_count_applies_the_chat_template(llama_base: str) -> None:
    messages = [{"role": "user", "content": TEXT}]
    count, method = count_prompt_tokens(messages, "smollm2-135m", base_url=llama_base)
    assert method == "llamacpp"
    assert count == _prompt_tokens(llama_base, TEXT)


def _answers() -> list[str]:
    path = DATA / "alpaca_eval_gpt4_vs_slm" / "records.jsonl"
    if not path.exists():
        pytest.skip(f"needs the recorded answers in {path} (../shared/data beside the repo)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [r["gpt4_output"] for r in rows] + [r["gpt4_turbo_output"] for r in rows]


def test_heuristic_is_close_to_cl100k_on_real_gpt4_answers() -> None:
    encoding = _cl100k()
    errors = []
    for text in _answers():
        exact = len(encoding.encode(text, disallowed_special=()))
        errors.append(abs(heuristic_count(text) - exact) / exact)
    assert len(errors) == 500
    assert statistics.median(errors) < 0.08
    assert sorted(errors)[int(0.9 * len(errors))] < 0.25
