"""Cost model: dated API list prices, self-hosted busy-time cost, per-1,000 and ratios.

API call cost = prompt_tokens x input price + completion_tokens x output price (DESIGN.md).
The built-in table is a convenience, not a source of truth: prices change, so it carries its
date and source and every entry can be overridden from ``[tool.slam.prices]`` in pyproject.toml.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

PRICE_SOURCE = "https://openai.com/api/pricing/"
# Standard (non-batch) list prices as OpenAI published them; written from knowledge of that
# page as of mid-2025, not fetched by this code. Check them and override what has changed.
PRICE_AS_OF = "2025-06"

SELF_HOSTED_ASSUMPTION = (
    "self-hosted cost = the engine machine's hourly price x the seconds the call kept it busy "
    "(E2E); idle time and batching gains are not counted"
)

_PRICE_KEYS = ("input_per_mtok", "output_per_mtok")
_META_KEYS = ("as_of", "source")
# A dated snapshot id prices like its family: gpt-4o-2024-08-06, gpt-4-0613, gpt-3.5-turbo-0125.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


@dataclass(frozen=True)
class Price:
    """USD per one million input and output tokens of one model."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (
            prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok
        ) / 1e6


_DEFAULT_TABLE: dict[str, Price] = {
    "gpt-4": Price(30.0, 60.0),
    "gpt-4-32k": Price(60.0, 120.0),
    "gpt-4-turbo": Price(10.0, 30.0),
    "gpt-4-turbo-preview": Price(10.0, 30.0),
    "gpt-4-1106-preview": Price(10.0, 30.0),
    "gpt-4-0125-preview": Price(10.0, 30.0),
    "gpt-4o": Price(2.50, 10.0),
    "gpt-4o-2024-05-13": Price(5.00, 15.0),  # the first gpt-4o snapshot kept its launch price
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-3.5-turbo": Price(0.50, 1.50),
}


@dataclass(frozen=True)
class Prices:
    """A price table with its date and source; look-ups accept dated snapshot ids."""

    table: Mapping[str, Price] = field(default_factory=lambda: dict(_DEFAULT_TABLE))
    as_of: str = PRICE_AS_OF
    source: str = PRICE_SOURCE

    def get(self, model_id: str) -> Price | None:
        """The price of ``model_id``, or of its family when it is a dated snapshot id."""
        if model_id in self.table:
            return self.table[model_id]
        family = _SNAPSHOT.sub("", model_id)
        return self.table.get(family) if family != model_id else None

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> Prices:
        """The default table overridden by a ``[tool.slam.prices]`` mapping.

        ``{"gpt-4": {"input_per_mtok": 30, "output_per_mtok": 60}, "as_of": "2026-01"}``: a known
        model may override one price; a new model must give both. ``as_of``/``source`` re-date it.
        """
        base = cls()
        table = dict(base.table)
        meta = {}
        for name, entry in (config or {}).items():
            if name in _META_KEYS:
                meta[name] = str(entry)
            else:
                table[name] = _parse_entry(name, entry, table.get(name))
        return replace(base, table=table, **meta)


def _parse_entry(name: str, entry: Any, known: Price | None) -> Price:
    where = f"[tool.slam.prices] {name!r}"
    if not isinstance(entry, Mapping):
        raise ValueError(
            f"{where}: expected a table like {{input_per_mtok = 1.0, output_per_mtok = 2.0}}"
        )
    unknown = sorted(set(entry) - set(_PRICE_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; use {' and '.join(_PRICE_KEYS)}")
    missing = [k for k in _PRICE_KEYS if k not in entry]
    if missing and known is None:
        raise ValueError(f"{where}: new model needs both prices; add {' and '.join(missing)}")
    values = {k: _usd(where, k, entry[k]) if k in entry else getattr(known, k) for k in _PRICE_KEYS}
    return Price(**values)


def _usd(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{where}: {key} must be a number of USD >= 0, got {value!r}")
    return float(value)


def api_call_cost(
    model_id: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    prices: Prices | None = None,
) -> float | None:
    """USD for one API call; None when the model has no price or usage is unknown."""
    price = (prices or Prices()).get(model_id)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return price.cost(prompt_tokens, completion_tokens)


def self_hosted_cost(busy_s: float, hourly_usd: float) -> float:
    """USD for one self-hosted call: hourly price x busy seconds (see SELF_HOSTED_ASSUMPTION)."""
    if busy_s < 0 or hourly_usd < 0:
        raise ValueError(
            f"self_hosted_cost: busy_s={busy_s} and hourly_usd={hourly_usd} must be >= 0"
        )
    return hourly_usd * busy_s / 3600.0


def per_1000(cost: float | None) -> float | None:
    """Cost of 1,000 calls at this per-call cost (None stays None)."""
    return None if cost is None else cost * 1000.0


def _pairs(candidate: Any, reference: Any) -> list[tuple[float | None, float | None]]:
    if isinstance(candidate, Mapping) and isinstance(reference, Mapping):
        return [(candidate[k], reference[k]) for k in candidate if k in reference]
    if isinstance(candidate, Mapping) or isinstance(reference, Mapping):
        raise TypeError("cost_ratio: pass two mappings keyed by request, or two aligned lists")
    if len(candidate) != len(reference):
        raise ValueError(
            f"cost_ratio: {len(candidate)} candidate costs vs {len(reference)} reference costs; "
            "pass costs of the same requests, in the same order"
        )
    return list(zip(candidate, reference, strict=True))


def cost_ratio(
    candidate_costs: Sequence[float | None] | Mapping[str, float | None],
    reference_costs: Sequence[float | None] | Mapping[str, float | None],
) -> float | None:
    """Candidate cost / reference cost over the same requests (sum over sum).

    Lists are matched by position, mappings by request key (only shared keys count). A request
    is skipped when either side has no cost. None when nothing is left or the reference cost 0.
    """
    pairs = [
        (c, r)
        for c, r in _pairs(candidate_costs, reference_costs)
        if c is not None and r is not None
    ]
    total_ref = math.fsum(r for _, r in pairs)
    if not pairs or total_ref == 0:
        return None
    return math.fsum(c for c, _ in pairs) / total_ref
