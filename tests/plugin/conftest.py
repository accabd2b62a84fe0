"""Fixtures of the end-to-end plugin runs: the candidate ``mini`` (a FakeOpenAI on loopback)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pytest_slam.compare.about  # noqa: F401  (see below)
from pytest_slam.testing import FakeOpenAI

# pytester's in-process runs drop the modules a run imported; ``compare.about`` imported by one
# run and again by the next would give two ``About`` classes, and a scorer's description from
# the first would not be an ``About`` of the second (``describe`` refuses it). Imported here, it
# is the same module in every run, as in a real process, which imports it once.


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    """The candidate: a cheaper model that answers in its own words."""
    answer = lambda req: "mini says: " + req["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, model="gpt-4o-mini-2024-07-18") as fake:
        yield fake
