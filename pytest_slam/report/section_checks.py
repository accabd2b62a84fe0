"""Validation of the report's ``[tool.slam.*]`` sections: fail at the door with the fix."""

from __future__ import annotations

from collections.abc import Mapping

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON


class ConfigError(ValueError, SlamError, kind="config"):
    """A ``[tool.slam.*]`` section holds a key or value pytest-slam cannot use."""


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
            f"[{section}] {key} = {value!r} must be a {want.__name__}, "
            f"e.g. {key} = {_example(want)}"
        )


def _example(want: type) -> str:
    return {bool: "true", float: "0.9", int: "3", str: '"text"'}.get(want, "...")
