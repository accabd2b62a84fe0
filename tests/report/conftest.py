"""Fixtures of the report tests that run pytest: the two candidates of a sharded suite."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def candidates() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """The candidates: "mini" answers in its own words, "twin" as the reference does."""
    mini = lambda req: "mini says: " + req["messages"][-1]["content"]  # noqa: E731
    twin = lambda req: "GPT-4 says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(mini, model="mini-1") as a, FakeOpenAI(twin, model="twin-1") as b:
        yield a, b
