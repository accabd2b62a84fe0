"""``[tool.slam]``'s tables as the objects a run reads: parsed once, handed on typed.

config.py checks the gate, baseline, prices and budget tables when the run is configured, and
``Settings`` keeps them as the plain data the user wrote (the schema, ``slam config``, a shard's
report echo them). The run parses them here once, at configure: the checks price each call with
``prices``; the end of the run gates with ``gate``, compares a baseline with ``tolerances``, checks
``budget`` and states the prices it used. Before, each reader took the dict and parsed it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.metrics.budget import SessionBudget
from pytest_slam.metrics.cost import Prices
from pytest_slam.report.baseline import Tolerances
from pytest_slam.report.gate import Gate
from pytest_slam.settings import Settings


@dataclass(frozen=True)
class Tables:
    gate: Gate = field(default_factory=Gate)
    tolerances: Tolerances = field(default_factory=Tolerances)
    prices: Prices = field(default_factory=Prices)
    budget: SessionBudget = field(default_factory=SessionBudget)  # no limits: nothing to check

    @classmethod
    def of(cls, settings: Settings, scratch: Path | None = None) -> Tables:
        """The settings' tables, parsed (config.py has checked them: this raises only for a
        ``Settings`` built by hand with a bad table, with the message config.py would give).
        ``scratch`` (the project's ``.slam`` folder) keeps genai-prices' answers between runs."""
        cache = DiskCache(scratch / "prices") if scratch is not None else None
        return cls(
            gate=Gate.from_config(settings.gate),
            tolerances=Tolerances.from_config(settings.baseline),
            prices=Prices.from_config(settings.prices, cache),
            budget=SessionBudget.from_config(dict(settings.budget)),
        )
