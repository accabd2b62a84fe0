"""Fixtures of the end-to-end plugin runs: the candidate ``mini`` (a FakeOpenAI on loopback)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    """The candidate: a cheaper model that answers in its own words."""
    answer = lambda req: "mini says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, model="gpt-4o-mini-2024-07-18") as fake:
        yield fake
