"""The requests stack (swap/stacks/requests_stack.py): the real ``requests`` library, redirected.

Every request ends at a loopback fake of the hosted API (standing in for the swap proxy, as in
test_redirect.py), or at the run's proxy in the pytester run: a request that was not redirected
would fail DNS (``*.invalid``) or show up without the redirect header.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import requests.adapters
from patience import patient
from slam_helpers import said

from pytest_slam.swap import redirect, stacks
from pytest_slam.swap.redirect import DEFAULT_HOSTS, HEADER, Redirected
from pytest_slam.testing import FakeOpenAI

ANSWER = "Redirected to the candidate."
AZURE = "https://contoso.openai.azure.com"
GATEWAY = "llm-gateway.corp.invalid"
ORIGINAL_SEND = requests.adapters.HTTPAdapter.send
CHAT = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER) as server:
        yield server


@pytest.fixture
def seen(fake: FakeOpenAI) -> Iterator[list[Redirected]]:
    events: list[Redirected] = []
    redirect.install(lambda: fake.base_url, [*DEFAULT_HOSTS, GATEWAY], events.append)
    yield events
    redirect.uninstall()


def test_the_stacks_are_found_by_module() -> None:
    """One stack per ``*_stack.py`` module of the package, found by its file name: read from the
    folder, so a new stack module is found here without an edit."""
    folder = Path(stacks.__file__).parent
    modules = sorted(p.stem for p in folder.glob(f"*{stacks.SUFFIX}.py"))
    found = stacks.stacks()
    assert [type(s).__module__.rsplit(".", 1)[1] for s in found] == modules
    assert {"httpx", "requests"} <= {s.name for s in found}
    assert {"httpx", "requests"} <= set(stacks.installed())  # both libraries are installed here


_IMPORTED_LATE = """
import json, sys
from pytest_slam.swap import redirect

assert "requests" not in sys.modules  # nothing imports it to wrap it
before = list(sys.meta_path)
redirect.install(lambda: sys.argv[1])
import requests  # the product imports its HTTP library only inside the test
from requests.adapters import HTTPAdapter

wrapped = HTTPAdapter.send
chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]}
url = "https://api.openai.com/v1/chat/completions"
got = requests.post(url, json=chat, timeout=10).json()["choices"][0]["message"]["content"]
redirect.uninstall()
print(json.dumps({
    "answer": got,
    "restored": HTTPAdapter.send is not wrapped and HTTPAdapter.send.__module__ == "requests.adapters",
    "meta_path_as_before": sys.meta_path == before,
    "loader": type(requests.adapters.__loader__).__name__,
}))
"""


def test_requests_imported_while_a_redirect_is_in_force_is_wrapped_as_it_is_imported(
    fake: FakeOpenAI,
) -> None:
    argv = [sys.executable, "-c", _IMPORTED_LATE, fake.base_url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=patient(60), check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "answer": ANSWER,  # the call reached the proxy (api.openai.com is never asked)
        "restored": True,
        "meta_path_as_before": True,
        "loader": "SourceFileLoader",  # the module keeps its own loader
    }
    assert fake.requests[-1].headers[HEADER] == "https://api.openai.com"


_NEVER_IMPORTED = """
import sys
from pytest_slam.swap import redirect, stacks

before = list(sys.meta_path)
redirect.install(lambda: "http://127.0.0.1:9/v1")
watching = sys.meta_path != before  # requests is installed: its import is watched
redirect.uninstall()
print("requests" in stacks.installed(), "requests" in sys.modules, watching, sys.meta_path == before)
"""


def test_a_redirect_never_imports_a_library_the_process_did_not() -> None:
    argv = [sys.executable, "-c", _NEVER_IMPORTED]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=patient(60), check=True)
    assert done.stdout.split() == ["True", "False", "True", "True"]


_NOT_INSTALLED = """
import sys
sys.modules["requests"] = None  # as if requests were not installed: its import fails
import openai  # the product's client: its HTTP library (httpx2, or httpx) is imported now
from pytest_slam.swap import redirect, stacks

