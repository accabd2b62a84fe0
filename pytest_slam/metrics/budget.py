"""Budgets: per-test limits from the ``slm_budget`` mark, per-model limits from pyproject.

Per test, ``@pytest.mark.slm_budget(e2e_ms=500, cost_usd=0.001)``: every limit applies to
EACH candidate call the test made, cost and tokens included (one rule for all five, and a
breach names the call that broke it; a total over the session belongs in ``[tool.slam.budget]``).
Calls that measure nothing are not held to latency limits: replayed calls (cached), cold-start
calls (they carry engine load time and are reported on their own) and errored calls.

Per model, ``[tool.slam.budget]`` keys are ``<stat>_<metric>`` (``p95_e2e_ms``,
``mean_cost_ratio``) checked against the model's flat aggregate (``latency.flatten_model``).
Limits are ceilings, except for metrics where more is better (``tokens_per_s``): floors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from pytest_slam.metrics.stats import HIGHER_IS_BETTER, METRICS, Summary
from pytest_slam.records import JSON

LATENCY_LIMITS = frozenset({"e2e_ms", "ttft_ms", "tpot_ms"})


def _fmt(value: float) -> str:
    """812.43 -> '812.4', 500.0 -> '500', 0.0012345 -> '0.00123'."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.1f}" if abs(value) >= 1 else f"{value:.3g}"


def _limit(where: str, key: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{where}: {key} must be a number >= 0, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class Budget:
    """Per-call limits of one test (None: no limit)."""

    e2e_ms: float | None = None
    ttft_ms: float | None = None
    tpot_ms: float | None = None
    cost_usd: float | None = None
    completion_tokens: float | None = None

    @classmethod
    def from_kwargs(cls, **kwargs: object) -> Budget:
        """Build from the mark's kwargs; an unknown name or a bad value raises ValueError."""
        known = [f.name for f in dataclasses.fields(cls)]
        for key in kwargs:
            if key not in known:
                raise ValueError(f"slm_budget: unknown limit {key!r}; known: {', '.join(known)}")
        return cls(**{k: _limit("slm_budget", k, v) for k, v in kwargs.items()})

    def limits(self) -> dict[str, float]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}


def _applies(call: Mapping[str, JSON], metric: str) -> bool:
    if call.get("role", "candidate") != "candidate":
        return False
    if metric in LATENCY_LIMITS:
        return not (call.get("replayed") or call.get("cold_start") or call.get("error"))
    return True


def check_calls(budget: Budget, calls: list[dict[str, JSON]]) -> list[str]:
    """Breaches of ``budget`` by ``calls`` (``Call.as_dict()``), one readable line each.

    ``"e2e_ms 812.4 > budget 500 (call 2, model smollm2-135m)"``; calls are numbered from 1 in
    the order the test made them. An unmeasured value (None) is not a breach.
    """
    breaches = []
    for number, call in enumerate(calls, start=1):
        for metric, limit in budget.limits().items():
            value = call.get(metric)
            if value is None or not _applies(call, metric) or value <= limit:
                continue
            where = f"call {number}, model {call.get('model', '?')}{at_in_flight(call)}"
            breaches.append(f"{metric} {_fmt(value)} > budget {_fmt(limit)} ({where})")
    return breaches


def at_in_flight(call: dict[str, JSON]) -> str:
    """``", at 8 in flight"``: a latency measured with other calls in flight is not one
    measured alone (``Call.in_flight``; '' when it was alone or not counted)."""
    count = call.get("in_flight")
    if isinstance(count, int) and count > 1:
        return f", at {count} in flight"
    return ""


# The one declaration of [tool.slam.budget]'s keys, <stat>_<metric>: config.SlamTable's schema
# (``KEY_PATTERN``) and its did-you-mean hint (``KEYS``) read them.
KEYS = tuple(f"{stat}_{metric}" for stat in Summary.FIELDS for metric in METRICS)
KEY_PATTERN = f"^({'|'.join(Summary.FIELDS)})_({'|'.join(METRICS)})$"


def _split_key(key: str) -> tuple[str, str] | None:
    """``'p95_e2e_ms'`` -> ``('p95', 'e2e_ms')``; None when it is not ``<stat>_<metric>``."""
    stat, _, metric = key.partition("_")
    return (stat, metric) if stat in Summary.FIELDS and metric in METRICS else None


@dataclass(frozen=True)
class SessionBudget:
    """Per-model limits on aggregate statistics, from ``[tool.slam.budget]``."""

    limits: Mapping[str, float] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_config(cls, config: Mapping[str, JSON] | None) -> SessionBudget:
        """Validate ``{"p95_e2e_ms": 2000, ...}``; an unknown key raises ValueError saying why."""
        where = "[tool.slam.budget]"
        for key in config or {}:
            if _split_key(key) is None:
                raise ValueError(
                    f"{where}: unknown key {key!r}; keys are <stat>_<metric>, "
                    f"stat one of {', '.join(Summary.FIELDS)}; metric one of {', '.join(METRICS)}"
                )
        return cls({k: _limit(where, k, v) for k, v in (config or {}).items()})

    def check(self, aggregate: Mapping[str, float | None], model: str) -> list[str]:
        """Breaches of one model's flat aggregate, with measured vs limit.

        A limit whose statistic was not measured is a breach too: a gate must not pass on
        numbers it never saw.
        """
        breaches = []
        for key, limit in self.limits.items():
            value = aggregate.get(key)
            if value is None:
                breaches.append(f"{key} not measured, budget {_fmt(limit)} (model {model})")
                continue
            split = _split_key(key)
            floor = split is not None and split[1] in HIGHER_IS_BETTER
            if (value < limit) if floor else (value > limit):
                sign = "<" if floor else ">"
                breaches.append(f"{key} {_fmt(value)} {sign} budget {_fmt(limit)} (model {model})")
        return breaches
