"""A serial run starts its engines at a test's first call that one serves (issue 29): an
embeddings-only test starts no chat engine.

Real pytest runs (pytester); the candidate is the embedded SmolLM2 (a managed llama.cpp engine), the
product's hosted endpoint and the reference a loopback FakeOpenAI that serves embeddings.
"""

from __future__ import annotations

import pytest

from pytest_slam.testing import FakeOpenAI

EMBEDS = """
import openai, pytest

@pytest.mark.slm
def test_rank(slm_model):
    r = openai.OpenAI().embeddings.create(model="text-embedding-3-small", input=["refund"])
    assert r.data[0].embedding
"""
CHATS = """
import openai, pytest

@pytest.mark.slm
def test_ask(slm_model):
    openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Hi"}], max_tokens=4)
    assert len(slm_model.calls) == 1
"""
STARTED = "engine smollm2-135m: llama.cpp"


def project(pytester: pytest.Pytester, hosted: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.makefile(".toml", pyproject=f"""
[tool.slam]
candidates = ["smollm2-135m"]
reference = "gpt-4"
[tool.slam.models.gpt-4]
base_url = "{hosted.base_url}"
""")  # fmt: skip
    monkeypatch.setenv("OPENAI_BASE_URL", hosted.base_url)


def test_an_embeddings_only_test_starts_no_chat_engine(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_embed=EMBEDS)
    with FakeOpenAI("GPT-4 says hi") as hosted:
        project(pytester, hosted, monkeypatch)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new")
        embedded = [r for r in hosted.requests if r.path == "/v1/embeddings"]
    result.assert_outcomes(passed=1)
    assert len(embedded) == 1  # the test's call was served, by the hosted endpoint
    assert STARTED not in result.stdout.str()  # and the chat engine never started


@pytest.mark.engine
def test_the_engine_starts_at_the_first_chat_call_after_an_embeddings_only_test(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makepyfile(test_a_embed=EMBEDS, test_b_chat=CHATS)
    with FakeOpenAI("GPT-4 says hi") as hosted:
        project(pytester, hosted, monkeypatch)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new")
    result.assert_outcomes(passed=2)
    assert result.stdout.str().count(STARTED) == 1  # once, for the test that chats