before = list(sys.meta_path)
redirect.install(lambda: "http://127.0.0.1:9/v1")
print(stacks.installed(), sys.meta_path == before)
redirect.uninstall()
"""


def test_a_library_that_is_not_installed_is_not_watched() -> None:
    """Only an installed library can be imported later: the finder is not armed for the others,
    so a run without requests passes no import of its tests through it."""
    argv = [sys.executable, "-c", _NOT_INSTALLED]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=patient(60), check=True)
    assert done.stdout.split() == ["['httpx']", "True"]


def test_a_post_to_the_openai_host_reaches_the_proxy(
    fake: FakeOpenAI, seen: list[Redirected]
) -> None:
    url = "https://api.openai.com/v1/chat/completions"
    resp = requests.post(url, json=CHAT, headers={"Authorization": "Bearer sk-raw"}, timeout=10)
    assert resp.json()["choices"][0]["message"]["content"] == ANSWER
    assert resp.url == url and resp.request.url == url  # never the proxy URL: it holds a secret
    got = fake.requests[-1]
    assert (got.path, got.headers["authorization"]) == ("/v1/chat/completions", "Bearer sk-raw")
    assert got.headers[HEADER] == "https://api.openai.com"
    assert seen == [Redirected("POST", url, "/chat/completions", "gpt-4o")]


def test_an_azure_deployment_becomes_the_model(fake: FakeOpenAI, seen: list[Redirected]) -> None:
    url = f"{AZURE}/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21"
    body = {"messages": CHAT["messages"]}
    resp = requests.post(url, json=body, headers={"api-key": "azure-key"}, timeout=10)
    assert resp.status_code == 200
    got = fake.requests[-1]
    assert (got.path, got.json["model"], got.headers["api-key"]) == (
        "/v1/chat/completions", "prod-gpt4o", "azure-key")  # fmt: skip
    assert got.headers["content-length"] == str(len(json.dumps({**body, "model": "prod-gpt4o"})))
    assert seen[-1].model == "prod-gpt4o"


def test_a_session_built_before_install_streams_through_the_proxy(fake: FakeOpenAI) -> None:
    session = requests.Session()
    redirect.install(lambda: fake.base_url, [GATEWAY])
    try:
        with session.post(f"https://{GATEWAY}/llm/v1/chat/completions", timeout=10,
                          json={**CHAT, "stream": True}, stream=True) as resp:  # fmt: skip
            events = [line for line in resp.iter_lines() if line.startswith(b"data: {")]
    finally:
        redirect.uninstall()
        session.close()
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content") or "" for e in events)
    assert text == ANSWER and fake.requests[-1].headers[HEADER] == f"https://{GATEWAY}"


def test_https_proxy_from_the_environment_does_not_swallow_loopback(
    fake: FakeOpenAI, seen: list[Redirected], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # nothing listens there
    resp = requests.post("https://api.openai.com/v1/chat/completions", json=CHAT, timeout=10)
    assert resp.status_code == 200 and len(seen) == 1


def test_unlisted_hosts_are_untouched(fake: FakeOpenAI, seen: list[Redirected]) -> None:
    requests.post(f"{fake.base_url}/chat/completions", json=CHAT, timeout=10)
    assert HEADER not in fake.requests[-1].headers and seen == []


def test_uninstall_restores_the_adapter() -> None:
    redirect.install("http://127.0.0.1:1/v1")
    assert requests.adapters.HTTPAdapter.send is not ORIGINAL_SEND
    redirect.uninstall()
    assert requests.adapters.HTTPAdapter.send is ORIGINAL_SEND


SUITE = """
import pytest, requests

@pytest.mark.slm
def test_requests_product(slm_model):
    r = requests.post("https://api.openai.com/v1/chat/completions", timeout=30,
                      headers={"Authorization": "Bearer sk-caller-secret"},
                      json={"model": "gpt-4o", "messages": [{"role": "user", "content": "Hi"}]})
    (call,) = slm_model.calls
    assert r.json()["choices"][0]["message"]["content"] == call.text == "mini says: Hi"
    assert call.request["model"] == "gpt-4o" and r.url.startswith("https://api.openai.com/")

@pytest.mark.slm(calls=0)
def test_an_unlisted_host_is_still_the_products():
    with pytest.raises(requests.ConnectionError, match="blocked a connection to gateway.example.com"):
        requests.post("https://gateway.example.com/v1/chat/completions", json={}, timeout=2)
"""


def test_a_product_on_requests_is_swapped_and_other_hosts_stay_its_own(
    pytester: pytest.Pytester,
) -> None:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as mini:
        pytester.makepyfile(test_product=SUITE)
        pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-block-network"
        )
        result.assert_outcomes(passed=2)
        assert result.ret == 0
        text = said(result)
        assert (
            "1 connection(s) were refused (--slm-block-network) during opted-in tests: "
            "gateway.example.com:443 from test_product.py::test_an_unlisted_host" in text
        )
        assert "calls to api.openai.com were swapped too" in text
        assert mini.hits == 1 and "authorization" not in mini.requests[-1].headers
