"""Embeddings in an opted-in test: never sent to the chat candidate, recorded, replayed with no key.

Real pytest runs (pytester). The hosted OpenAI is a FakeOpenAI that wants the product's key: it is the
product's configured ``OPENAI_BASE_URL`` and the reference. The candidate is the real embedded engine
(llama.cpp, which cannot embed with a chat model): the vectors the product gets are the hosted
endpoint's, recorded in the golden file, and a replay with that endpoint stopped and no key set gives
the same vectors.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI

KEY = "sk-product-key"
SUITE = """
import openai, pytest
from pytest_slam.testing.fake_openai import embed

@pytest.mark.slm
def test_rank(slm_model):
    client = openai.OpenAI()
    r = client.embeddings.create(model="text-embedding-3-small",
                                 input=["refund policy", "password reset"])
    for item, text in zip(r.data, ["refund policy", "password reset"]):
        assert item.embedding == pytest.approx(embed(text), abs=1e-6)
    client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "Hi"}],
                                   max_tokens=4, temperature=0)
    assert len(slm_model.calls) == 1  # the chat call; the embeddings call is not a candidate call
"""


@pytest.fixture
def hosted() -> Iterator[FakeOpenAI]:
    """The hosted API: the product's endpoint, the reference, and the only one with embeddings."""
    with FakeOpenAI(lambda req: "GPT-4 says hi", api_key=KEY) as fake:
        yield fake


def test_embeddings_go_to_the_original_endpoint_and_replay_from_goldens(
    pytester: pytest.Pytester, hosted: FakeOpenAI, smollm2_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    pytester.makepyfile(test_embed=SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "gpt-4"
[tool.slam.models.gpt-4]
base_url = "{hosted.base_url}"
api_key_env = "OPENAI_API_KEY"
""")  # fmt: skip
    monkeypatch.setenv("OPENAI_BASE_URL", hosted.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    models = f"--slm-models={smollm2_endpoint}"
    pytester.runpytest("-p", "no:cacheprovider", models, "--slm-record=new").assert_outcomes(
        passed=1
    )
    (embedding,) = [r for r in hosted.requests if r.path == "/v1/embeddings"]
    assert embedding.headers["authorization"] == f"Bearer {KEY}"  # the product's own key, there
    assert embedding.json["model"] == "text-embedding-3-small"
    (path,) = [p for p in pytester.path.rglob("test_embed.json") if ".slam" not in p.parts]
    entries = json.loads(path.read_text(encoding="utf-8"))["entries"].values()
    assert sorted("input" in e["request"] for e in entries) == [False, True]

    hosted.stop()
    monkeypatch.delenv("OPENAI_API_KEY")
    replay = pytester.runpytest("-p", "no:cacheprovider", models)
    replay.assert_outcomes(passed=1)


def test_a_configured_embeddings_model_answers_with_its_own_name_and_no_caller_key(
    pytester: pytest.Pytester, smollm2_endpoint: str
) -> None:
    with FakeOpenAI() as embedder:
        pytester.makepyfile(test_embed=SUITE)
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "none"
embeddings = "{embedder.base_url}#embed-small"
""")  # fmt: skip
        result = pytester.runpytest("-p", "no:cacheprovider", f"--slm-models={smollm2_endpoint}")
        result.assert_outcomes(passed=1)
        (request,) = embedder.requests
    assert request.path == "/v1/embeddings" and request.json["model"] == "embed-small"
    assert "authorization" not in request.headers  # the caller's key is not the model's
