"""The project's ``[tool.slam]``: read from pyproject.toml, merged with ``--slm-*``, validated.

Apart from settings.py (plain data, imported everywhere) and config.py (the pydantic model) so
that a run without a table never imports pydantic, and neither of them imports the other's caller.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pytest_slam.settings import TOML, Settings, SettingsError, legacy_golden_dir


def read_table(pyproject: Path | None) -> dict[str, TOML] | None:
    """The ``[tool.slam]`` table, or None when the file or the table is absent."""
    if pyproject is None or not pyproject.is_file():
        return None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{pyproject}: not valid TOML ({exc}).") from exc
    tool = data.get("tool")
    return tool.get("slam") if isinstance(tool, dict) else None


def from_table(
    table: dict[str, TOML] | None,
    overrides: dict[str, TOML] | None = None,
    root: Path | None = None,
) -> Settings:
    """Validate ``[tool.slam]`` merged with command-line overrides; SettingsError says what is wrong.

    Without a table or overrides there is nothing to check, and pydantic is not imported. With the
    project's ``root``, a project that still keeps its goldens in the old default folder keeps
    using it (see ``legacy_golden_dir``).
    """
    if table is None and not overrides:
        settings = Settings()
    else:
        from pytest_slam.config import load

        settings = load(table, overrides)
    if root is not None and "golden_dir" not in {**(table or {}), **(overrides or {})}:
        settings = legacy_golden_dir(settings, Path(root))
    return settings
