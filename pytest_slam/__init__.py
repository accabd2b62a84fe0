"""pytest-slam: model-swap regression testing with the tests a product team already has.

Public API (imported lazily, so ``import pytest_slam`` stays cheap):
``assert_equivalent``, ``evaluate``, ``Call``, ``GoldenRecord``, ``Score``, ``ModelSpec``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the real types for checkers; at run time ``__getattr__`` imports on first use
    from pytest_slam.compare.assertion import EquivalenceError as EquivalenceError
    from pytest_slam.compare.assertion import assert_equivalent as assert_equivalent
    from pytest_slam.compare.assertion import evaluate as evaluate
    from pytest_slam.records import Call as Call
    from pytest_slam.records import GoldenAnswer as GoldenAnswer
    from pytest_slam.records import GoldenRecord as GoldenRecord
    from pytest_slam.records import ModelSpec as ModelSpec
    from pytest_slam.records import Score as Score

__version__ = "0.1.0"

_LAZY = {
    "assert_equivalent": "pytest_slam.compare.assertion",
    "evaluate": "pytest_slam.compare.assertion",
    "EquivalenceError": "pytest_slam.compare.assertion",
    "Call": "pytest_slam.records",
    "GoldenRecord": "pytest_slam.records",
    "GoldenAnswer": "pytest_slam.records",
    "Score": "pytest_slam.records",
    "ModelSpec": "pytest_slam.records",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'pytest_slam' has no attribute {name!r}")


__all__ = [*sorted(_LAZY), "__version__"]
