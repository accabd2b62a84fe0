"""Scorers by name, so markers and ``[tool.slam]`` can say ``by="fuzzy"`` with options.

A name is looked up in the built-ins (:data:`SCORERS`), then among the installed entry points of
group ``pytest_slam.scorers`` (the entry point's name is the name users write), then as an import
path ``package.module:Class``. A scorer from outside pytest_slam needs no base class: any class
whose ``score(candidate, reference)`` returns a number in 0..1 (or a Score) will do; it is held to
that contract by :class:`~pytest_slam.compare.plugged.Plugged` and scores under the name it was
found by.

Scorer modules are imported when a scorer is built, not when this module is, so naming a scorer
whose extra is missing fails only for the test that asks for it.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from importlib.metadata import EntryPoint, entry_points

from pytest_slam.compare.about import SIMILAR, About, combined, describe
from pytest_slam.compare.plugged import FIX, Plugged
from pytest_slam.compare.scorer import Scorer
from pytest_slam.swap.thirdparty import FAULTS, fault, origin_of

GROUP = "pytest_slam.scorers"
SCORERS: dict[str, str] = {
    "exact": "pytest_slam.compare.text:ExactScorer",
    "normalized": "pytest_slam.compare.text:NormalizedScorer",
    "json": "pytest_slam.compare.structured:JsonScorer",
    "json_schema": "pytest_slam.compare.structured:JsonSchemaScorer",
    "tool_calls": "pytest_slam.compare.toolcalls:ToolCallScorer",
    "label": "pytest_slam.compare.text:LabelScorer",
    "fuzzy": "pytest_slam.compare.text:FuzzyScorer",
    "length": "pytest_slam.compare.text:LengthScorer",
    "containment": "pytest_slam.compare.text:ContainmentScorer",
    "semantic": "pytest_slam.compare.semantic:SemanticScorer",
    "judge": "pytest_slam.compare.judge:JudgeScorer",
}
HOW_TO_DECLARE = (
    f"declare your own as an entry point in group {GROUP!r} (its name is the by you write), "
    "or name it by import path, by = 'package.module:Class'"
)


_INSTALLED: dict[tuple[str, ...], dict[str, EntryPoint]] = {}  # by sys.path: read once per path


def installed() -> dict[str, EntryPoint]:
    """The scorers installed distributions declare, by entry point name (built-ins win a clash)."""
    key = tuple(sys.path)
    found = _INSTALLED.get(key)
    if found is None:
        if len(_INSTALLED) > 8:
            _INSTALLED.clear()
        found = _INSTALLED[key] = {ep.name: ep for ep in entry_points(group=GROUP)}
    return {name: ep for name, ep in found.items() if name not in SCORERS}


def unknown_scorer(name: object) -> str:
    """The one line for a name that is no scorer: the known names, and how to declare one."""
    names = ", ".join(SCORERS)
    plugged = ", ".join(sorted(installed()))
    more = f"; installed: {plugged}" if plugged else ""
    return f"unknown scorer {name!r}; known scorers: {names}{more}; {HOW_TO_DECLARE}"


def is_builtin(name: str) -> bool:
    return name.strip().lower() in SCORERS


def scorer_class(name: str) -> type:
    """The scorer class ``name`` stands for: built-in, installed or an import path; ValueError in
    one line when there is none."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(unknown_scorer(name))
    key = name.strip()
    if is_builtin(key):
        target = SCORERS[key.lower()]
        cls = _import(key, target)
        if not (isinstance(cls, type) and issubclass(cls, Scorer)):
            raise TypeError(f"scorer {key!r}: {target} is not a Scorer class")
        return cls
    ep = installed().get(key)
    if ep is not None:
        try:
            found = ep.load()
        except FAULTS as err:
            origin = origin_of(GROUP, key, ep)
            raise ValueError(
                f"scorer {key!r}: entry point {ep.value} could not be loaded: {fault(err)}; it is "
                f"{origin.describe()}: {origin.fix(FIX)}"
            ) from None
        return _scorer_like(key, found, ep.value)
    if ":" in key:
        return _scorer_like(key, _import(key, key), key)
    raise ValueError(unknown_scorer(key))


