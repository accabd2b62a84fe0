"""The project's ``[tool.slam]``: read from pyproject.toml, merged with ``--slm-*``, validated.

Apart from settings.py (plain data, imported everywhere) and config.py (the pydantic model) so
that a run without a table never imports pydantic, and neither of them imports the other's caller.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pytest_slam.settings import TOML, Settings, SettingsError, legacy_golden_dir


def read_table(pyproject: Path | None) -> dict[str, TOML] | None:
    """The ``[tool.slam]`` table, or None when the file or the table is absent.

    A file that cannot be read as TOML (a folder, not UTF-8, a byte-order mark) raises
    ``SettingsError``: pytest could not read it either.
    """
    if pyproject is None or not pyproject.exists():
        return None
    try:
        raw = pyproject.read_bytes()
        data = tomllib.loads(raw.decode("utf-8"))
    except IsADirectoryError:
        raise SettingsError(f"{pyproject} is a folder; pyproject.toml must be a file.") from None
    except OSError as exc:
        raise SettingsError(f"{pyproject}: cannot read it ({exc.strerror or exc}).") from None
    except UnicodeDecodeError as exc:
        raise SettingsError(
            f"{pyproject}: not UTF-8 text ({exc.reason}); save it as UTF-8."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        if raw.startswith(b"\xef\xbb\xbf"):
            raise SettingsError(
                f"{pyproject} starts with a byte-order mark, which TOML does not allow; "
                "save it as UTF-8 without BOM."
            ) from None
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
