"""run/wired/wiring.py: one process's swap, built whole, each part holding the parts it was handed.

Real parts throughout: FakeOpenAI on loopback as the candidate, a golden store in a tmp folder, the
real openai client through the proxy the wiring started, and the environment it points at it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.run.wired.wiring import Swap, SwapInputs, build_swap
from pytest_slam.settings import Settings
from pytest_slam.swap.models import resolve
from pytest_slam.swap.router import SwapRouter, TestContext, Upstream
from pytest_slam.swap.targets import Targets
from pytest_slam.testing import FakeOpenAI

ANSWER = "Refunds take five days."


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER, model="cand-model") as server:
        yield server


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's own OPENAI_* settings out of the way, put back after the test."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-product")


def built(fake: FakeOpenAI, tmp_path: Path, record: str = "none", cache: bool = False) -> Swap:
    spec = resolve(fake.base_url + "#cand")
    reference = resolve(fake.base_url + "#ref")
    settings = Settings(reference=f"{fake.base_url}#ref", record=record, cache=cache)
    inputs = SwapInputs(
        settings, {spec.name: spec}, tmp_path / "golden", Targets(), reference_spec=reference
    )
    return build_swap(inputs)


def context(spec: ModelSpec) -> TestContext:
    return TestContext(
        "tests/test_a.py::test_a[cand]", "tests/test_a.py::test_a", "tests/test_a.py", spec
    )


@pytest.mark.usefixtures("clean_env")
def test_the_router_holds_the_parts_it_was_built_with(fake: FakeOpenAI, tmp_path: Path) -> None:
    swap = built(fake, tmp_path, cache=True)
    try:
        router = swap.router
        assert swap.reference is not None and swap.store is swap.reference.store
        assert router.golden is swap.reference  # the golden side of a call: the reference service
        assert router.ahead is swap.ahead and router.cache is swap.cache is not None
        assert router.limiters is swap.limiters and list(swap.limiters) == ["cand"]
        assert swap.store.root == tmp_path / "golden"
        assert swap.reference.record_args == ""
    finally:
        swap.stop()


@pytest.mark.usefixtures("clean_env")
def test_a_refresh_fetches_nothing_ahead(fake: FakeOpenAI, tmp_path: Path) -> None:
    """--slm-record=all re-records each reference answer before the candidate is asked: the
    router is built without the answers fetched ahead (they are still built, and closed)."""
    swap = built(fake, tmp_path, record="all")
    try:
        assert swap.router.ahead is None and swap.ahead is not None
    finally:
        swap.stop()


@pytest.mark.usefixtures("clean_env")
def test_a_call_reaches_the_candidate_through_the_proxy_the_environment_names(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """A record run: the reference answers first (golden side), then the candidate is asked."""
    swap = built(fake, tmp_path, record="new")
    try:
        assert os.environ["OPENAI_BASE_URL"] == swap.proxy.base_url
        ctx = context(swap.router.models["cand"])
        with swap.router.running(ctx), openai.OpenAI(max_retries=0) as client:
            assert swap.router.active is ctx
            reply = client.chat.completions.create(
                model="gpt-4", messages=[{"role": "user", "content": "How long do refunds take?"}]
            )
        assert swap.router.active is None  # the test's end: calls pass through again
        assert reply.choices[0].message.content == ANSWER
        assert [c.model for c in ctx.calls] == ["cand"] and ctx.calls[0].ok
        assert (
            len(fake.requests) == 2
        )  # the reference's answer, recorded first, then the candidate's
        assert (tmp_path / "golden" / "ref" / "tests" / "test_a.json").is_file()
    finally:
        swap.stop()
    assert "OPENAI_BASE_URL" not in os.environ  # as it was before the swap
    assert os.environ["OPENAI_API_KEY"] == "sk-product"
    swap.stop()  # a second stop (an interrupt, then the end) changes nothing


def test_the_running_test_is_let_go_when_it_raises(fake: FakeOpenAI) -> None:
    spec = resolve(fake.base_url + "#cand")
    router = SwapRouter({spec.name: spec}, Upstream())
    with pytest.raises(RuntimeError), router.running(context(spec)):
        raise RuntimeError("the product's own failure")
    assert router.active is None