def _import(name: str, target: str) -> object:
    module, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module), attr)
    except ImportError as err:
        if module.startswith("pytest_slam."):
            raise
        raise ValueError(f"scorer {name!r}: cannot import {module}: {err}") from None
    except AttributeError:
        raise ValueError(f"scorer {name!r}: module {module} has no {attr!r}") from None
    except FAULTS as err:  # an outside module that raises on import
        if module.startswith("pytest_slam."):
            raise
        origin = origin_of(GROUP, target, None)
        raise ValueError(
            f"scorer {name!r}: importing {module} raised {fault(err)}; it is "
            f"{origin.describe()}: {origin.fix(FIX)}"
        ) from None


def _scorer_like(name: str, found: object, where: str) -> type:
    """``found`` when it is a class with a ``score`` method; ValueError saying what it is not."""
    if not isinstance(found, type) or not callable(getattr(found, "score", None)):
        raise ValueError(
            f"scorer {name!r}: {where} is not a class with a score(candidate, reference) method"
        )
    try:
        describe(found)
    except ValueError as err:
        raise ValueError(f"scorer {name!r}: {where} describes itself wrongly: {err}") from None
    return found


def describe_name(name: str) -> About:
    """The description of the scorer a Score names (``a+b``: two scores taken as one). A name not
    found here (a report read where that scorer is not installed) is similarity."""
    parts = name.split("+")
    if len(parts) > 1:
        return combined([describe_name(p) for p in parts])
    try:
        return describe(scorer_class(name))
    except (ValueError, TypeError, ImportError):
        return SIMILAR


def get_scorer(by: str | Scorer | object, **options: object) -> Scorer:
    """Build the scorer named ``by`` with ``options``, or return a Scorer instance as is (another
    object with a ``score`` method is held to the contract, under its ``name`` or class name)."""
    if not isinstance(by, str):
        if options:
            raise ValueError(
                f"options {sorted(options)} were given with a ready {type(by).__name__}; "
                "configure it when you build it, or pass the scorer's name instead"
            )
        if isinstance(by, Scorer):
            return by
        if not callable(getattr(by, "score", None)):
            raise ValueError(unknown_scorer(by))
        return Plugged(str(getattr(by, "name", type(by).__name__)), by)
    cls = scorer_class(by)
    _check_options(by, cls, options)
    if is_builtin(by):
        return cls(**options)  # type: ignore[no-any-return]
    key = by.strip()
    origin = origin_of(GROUP, key, installed().get(key))
    try:
        return Plugged(key, cls(**options), origin)
    except FAULTS as err:
        raise ValueError(
            f"scorer {key!r} could not be built: {fault(err)}; it is {origin.describe()}: "
            f"{origin.fix(FIX)}"
        ) from None


def scorer_options(cls: type) -> dict[str, inspect.Parameter]:
    """The options a scorer class takes, by name (built-in ones are keyword-only)."""
    params = inspect.signature(cls.__init__).parameters  # type: ignore[misc]
    kinds = (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {n: p for n, p in params.items() if n != "self" and p.kind in kinds}


def _check_options(name: str, cls: type, options: dict[str, object]) -> None:
    """Fail with the scorer's real option names instead of a TypeError from ``__init__``."""
    known = scorer_options(cls)
    unknown = sorted(set(options) - set(known))
    if unknown:
        takes = ", ".join(known) or "no options"
        raise ValueError(f"scorer {name!r} has no option {', '.join(unknown)}; it takes: {takes}")
    missing = [n for n, p in known.items() if p.default is p.empty and n not in options]
    if missing:
        raise ValueError(f"scorer {name!r} needs option {', '.join(missing)}")
