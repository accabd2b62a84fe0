"""A sampling candidate repeats (seed pinned) and ``n`` > 1 works on llama.cpp (n calls merged).

Against the real llama.cpp engine of the test session (conftest ``smollm2_url``), through the swap
layer's own ``forward_chat``.
"""

from __future__ import annotations

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.swap.choices import forward_candidate
from pytest_slam.swap.request import build

ASK = {
    "model": "gpt-4",
    "messages": [{"role": "user", "content": "Write one sentence about the sea."}],
    "temperature": 1.0,
    "max_tokens": 16,
}


def _target(url: str, provider: str) -> Target:
    return Target(ModelSpec("smol", provider, "SmolLM2-135M-Instruct", base_urls=[url]), url, None)


def test_a_sampling_candidate_gives_the_same_answer_twice(smollm2_url: str) -> None:
    target = _target(smollm2_url, "llamacpp")
    first, second = (forward_chat(target, dict(ASK)).call for _ in range(2))
    assert first.ok and second.ok, (first.error, second.error)
    assert first.text and first.text == second.text
    assert "seed" not in first.request  # the golden key is the product's request
    # the seed is what pins it: another one (the product's own) samples another answer
    third = forward_chat(target, {**ASK, "seed": 99}).call
    assert third.text != first.text


@pytest.mark.parametrize("provider", ["llamacpp", "endpoint"])  # known to lack n; answers 400
def test_n_choices_from_llama_cpp_are_n_calls_merged(smollm2_url: str, provider: str) -> None:
    target = _target(smollm2_url, provider)
    result = forward_candidate(target, build({**ASK, "n": 2}, target.spec, "candidate"))
    call = result.call
    assert call.ok, call.error
    assert result.completion is not None
    choices = result.completion["choices"]
    assert [c["index"] for c in choices] == [0, 1]
    texts = [c["message"]["content"] for c in choices]
    assert texts[0] == call.text and texts[1] == call.other_choices[0]["text"]  # type: ignore[index]
    assert texts[0] != texts[1]  # two samples (seeds 1234 and 1235), not one twice
    usage = result.completion["usage"]
    assert usage["completion_tokens"] == call.completion_tokens
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert call.request["n"] == 2
