"""Cost model: API list prices, self-hosted busy-time cost, per-1,000 and ratios.

API call cost = (prompt_tokens - cached_tokens) x input price + cached_tokens x cached-input
price + completion_tokens x output price, per million tokens; with no cached-input price (or no
cached tokens reported) every prompt token costs the input price.

Where a model's price comes from, first match wins (``Prices.priced_by`` names it):
``[tool.slam.prices]`` overrides in pyproject.toml, then genai-prices' bundled snapshot
(``metrics.catalog``, offline), then the dated table below, written by hand, for when genai-prices
is not installed or does not know the model.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from pytest_slam.metrics import catalog
from pytest_slam.records import JSON

PRICE_SOURCE = "https://openai.com/api/pricing/"
# Standard (non-batch) list prices as OpenAI published them; written from knowledge of that
# page as of mid-2025, not fetched by this code. Check them and override what has changed.
PRICE_AS_OF = "2025-06"

PriceSource = Literal["override", "genai-prices", "table"]

SELF_HOSTED_ASSUMPTION = (
    "self-hosted cost = the engine machine's hourly price x the seconds the call kept it busy "
    "(E2E); idle time and batching gains are not counted"
)

# The one declaration of [tool.slam.prices]' keys: a model's prices (USD per 1M tokens), and the
# table's own keys with their descriptions. config.PriceEntry and PriceTable are built from them.
PRICE_KEYS = ("input_per_mtok", "output_per_mtok")
META_KEYS = {"as_of": "date of the prices", "source": "where the prices come from"}
# A dated snapshot id prices like its family: gpt-4o-2024-08-06, gpt-4-0613, gpt-3.5-turbo-0125.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")


@dataclass(frozen=True)
class Price:
    """USD per one million input, output and cached input tokens of one model."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0) -> float:
        """``cached_tokens`` are part of ``prompt_tokens`` (as OpenAI's usage reports them)."""
        cached = 0 if self.cached_input_per_mtok is None else min(cached_tokens, prompt_tokens)
        return (
            (prompt_tokens - cached) * self.input_per_mtok
            + cached * (self.cached_input_per_mtok or 0.0)
            + completion_tokens * self.output_per_mtok
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


def _family_get(table: Mapping[str, Price], model_id: str) -> Price | None:
    """The price of ``model_id``, or of its family when it is a dated snapshot id."""
    if model_id in table:
        return table[model_id]
    family = _SNAPSHOT.sub("", model_id)
    return table.get(family) if family != model_id else None


def _default_as_of() -> str:
    version = catalog.version()
    return PRICE_AS_OF if version is None else f"the genai-prices {version} snapshot"


def _default_source() -> str:
    if catalog.version() is None:
        return PRICE_SOURCE
    return f"{catalog.HOME}; models it lacks: {PRICE_SOURCE} as of {PRICE_AS_OF}"


@dataclass(frozen=True)
class Prices:
    """Where API prices come from, with their date and source; look-ups accept snapshot ids.

    ``overrides`` (from ``[tool.slam.prices]``) win, then genai-prices when ``genai_prices`` is on
    and the package is installed, then ``table``, the dated fallback.
    """

    table: Mapping[str, Price] = field(default_factory=lambda: dict(_DEFAULT_TABLE))
    as_of: str = field(default_factory=_default_as_of)
    source: str = field(default_factory=_default_source)
    overrides: Mapping[str, Price] = field(default_factory=dict)
    genai_prices: bool = True
    # genai-prices' answers kept between runs (catalog.cached_rates); None: looked up each run
    cache: catalog.RatesCache | None = field(default=None, compare=False, repr=False)
    # Every call is priced: each model id is looked up once (the sources do not change in a run).
    _found: dict[str, tuple[Price, PriceSource] | None] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def get(self, model_id: str) -> Price | None:
        """The price of ``model_id``, or None when no source knows it."""
        found = self.lookup(model_id)
        return None if found is None else found[0]

    def priced_by(self, model_id: str) -> PriceSource | None:
        """Which source prices ``model_id``: ``override``, ``genai-prices`` or ``table``."""
        found = self.lookup(model_id)
        return None if found is None else found[1]

    def lookup(self, model_id: str) -> tuple[Price, PriceSource] | None:
        """The price of ``model_id`` and the source it came from, first match wins."""
        if model_id not in self._found:
            self._found[model_id] = self._lookup(model_id)
        return self._found[model_id]

    def _lookup(self, model_id: str) -> tuple[Price, PriceSource] | None:
        override = _family_get(self.overrides, model_id)
        if override is not None:
            return override, "override"
        rates = catalog.cached_rates(model_id, self.cache) if self.genai_prices else None
        if rates is not None:
            return Price(*rates), "genai-prices"
        listed = _family_get(self.table, model_id)
        return None if listed is None else (listed, "table")

    @classmethod
    def from_config(
        cls, config: Mapping[str, JSON] | None, cache: catalog.RatesCache | None = None
    ) -> Prices:
        """The default sources overridden by a ``[tool.slam.prices]`` mapping; ``cache`` keeps
        genai-prices' answers between runs.

        ``{"gpt-4": {"input_per_mtok": 30, "output_per_mtok": 60}, "as_of": "2026-01"}``: a known
        model may override one price; a new model must give both. ``as_of``/``source`` re-date it.
        """
        base = cls(cache=cache)
        overrides: dict[str, Price] = {}
        meta: dict[str, str] = {}
        for name, entry in (config or {}).items():
            if name in META_KEYS:
                meta[name] = str(entry)
            else:
                overrides[name] = _parse_entry(name, entry, base.get(name))
        as_of, source = meta.get("as_of", base.as_of), meta.get("source", base.source)
        return replace(base, overrides=overrides, as_of=as_of, source=source)


def _parse_entry(name: str, entry: JSON, known: Price | None) -> Price:
    where = f"[tool.slam.prices] {name!r}"
    if not isinstance(entry, Mapping):
        raise ValueError(
            f"{where}: expected a table like {{input_per_mtok = 1.0, output_per_mtok = 2.0}}"
        )
    unknown = sorted(set(entry) - set(PRICE_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key {unknown[0]!r}; use {' and '.join(PRICE_KEYS)}")
    missing = [k for k in PRICE_KEYS if k not in entry]
    if missing and known is None:
        raise ValueError(f"{where}: new model needs both prices; add {' and '.join(missing)}")
    values = {k: _usd(where, k, entry[k]) if k in entry else getattr(known, k) for k in PRICE_KEYS}
    cached = None if known is None else known.cached_input_per_mtok
    return Price(values["input_per_mtok"], values["output_per_mtok"], cached)


def _usd(where: str, key: str, value: JSON) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise ValueError(f"{where}: {key} must be a number of USD >= 0, got {value!r}")
    return float(value)


def api_call_cost(
    model_id: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    prices: Prices | None = None,
    cached_tokens: int = 0,
) -> float | None:
    """USD for one API call; None when the model has no price or usage is unknown."""
    price = (prices or Prices()).get(model_id)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return price.cost(prompt_tokens, completion_tokens, cached_tokens)


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


# Per-request costs: aligned lists, or mappings keyed by request.
Costs = Sequence[float | None] | Mapping[str, float | None]


def _pairs(candidate: Costs, reference: Costs) -> list[tuple[float | None, float | None]]:
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
    candidate_costs: Costs,
    reference_costs: Costs,
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
