"""Scorers by name, so markers and ``[tool.slam]`` can say ``by="fuzzy"`` with options.

Scorer modules are imported when a scorer is built, not when this module is, so naming a scorer
whose extra is missing fails only for the test that asks for it.
"""

from __future__ import annotations

import importlib
import inspect

from pytest_slam.compare.base import Scorer

SCORERS: dict[str, str] = {
    "exact": "pytest_slam.compare.text:ExactScorer",
    "normalized": "pytest_slam.compare.text:NormalizedScorer",
    "json": "pytest_slam.compare.structured:JsonScorer",
    "json_schema": "pytest_slam.compare.structured:JsonSchemaScorer",
    "tool_calls": "pytest_slam.compare.toolcalls:ToolCallScorer",
    "label": "pytest_slam.compare.text:LabelScorer",
    "fuzzy": "pytest_slam.compare.text:FuzzyScorer",
    "length": "pytest_slam.compare.text:LengthScorer",
    "semantic": "pytest_slam.compare.semantic:SemanticScorer",
    "judge": "pytest_slam.compare.judge:JudgeScorer",
}


def scorer_class(name: str) -> type[Scorer]:
    """The Scorer class registered under ``name``; ValueError listing the known names."""
    target = SCORERS.get(name.strip().lower()) if isinstance(name, str) else None
    if target is None:
        raise ValueError(f"unknown scorer {name!r}; known scorers: {', '.join(SCORERS)}")
    module, _, attr = target.partition(":")
    cls = getattr(importlib.import_module(module), attr)
    if not (isinstance(cls, type) and issubclass(cls, Scorer)):
        raise TypeError(f"scorer {name!r}: {target} is not a Scorer class")
    return cls


def get_scorer(by: str | Scorer, **options: object) -> Scorer:
    """Build the scorer named ``by`` with ``options``, or return a Scorer instance as is."""
    if isinstance(by, Scorer):
        if options:
            raise ValueError(
                f"options {sorted(options)} were given with a ready {type(by).__name__}; "
                "configure it when you build it, or pass the scorer's name instead"
            )
        return by
    cls = scorer_class(by)
    _check_options(by, cls, options)
    return cls(**options)


def scorer_options(cls: type[Scorer]) -> dict[str, inspect.Parameter]:
    """The keyword options a scorer class takes, by name."""
    params = inspect.signature(cls.__init__).parameters
    return {n: p for n, p in params.items() if n != "self" and p.kind is p.KEYWORD_ONLY}


def _check_options(name: str, cls: type[Scorer], options: dict[str, object]) -> None:
    """Fail with the scorer's real option names instead of a TypeError from ``__init__``."""
    known = scorer_options(cls)
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = ", ".join(known) or "no options"
        raise ValueError(f"scorer {name!r} has no option {', '.join(unknown)}; it takes: {takes}")
    missing = [n for n, p in known.items() if p.default is p.empty and n not in options]
    if missing:
        raise ValueError(f"scorer {name!r} needs option {', '.join(missing)}")
