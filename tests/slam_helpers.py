"""Helpers shared by pytest-slam's own plugin tests (imported as a plain module: tests/ is on the path)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from patience import patient

from pytest_slam.swap.models import resolve
from pytest_slam.swap.proxy import SwapProxy
from pytest_slam.swap.router import SwapRouter, Upstream

# Headless Chromium, for the tests that render pages in a real browser (None: those tests skip).
CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="headless Chromium not installed (apt-get install -y chromium)"
)

# The labelled real-answer sets (read in place, never copied): ../shared/data beside the checkout, or
# wherever SLAM_SHARED_DATA points. Tests that need them skip, naming this folder, when it is absent.
SHARED_DATA = Path(
    os.environ.get("SLAM_SHARED_DATA") or Path(__file__).resolve().parents[2] / "shared" / "data"
)

# The ``slam`` command as this interpreter runs it: the checkout's, whether or not the venv's bin
# folder is on PATH (a venv's python called by its path has no ``slam`` on PATH).
SLAM = (sys.executable, "-m", "pytest_slam.cli")

# Product code as teams write it: a client built at import time, asking for a hosted model by name.
PRODUCT = """
from openai import OpenAI

client = OpenAI()  # built at import time, as product code does

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content
"""


# A reference that answers as GPT-4 would while ``good``, then uselessly: a run that regresses.
BAD = "Sorry, I am unable to help with this request today."


class Answers:
    """GPT-4's own answers while ``good``, else a useless one (FakeOpenAI's ``answer``)."""

    good = True

    def __call__(self, request: dict[str, Any]) -> str:
        return "GPT-4 says: " + request["messages"][-1]["content"] if self.good else BAD


def write_pyproject(
    pytester: pytest.Pytester,
    base_url: str,
    *,
    name: str = "mini",
    model: str | None = "gpt-4o-mini",
    reference: str = "none",
    extra: str = "",
) -> None:
    """pyproject.toml of a project with one candidate, ``name``, served at ``base_url`` (a
    FakeOpenAI's); its ``model`` key is left out when ``model`` is None. ``extra`` TOML goes right
    after, in the candidate's table unless it opens another (``"max_tokens_cap = 3\n"``)."""
    model_line = f'model = "{model}"\n' if model is not None else ""
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["{name}"]
reference = "{reference}"

[tool.slam.models.{name}]
base_url = "{base_url}"
{model_line}""" + extra)  # fmt: skip


@contextlib.contextmanager
def swap_proxy(upstream_url: str, **options: object) -> Iterator[SwapProxy]:
    """A running SwapProxy whose one candidate, ``cand``, and whose upstream are ``upstream_url``;
    ``options`` go to SwapProxy (``idle_s``, ``body_limit``)."""
    spec = resolve(upstream_url + "#cand")
    server = SwapProxy(SwapRouter({spec.name: spec}, Upstream(upstream_url)), **options).start()
    try:
        yield server
    finally:
        server.stop()


def said(result: pytest.RunResult) -> str:
    """pytest-slam's summary, from its separator to the end, as one line (long lines wrap to the
    terminal width)."""
    text = result.stdout.str()
    return " ".join(text[text.index("= pytest-slam =") :].split())


def wait_for(condition: Callable[[], object], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (a bound on waiting, not a timing
    check, scaled to the machine's load: patience.py)."""
    deadline = time.monotonic() + patient(seconds)
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting {patient(seconds):.0f} s for {what}")


# Two opted-in tests of PRODUCT, for runs whose report is what is under test.
REPORTED_TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_refund():
    assert product.ask("How do I get a refund for order 1182?")

def test_password():
    assert product.ask("How do I reset my password?")
"""
# The reported suite and a test whose question no candidate answers alike (the report tests).
TESTS = (
    REPORTED_TESTS
    + """
def test_outage():
    assert product.ask("The app shows error 500 since 9am, we are blocked")
"""
)


# A project with one candidate, "mini", against a reference; both are loopback fakes
# (``.format(reference=..., candidate=...)``).
MINI_PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "{reference}#gpt-4"

[tool.slam.models.mini]
base_url = "{candidate}"
model = "gpt-4o-mini"
"""


@contextlib.contextmanager
def silent_port() -> Iterator[int]:
    """A loopback port that never completes a connection: its listener's queue is full, so the
    kernel drops every new SYN, as a firewalled host does."""
    with socket.socket() as server, socket.socket() as queued:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = int(server.getsockname()[1])
        queued.connect(("127.0.0.1", port))  # fills the queue; never accepted
        yield port
