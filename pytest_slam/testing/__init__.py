"""Test helpers for pytest-slam and its users: a loopback OpenAI-compatible server (stdlib only).

Names load on first use, so ``python -m pytest_slam.testing.fake_openai`` runs the module once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_slam.testing.fake_openai import FakeOpenAI, FakeRequest, count_tokens, embed

__all__ = ["FakeOpenAI", "FakeRequest", "count_tokens", "embed"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from pytest_slam.testing import fake_openai

        return getattr(fake_openai, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
