"""OpenAI list prices from genai-prices (pydantic/genai-prices), read offline.

genai-prices is maintained and knows current model ids (gpt-5, the o-series) and cached-input
rates, which a table typed in by hand goes stale on. Only the snapshot shipped inside the installed
package is read: its ``UpdatePrices`` background fetch is never started here, so pricing never
touches the network. When the package is missing, ``rates`` answers None for every model and the
caller falls back to its dated table.

Only the ``openai`` provider is asked: a self-hosted open-weight model must not be priced at some
cloud host's rate because its id happens to match one.
"""

from __future__ import annotations

import functools
import importlib.util
from decimal import Decimal
from importlib import metadata
from typing import NamedTuple

PROVIDER = "openai"
HOME = "https://github.com/pydantic/genai-prices"


class Rates(NamedTuple):
    """USD per one million tokens: input, output, and cached input (None where not listed)."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None


@functools.cache
def version() -> str | None:
    """The installed genai-prices version, or None when it cannot be imported.

    Found without importing it (0.15 s, most of it the price data): a run that prices no API
    model never pays for it.
    """
    try:
        if importlib.util.find_spec("genai_prices") is None:
            return None
    except ValueError:  # a module without a spec in sys.modules
        return None
    try:
        return metadata.version("genai-prices")
    except metadata.PackageNotFoundError:
        return "unknown"


@functools.cache
def rates(model_id: str) -> Rates | None:
    """Today's list rates of ``model_id`` at OpenAI, or None when genai-prices lacks either one.

    A tiered price (a higher rate past some prompt length) gives its base tier.
    """
    if version() is None:
        return None
    try:
        from genai_prices import Usage, calc_price
    except ImportError:  # found but broken
        return None
    try:
        found = calc_price(Usage(input_tokens=0, output_tokens=0), model_id, provider_id=PROVIDER)
    except LookupError:  # the model (or the provider) is not in the snapshot
        return None
    price = found.model_price
    per_input = _base(getattr(price, "input_mtok", None))
    per_output = _base(getattr(price, "output_mtok", None))
    if per_input is None or per_output is None:
        return None
    return Rates(per_input, per_output, _base(getattr(price, "cache_read_mtok", None)))


def _base(value: object) -> float | None:
    """A flat price as is, a tiered one's base tier, anything else None."""
    if isinstance(value, Decimal):
        return float(value)
    base = getattr(value, "base", None)
    return float(base) if isinstance(base, Decimal) else None
