"""The transport-level redirect of clients that OPENAI_BASE_URL cannot reach.

Real ``AzureOpenAI`` / ``OpenAI(base_url=<OpenAI host>)`` clients; every request they make ends at the
loopback fake of the hosted API started here (standing in for the swap proxy), so nothing leaves the
machine: a request that was not redirected would fail DNS (``*.invalid``) or show up without the
redirect header.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from unittest import mock

import httpx2
import openai
import pytest

from pytest_slam.swap import redirect
from pytest_slam.swap.redirect import DEFAULT_HOSTS, HEADER, Redirected, api_path
from pytest_slam.testing import FakeOpenAI

ANSWER = "Redirected to the candidate."
AZURE = "https://contoso.openai.azure.com"
GATEWAY = "llm-gateway.corp.invalid"
ORIGINAL_SYNC = httpx2.HTTPTransport.handle_request
ORIGINAL_ASYNC = httpx2.AsyncHTTPTransport.handle_async_request
MESSAGES = [{"role": "user", "content": "Hi"}]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER) as server:
        yield server


@pytest.fixture
def seen(fake: FakeOpenAI) -> Iterator[list[Redirected]]:
    """The redirect installed towards the fake, as the armed run installs it towards the proxy."""
    events: list[Redirected] = []
    redirect.install(lambda: fake.base_url, [*DEFAULT_HOSTS, GATEWAY], events.append)
    yield events
    redirect.uninstall()


def _azure(**kw: object) -> openai.AzureOpenAI:
    return openai.AzureOpenAI(azure_endpoint=AZURE, api_version="2024-10-21", max_retries=0, **kw)


def test_azure_deployment_becomes_the_model_and_keeps_the_key(
    fake: FakeOpenAI, seen: list[Redirected]
) -> None:
    with _azure(api_key="azure-key") as client:
        r = client.chat.completions.create(model="prod-gpt4o", messages=MESSAGES)
    assert r.choices[0].message.content == ANSWER
    request = fake.requests[-1]
    assert (request.path, request.json["model"]) == ("/v1/chat/completions", "prod-gpt4o")
    assert request.headers["api-key"] == "azure-key"
    assert request.headers[HEADER] == AZURE
    assert request.headers["host"] == f"127.0.0.1:{fake.port}"
    assert seen == [
        Redirected(
            "POST",
            f"{AZURE}/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21",
            "/chat/completions",
            "prod-gpt4o",
        )
    ]


def test_azure_client_deployment_wins_over_the_model_argument(fake: FakeOpenAI, seen: list) -> None:
    with _azure(azure_deployment="eu-deploy", azure_ad_token="aad-token") as client:
        stream = client.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == ANSWER
    assert fake.requests[-1].json["model"] == "eu-deploy"
    assert fake.requests[-1].headers["authorization"] == "Bearer aad-token"


def test_explicit_openai_base_url_sync_and_async(fake: FakeOpenAI, seen: list[Redirected]) -> None:
    with openai.OpenAI(base_url="https://api.openai.com/v1", api_key="sk-user") as client:
        plain = client.chat.completions.create(model="gpt-4o", messages=MESSAGES)

    async def run() -> str:
        async with openai.AsyncOpenAI(base_url="https://api.openai.com/v1", api_key="sk-user") as c:
            stream = await c.chat.completions.create(model="gpt-4o", messages=MESSAGES, stream=True)
            return "".join([ch.choices[0].delta.content or "" async for ch in stream if ch.choices])

    assert (plain.choices[0].message.content, asyncio.run(run())) == (ANSWER, ANSWER)
    assert [r.headers["authorization"] for r in fake.requests] == ["Bearer sk-user"] * 2
    assert [r.headers[HEADER] for r in fake.requests] == ["https://api.openai.com"] * 2


def test_async_azure(fake: FakeOpenAI, seen: list[Redirected]) -> None:
    async def run() -> str | None:
        async with openai.AsyncAzureOpenAI(
            azure_endpoint=AZURE, api_version="2024-10-21", api_key="k", max_retries=0
        ) as client:
            r = await client.chat.completions.create(model="async-deploy", messages=MESSAGES)
            return r.choices[0].message.content

    assert asyncio.run(run()) == ANSWER
    assert fake.requests[-1].json["model"] == "async-deploy"


def test_client_built_before_install_is_redirected_too(fake: FakeOpenAI) -> None:
    client = openai.OpenAI(base_url="https://api.openai.com/v1", api_key="sk", max_retries=0)
    redirect.install(lambda: fake.base_url)
    try:
        emb = client.embeddings.create(model="text-embedding-3-small", input="hello")
    finally:
        redirect.uninstall()
        client.close()
    assert len(emb.data[0].embedding) == 256 and fake.requests[-1].path == "/v1/embeddings"


def test_a_gateway_host_the_user_listed(fake: FakeOpenAI, seen: list[Redirected]) -> None:
    with openai.OpenAI(
        base_url=f"https://{GATEWAY}/llm/openai/v1", api_key="gw", max_retries=0
    ) as c:
        r = c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert r.choices[0].message.content == ANSWER
    assert fake.requests[-1].headers[HEADER] == f"https://{GATEWAY}"


def test_proxy_url_with_a_secret_prefix_gets_the_api_path(fake: FakeOpenAI) -> None:
    redirect.install(f"{fake.base_url.removesuffix('/v1')}/run-s3cret/v1")
    try:
        client = openai.OpenAI(base_url="https://api.openai.com/v1", api_key="k", max_retries=0)
        with client, pytest.raises(openai.NotFoundError):  # the fake serves no secret path
            client.responses.create(model="gpt-4o", input="Hi")
    finally:
        redirect.uninstall()
    assert fake.requests[-1].path == "/run-s3cret/v1/responses"


def test_https_proxy_from_the_environment_does_not_swallow_loopback(
    fake: FakeOpenAI, seen: list[Redirected], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    with openai.OpenAI(base_url="https://api.openai.com/v1", api_key="k", max_retries=0) as c:
        r = c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert r.choices[0].message.content == ANSWER and len(seen) == 1


def test_unlisted_hosts_are_untouched_while_installed(fake: FakeOpenAI, seen: list) -> None:
    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as client:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert HEADER not in fake.requests[-1].headers and seen == []


def test_uninstall_restores_the_transports_and_nothing_is_active() -> None:
    redirect.install("http://127.0.0.1:1/v1")
    assert httpx2.HTTPTransport.handle_request is not ORIGINAL_SYNC
    assert redirect.active() is not None
    redirect.uninstall()
    redirect.uninstall()  # idempotent
    assert httpx2.HTTPTransport.handle_request is ORIGINAL_SYNC
    assert httpx2.AsyncHTTPTransport.handle_async_request is ORIGINAL_ASYNC
    assert redirect.active() is None


def test_a_patcher_opened_before_a_test_and_closed_after_it_is_not_reinstated(
    fake: FakeOpenAI,
) -> None:
    """A cassette (vcrpy) or mock patches the send point around an opted-in test: the rule is
    wrapped inside it and unwrapped before it closes, so its patch never outlives it (wrapping once
    per session, at the first test, put a closed cassette's stub back at the run's end)."""

    def stub(self: object, request: object) -> object:  # what a cassette would answer with
        raise AssertionError("the closed patcher's stub was called")

    with mock.patch.object(httpx2.HTTPTransport, "handle_request", stub):
        rule = redirect.install(lambda: fake.base_url)
        assert httpx2.HTTPTransport.handle_request is not stub  # the rule wraps the patcher
        redirect.uninstall(rule)
        assert httpx2.HTTPTransport.handle_request is stub
    assert httpx2.HTTPTransport.handle_request is ORIGINAL_SYNC
    with openai.OpenAI(base_url=fake.base_url, api_key="k", max_retries=0) as client:
        client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    assert fake.hits == 1


def test_a_nested_install_rules_until_it_ends(fake: FakeOpenAI) -> None:
    """An armed run inside an armed run (pytester): the inner one rules, then the outer again."""
    outer = redirect.install("http://127.0.0.1:1/v1", ["nothing.invalid"])
    inner = redirect.install(lambda: fake.base_url)
    try:
        with openai.OpenAI(base_url="https://api.openai.com/v1", api_key="k", max_retries=0) as c:
            c.chat.completions.create(model="gpt-4o", messages=MESSAGES)
        redirect.uninstall(inner)
        assert redirect.active() is outer
        assert httpx2.HTTPTransport.handle_request is not ORIGINAL_SYNC
    finally:
        redirect.uninstall(inner)
        redirect.uninstall(outer)
    assert fake.hits == 1 and httpx2.HTTPTransport.handle_request is ORIGINAL_SYNC


@pytest.mark.parametrize(
    ("host", "port", "listed"),
    [
        ("api.openai.com", 443, True),
        ("API.OpenAI.com", None, True),
        ("contoso.openai.azure.com", 443, True),
        ("eastus.api.cognitive.microsoft.com", 443, False),
        ("my.cognitiveservices.azure.com", 443, True),
        ("openai.azure.com.evil.invalid", 443, False),
        ("gw.local", 8443, True),
        ("gw.local", 443, False),
        ("127.0.0.1", 8000, False),
    ],
)
def test_host_patterns(host: str, port: int | None, listed: bool) -> None:
    rule = redirect.Redirect(lambda: "", (*DEFAULT_HOSTS, "gw.local:8443"))
    assert rule.matches(host, port) is listed


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/chat/completions", ("/chat/completions", None)),
        ("/openai/deployments/my%20dep/chat/completions", ("/chat/completions", "my dep")),
        ("/openai/deployments/d/embeddings", ("/embeddings", "d")),
        ("/openai/v1/responses", ("/responses", None)),
        ("/openai/responses", ("/responses", None)),
        ("/llm/openai/v1/models/gpt-4o", ("/models/gpt-4o", None)),
        ("/v1/completions", ("/completions", None)),
        ("/openai/v1/unknown/thing", ("/unknown/thing", None)),
    ],
)
def test_api_paths(path: str, expected: tuple[str, str | None]) -> None:
    assert api_path(path) == expected


def test_target_drops_api_version_and_keeps_other_query() -> None:
    rule = redirect.Redirect(lambda: "http://127.0.0.1:5/s/v1/")
    url, path, dep = rule.target("/openai/deployments/d/chat/completions?api-version=1&x=2")
    assert (url, path, dep) == (
        "http://127.0.0.1:5/s/v1/chat/completions?x=2",
        "/chat/completions",
        "d",
    )


def test_a_raw_httpx2_post_to_the_openai_url_is_redirected(fake: FakeOpenAI, seen: list) -> None:
    body = {"model": "gpt-4o", "messages": MESSAGES}
    headers = {"Authorization": "Bearer sk-raw"}
    resp = httpx2.post("https://api.openai.com/v1/chat/completions", json=body, headers=headers)
    assert resp.json()["choices"][0]["message"]["content"] == ANSWER
    assert fake.requests[-1].headers["authorization"] == "Bearer sk-raw"


def test_the_plugins_own_calls_can_bypass(fake: FakeOpenAI) -> None:
    """A judge or reference hop to a listed host inside ``bypass()`` is not sent to the proxy:
    here the listed host is the fake itself, so bypassed calls arrive without the redirect header."""
    redirect.install("http://127.0.0.1:1/v1", ["127.0.0.1"])
    try:
        with redirect.bypass(), openai.OpenAI(base_url=fake.base_url, api_key="k") as client:
            client.chat.completions.create(model="gpt-4o", messages=MESSAGES)
    finally:
        redirect.uninstall()
    assert fake.hits == 1 and HEADER not in fake.requests[-1].headers
