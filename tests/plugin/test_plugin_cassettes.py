"""A product that records its HTTP traffic with pytest-recording (vcrpy), opted in to the swap.

Real pytest runs (pytester) with the real pytest-recording plugin: the first run records the
product's cassette (``--record-mode=once``) and the reference's goldens; the second replays the
cassette with the product's own service stopped. The cassette must hold only the product's own
traffic: not the proxy's hop to the candidate, not the reference, and not the product's call to the
loopback proxy (its port and run secret change every run), which must reach the candidate live on
every run. Loopback fakes stand in for the hosted API, the candidate and the product's service.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from pytest_slam.testing import FakeOpenAI

pytest.importorskip("pytest_recording")

APP = """
import json, os, urllib.request

from openai import OpenAI

client = OpenAI()

def ask(question):  # the SDK (httpx2): vcrpy does not patch it
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content

def ask_raw(question):  # urllib: vcrpy records it unless told not to
    body = {"model": "gpt-4", "messages": [{"role": "user", "content": question}]}
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer sk-product-key"})
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())["choices"][0]["message"]["content"]

def service_models(url):  # the product's own service: what its cassette is for
    with urllib.request.urlopen(url + "/models", timeout=30) as resp:
        return [m["id"] for m in json.loads(resp.read())["data"]]
"""
SUITE = """
import pytest, app

pytestmark = [pytest.mark.slm, pytest.mark.vcr]

def test_triage():
    assert app.service_models("{service}")
    assert "Reset my password" in app.ask("Reset my password")
    assert "Error 500 since 9am" in app.ask_raw("Error 500 since 9am")
"""
CONFTEST = """
import pytest

def tag(request):  # the product's own filter: kept, and applied to what the cassette records
    request.headers["X-Recorded-By"] = "product"
    return request

@pytest.fixture(scope="module")
def vcr_config():
    return {"before_record_request": tag, "filter_headers": ["authorization"]}
"""


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def test_cassettes_hold_only_the_products_traffic_and_replay(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    with FakeOpenAI(lambda req: "unused") as service:
        suite = SUITE.format(service=service.base_url)
        pytester.makepyfile(app=APP, test_app=suite, conftest=CONFTEST)
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "{fake_gpt4.base_url}#gpt-4"

[tool.slam.models.mini]
base_url = "{mini.base_url}"
""")  # fmt: skip
        recorded = run(pytester, "--record-mode=once", "--slm-record=new")
        recorded.assert_outcomes(passed=1)
        assert (service.hits, mini.hits, fake_gpt4.hits) == (1, 2, 2)
    service_url = service.base_url  # stopped: only the cassette can answer it now

    (cassette,) = (pytester.path / "cassettes" / "test_app").glob("*.yaml")
    text = cassette.read_text()
    interactions = yaml.safe_load(text)["interactions"]
    assert [(i["request"]["method"], i["request"]["uri"]) for i in interactions] == [
        ("GET", service_url + "/models")
    ]
    assert interactions[0]["request"]["headers"]["X-Recorded-By"] == ["product"]
    for hop in (mini.base_url, fake_gpt4.base_url, "/chat/completions", "sk-product-key"):
        assert hop not in text

    replayed = run(pytester, "--record-mode=none")
    replayed.assert_outcomes(passed=1)
    assert mini.hits == 4  # both calls reached the candidate again, neither came from the cassette
    assert fake_gpt4.hits == 2  # the reference's answers came from the goldens
    assert cassette.read_text() == text

    # pytest-recording's --block-network also guards the plugin's own sockets: allow loopback
    blocked = run(pytester, "--record-mode=none", "--block-network", "--allowed-hosts=127.0.0.1")
    blocked.assert_outcomes(passed=1)
    assert (mini.hits, fake_gpt4.hits) == (6, 2) and cassette.read_text() == text
    golden = Path(pytester.path / "__slam__" / "gpt-4" / "test_app.json")
    assert golden.is_file() and "vcr" not in golden.read_text()


ENGINE_SUITE = """
import pytest, app
from openai import OpenAI

pytestmark = [pytest.mark.slm, pytest.mark.vcr]

def test_first():  # the run's first opted-in test: the embedded engine starts inside its cassette
    assert app.service_models("{service}")
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": "Say hi"}}], max_tokens=4)
    assert r.choices[0].message.content is not None
"""


@pytest.mark.engine
def test_a_managed_engine_started_inside_a_cassette_stays_out_of_it(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """Serial run: the engine starts lazily inside the first opted-in test, with its cassette
    open; its readiness polls and warm-up call must not be recorded, or the replay (a new port)
    would fail with "closest differ in port"."""
    with FakeOpenAI(lambda req: "unused") as service:
        pytester.makepyfile(
            app=APP, test_app=ENGINE_SUITE.format(service=service.base_url), conftest=CONFTEST
        )
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["smollm2-135m"]
reference = "{fake_gpt4.base_url}#gpt-4"
""")  # fmt: skip
        recorded = run(pytester, "--record-mode=once", "--slm-record=new")
        recorded.assert_outcomes(passed=1)
        recorded.stdout.fnmatch_lines(["*engine smollm2-135m: llama.cpp*"])

    (cassette,) = (pytester.path / "cassettes" / "test_app").glob("*.yaml")
    text = cassette.read_text()
    uris = [i["request"]["uri"] for i in yaml.safe_load(text)["interactions"]]
    assert uris == [service.base_url + "/models"]  # the product's own traffic, nothing else
    assert "/health" not in text and "/chat/completions" not in text

    replayed = run(pytester, "--record-mode=none")  # a new engine, on another port
    replayed.assert_outcomes(passed=1)
    assert cassette.read_text() == text
