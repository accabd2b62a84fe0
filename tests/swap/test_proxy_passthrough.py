"""Never lend the user's key: a call outside opted-in tests reaches the product's own upstream with the
caller's exact headers, and the environment's key goes only where the caller itself sent it.

A real pytest run (pytester) with ``OPENAI_BASE_URL`` pointing at a FakeOpenAI (the product's own
endpoint) and ``OPENAI_API_KEY`` set, as on a developer's machine. The plain test makes the same call
once straight to that endpoint and once through the swap proxy; the fake records both.
"""

from __future__ import annotations

import json

import pytest
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.swap.proxy import forwarded_headers
from pytest_slam.testing import FakeOpenAI

ENV_KEY = "sk-env-key-never-to-be-lent-0123456789"

SUITE = """
import os, urllib.request
import openai, pytest

MSG = [{{"role": "user", "content": "same question"}}]
OWN = dict(api_key="sk-callers-own-key", organization="org-caller", project="proj-caller",
           default_headers={{"X-Custom": "custom value"}}, max_retries=0)

def test_plain():
    openai.OpenAI(base_url="{upstream}", **OWN).chat.completions.create(model="gpt-4", messages=MSG)
    openai.OpenAI(**OWN).chat.completions.create(model="gpt-4", messages=MSG)  # through the proxy
    assert openai.OpenAI(max_retries=0).models.list().data  # the env key, sent by the caller itself
    req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/models")  # no key at all
    urllib.request.urlopen(req, timeout=60).read()

@pytest.mark.slm
def test_swapped():
    client = openai.OpenAI(max_retries=0)  # the env key: never sent on to the candidate
    assert client.chat.completions.create(model="gpt-4", messages=MSG).choices
    assert client.models.list().data  # not chat: relayed to the candidate, with its own key (none)
"""


def test_passthrough_carries_the_callers_exact_headers_and_never_the_env_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI("from the product's endpoint") as own, FakeOpenAI("candidate") as cand:
        monkeypatch.setenv("OPENAI_BASE_URL", own.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", ENV_KEY)
        write_pyproject(pytester, cand.base_url, name="cand", model=None)
        pytester.makepyfile(product=PRODUCT, test_calls=SUITE.format(upstream=own.base_url))
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(passed=2)

    direct, proxied, with_env_key, keyless = own.requests
    hop = {"host", "connection"}
    assert {k: v for k, v in proxied.headers.items() if k not in hop} == {
        k: v for k, v in direct.headers.items() if k not in hop
    }
    assert proxied.json == direct.json and proxied.path == direct.path
    assert proxied.headers["authorization"] == "Bearer sk-callers-own-key"
    assert proxied.headers["openai-organization"] == "org-caller"
    assert proxied.headers["openai-project"] == "proj-caller"
    assert proxied.headers["x-custom"] == "custom value"
    assert with_env_key.headers["authorization"] == f"Bearer {ENV_KEY}"
    assert "authorization" not in keyless.headers
    assert [r.path for r in cand.requests] == ["/v1/chat/completions", "/v1/models"]
    assert all("authorization" not in r.headers for r in cand.requests)
    everything = json.dumps([r.headers for r in (direct, proxied, keyless, *cand.requests)])
    assert ENV_KEY not in everything


def test_hop_by_hop_headers_and_those_connection_names_stay_behind() -> None:
    caller = [
        ("authorization", "Bearer sk-own"),
        ("connection", "keep-alive, x-hop"),
        ("keep-alive", "timeout=5"),
        ("x-hop", "1"),
        ("transfer-encoding", "chunked"),
        ("host", "127.0.0.1:1234"),
        ("content-length", "12"),
        ("openai-organization", "org-1"),
        ("x-custom", "a"),
        ("x-custom", "b"),
    ]
    assert forwarded_headers(caller) == [
        ("authorization", "Bearer sk-own"),
        ("openai-organization", "org-1"),
        ("x-custom", "a"),
        ("x-custom", "b"),
    ]
