"""Run settings: ``[tool.slam]`` in the project's pyproject.toml, overridden by ``--slm-*`` options.

Kept as one plain dataclass so xdist can ship it to workers and reports can print it.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RECORD_MODES = ("none", "new", "all")
_KEYS = {
    "models",
    "candidates",
    "reference",
    "golden_dir",
    "record",
    "samples",
    "paths",
    "equivalence",
    "judge",
    "repeat",
    "pass_fraction",
    "prices",
    "budget",
    "gate",
    "baseline",
    "report",
    "html",
    "engine_timeout_s",
    "reference_retries",
    "reference_timeout_s",
}


class SettingsError(ValueError):
    """A bad value in [tool.slam]; the message names the key and the fix."""


@dataclass
class Settings:
    models: list[str] = field(default_factory=list)
    model_table: dict[str, dict[str, Any]] = field(default_factory=dict)
    reference: str = "openai:gpt-4"
    golden_dir: str = "fixtures/slam"
    record: str = "none"
    samples: int = 1
    paths: list[str] = field(default_factory=list)
    equivalence: dict[str, Any] = field(default_factory=dict)
    judge: str | None = None
    repeat: int = 1
    pass_fraction: float = 1.0
    prices: dict[str, Any] = field(default_factory=dict)
    budget: dict[str, Any] = field(default_factory=dict)
    gate: dict[str, Any] = field(default_factory=dict)
    baseline: dict[str, Any] = field(default_factory=dict)
    report: str | None = None
    html: str | None = None
    engine_timeout_s: float = 120.0
    reference_retries: int = 4
    reference_timeout_s: float = 120.0
    configured: bool = False  # a [tool.slam] table exists

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def has_reference(self) -> bool:
        return self.reference.lower() not in ("", "none")


def read_table(pyproject: Path | None) -> dict[str, Any] | None:
    """The ``[tool.slam]`` table, or None when the file or the table is absent."""
    if pyproject is None or not pyproject.is_file():
        return None
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{pyproject}: not valid TOML ({exc}).") from exc
    return data.get("tool", {}).get("slam")


def from_table(table: dict[str, Any] | None) -> Settings:
    """Validate ``[tool.slam]`` into Settings; unknown keys are an error so typos never pass."""
    if table is None:
        return Settings()
    table = dict(table)
    model_table = table.pop("models", {}) if isinstance(table.get("models"), dict) else {}
    unknown = set(table) - _KEYS
    if unknown:
        raise SettingsError(
            f"[tool.slam] has unknown keys {sorted(unknown)}; known keys: {', '.join(sorted(_KEYS))}."
        )
    # `candidates` names the models to run; `models` may too when no [tool.slam.models.NAME] table
    # exists (TOML cannot hold both a list and tables under one key).
    models = table.pop("candidates", None) or table.pop("models", [])
    table.pop("models", None)
    if isinstance(models, str):
        models = [m.strip() for m in models.split(",") if m.strip()]
    settings = Settings(models=list(models), model_table=model_table, configured=True, **table)
    check(settings)
    return settings


def check(settings: Settings) -> None:
    if settings.record not in RECORD_MODES:
        raise SettingsError(f"record={settings.record!r}; use one of {', '.join(RECORD_MODES)}.")
    if settings.samples < 1 or settings.repeat < 1:
        raise SettingsError("samples and repeat must be at least 1.")
    if not 0.0 <= settings.pass_fraction <= 1.0:
        raise SettingsError(f"pass_fraction={settings.pass_fraction}; use a number in [0, 1].")
