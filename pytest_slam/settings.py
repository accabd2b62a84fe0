"""Run settings: ``[tool.slam]`` in the project's pyproject.toml, overridden by ``--slm-*`` options.

Kept as one plain dataclass so xdist can ship it to workers and reports can print it. It is the
one declaration of every key (name, type, default): config.SlamTable, the model that checks every
key before a run starts, is built from these fields and adds only each key's rule and description.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pytest_slam.errors import SlamError

# A value as TOML gave it in [tool.slam] (a scorer's options, a price table): config.SlamTable
# checked its shape; the run passes it on to the part that reads it.
TOML = Any

RECORD_MODES = ("none", "new", "all")
# A dot or underscore name: setuptools' flat-layout discovery never takes it for a package, so a
# product with ``app/`` beside it still builds (``fixtures/slam`` made it see two top-level packages).
DEFAULT_GOLDEN_DIR = "__slam__"
LEGACY_GOLDEN_DIR = "fixtures/slam"  # the default before __slam__; still used while it exists


class SettingsError(ValueError, SlamError, kind="config"):
    """A bad value in [tool.slam]; the message names the key and the fix."""


MAX_CONCURRENCY = 512  # the most calls in flight a user may set on one server


@dataclass
class Settings:
    models: list[str] = field(default_factory=list)
    model_table: dict[str, dict[str, TOML]] = field(default_factory=dict)
    reference: str = "openai:gpt-4"
    golden_dir: str = DEFAULT_GOLDEN_DIR
    record: str = "none"
    samples: int = 1
    paths: list[str] = field(default_factory=list)
    equivalence: dict[str, TOML] = field(default_factory=dict)
    judge: str | None = None
    accept_uncertified_judge: bool = False
    audit_per_feature: int = 0  # pairs set aside for `slam review --audit` (review/audits.py)
    repeat: int = 1
    pass_fraction: float = 1.0
    prices: dict[str, TOML] = field(default_factory=dict)
    budget: dict[str, float] = field(default_factory=dict)
    gate: dict[str, TOML] = field(default_factory=dict)
    baseline: dict[str, TOML] = field(default_factory=dict)
    report: str | None = None
    html: str | None = None
    engine_timeout_s: float = 120.0
    reference_retries: int = 4
    reference_timeout_s: float = 120.0
    scorer_timeout_s: float = 60.0  # a score of an outside scorer (compare/plugged.py)
    cap_factor: float = 2.0
    cap_margin: int = 64
    max_tokens_cap: int | None = None  # every candidate's ceiling (--slm-max-tokens-cap)
    concurrency: int | None = None  # calls in flight per candidate (swap/limits.py); None: its own
    # calls sent alone, nothing else in flight on the server: the latency a user meets (swap/
    # limits.py). Each costs about 1.4 round trips of the run's throughput (the others drained,
    # then held): 1 in 250 at 16 in flight is about 9% of the wall
    alone_first: int = 1
    alone_every: int = 250
    cache: bool = False  # candidates' answers kept between runs (swap/cache.py), opt-in
    cache_ttl_s: float = 7 * 24 * 3600.0
    embeddings: str | None = None
    redirect_hosts: list[str] = field(default_factory=list)
    configured: bool = False  # a [tool.slam] table exists
    golden_dir_legacy: bool = False  # golden_dir not set; the old default fixtures/slam exists

    def as_dict(self) -> dict[str, TOML]:
        return asdict(self)

    @property
    def has_reference(self) -> bool:
        return self.reference.lower() not in ("", "none")


def legacy_golden_dir(settings: Settings, root: Path) -> Settings:
    """Keep ``fixtures/slam`` for a project whose goldens are there and that set no golden_dir.

    Moving committed goldens is the team's call (one ``git mv``), never something a test run does;
    the run summary says how once (``MOVE_GOLDENS``).
    """
    if (root / LEGACY_GOLDEN_DIR).is_dir() and not (root / DEFAULT_GOLDEN_DIR).exists():
        settings.golden_dir = LEGACY_GOLDEN_DIR
        settings.golden_dir_legacy = True
    return settings


MOVE_GOLDENS = (
    f"pytest-slam: golden files read from the old default {LEGACY_GOLDEN_DIR}/, which makes "
    f"`pip install .` of a flat-layout project fail; move them with `git mv {LEGACY_GOLDEN_DIR} "
    f'{DEFAULT_GOLDEN_DIR}`, or keep them with [tool.slam] golden_dir = "{LEGACY_GOLDEN_DIR}"'
)
