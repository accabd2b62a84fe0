"""Validation of the report's ``[tool.slam.*]`` sections: fail at the door with the fix."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON


class ConfigError(ValueError, SlamError, kind="config"):
    """A ``[tool.slam.*]`` section holds a key or value pytest-slam cannot use."""


T = TypeVar("T")


def read_section(cls: type[T], section: str, data: Mapping[str, JSON] | None) -> T:
    """``cls`` (a dataclass, the one declaration of the section's keys) from ``data``, checked
    with the keys and types of its fields: ``ConfigError`` names the key and the fix."""
    return cls(**check_section(section, data or {}, section_keys(cls)))


def section_keys(cls: type[Any]) -> dict[str, type]:
    """Each field of the dataclass ``cls`` and the type its value must have (``float | None``:
    ``float``; None stays the default, never written in TOML)."""
    hints = typing.get_type_hints(cls)
    known = {}
    for spec in dataclasses.fields(cls):
        hint = hints[spec.name]
        if isinstance(hint, types.UnionType):
            (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        known[spec.name] = hint
    return known


def check_section(
    section: str, data: Mapping[str, JSON], known: Mapping[str, type]
) -> dict[str, JSON]:
    """Return ``data`` as a dict after checking every key is known and has the right type.

    ``known`` maps key -> expected type (``float`` accepts ints; ``bool`` accepts only bools).
    """
    if not isinstance(data, Mapping):
        raise ConfigError(f"[{section}] must be a table of settings, got {type(data).__name__}")
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"[{section}] has unknown key(s) {', '.join(unknown)}; "
            f"known keys: {', '.join(sorted(known))}"
        )
    for key, value in data.items():
        _check_type(section, key, value, known[key])
    return dict(data)


def _check_type(section: str, key: str, value: object, want: type) -> None:
    if want is bool:
        ok = isinstance(value, bool)
    elif want is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    else:
        ok = isinstance(value, want)
    if not ok:
        raise ConfigError(
            f"[{section}] {key} = {value!r} must be a {_NAMES.get(want, want.__name__)}, "
            f"e.g. {key} = {_example(want)}"
        )


_NAMES: dict[type, str] = {int: "whole number"}


def _example(want: type) -> str:
    return {bool: "true", float: "0.9", int: "3", str: '"text"'}.get(want, "...")
