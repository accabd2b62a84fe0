"""Clients that ignore OPENAI_BASE_URL are swapped too: real pytest runs (pytester), the real SDK.

``AzureOpenAI(azure_endpoint=...)`` and ``OpenAI(base_url="https://api.openai.com/v1")`` are redirected
at the HTTP transport (redirect.py) to the run's proxy, during opted-in tests only. The candidate is a
FakeOpenAI on loopback: the calls succeed with no network, are recorded on the test, and the candidate
never sees the caller's key (it has none of its own here, so it gets no Authorization at all).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI

SUITE = """
import asyncio
import pytest
from openai import AsyncAzureOpenAI, AzureOpenAI, OpenAI
from pytest_slam.swap import redirect

MSG = [{"role": "user", "content": "Where is my order?"}]
azure = AzureOpenAI(azure_endpoint="https://myres.openai.azure.com", api_version="2024-10-21",
                    api_key="azure-secret-key", max_retries=0)
hosted = OpenAI(base_url="https://api.openai.com/v1", api_key="sk-caller-secret", max_retries=0)

@pytest.mark.slm
def test_azure(slm_model):
    r = azure.chat.completions.create(model="support-gpt4", messages=MSG, max_tokens=16)
    (call,) = slm_model.calls
    assert r.choices[0].message.content == call.text == "mini says: Where is my order?"
    assert call.request["model"] == "support-gpt4"  # the deployment, as the product named it

@pytest.mark.slm
def test_azure_async_responses(slm_model):
    async def go():
        client = AsyncAzureOpenAI(azure_endpoint="https://myres.openai.azure.com",
                                  api_version="2025-03-01-preview", api_key="azure-secret-key")
        return await client.responses.create(model="support-gpt4", input="Hi", max_output_tokens=9)
    assert asyncio.run(go()).output_text == slm_model.calls[0].text == "mini says: Hi"

@pytest.mark.slm
def test_explicit_openai_base_url(slm_model):
    r = hosted.chat.completions.create(model="gpt-4o", messages=MSG, max_tokens=16, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in r if c.choices)
    assert text == slm_model.calls[0].text == "mini says: Where is my order?"

def test_not_opted_in_is_left_alone():
    assert redirect.active() is None

def test_a_redirected_call_outside_a_test_is_not_passed_on():
    import json, os, urllib.error, urllib.request
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/models", headers={
        "x-slam-redirected-from": "https://myres.openai.azure.com", "api-key": "azure-secret-key"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req)
    assert err.value.code == 409
    assert "redirected here outside an opted-in test" in json.load(err.value)["error"]["message"]
"""


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def test_azure_and_explicit_base_url_clients_are_swapped(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(test_clients=SUITE)
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-block-network", "-v"
    )
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        ["calls to api.openai.com were swapped too*", "calls to myres.openai.azure.com were*"]
    )
    assert [r.path for r in mini.requests] == ["/v1/chat/completions"] * 3
    for request in mini.requests:
        assert request.json["model"] == "mini"
        assert "authorization" not in request.headers and "api-key" not in request.headers
        assert "secret" not in str(request.headers)
