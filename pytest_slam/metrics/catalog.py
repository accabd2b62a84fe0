"""OpenAI list prices from genai-prices (pydantic/genai-prices), read offline.

genai-prices is maintained and knows current model ids (gpt-5, the o-series) and cached-input
rates, which a table typed in by hand goes stale on. Only the snapshot shipped inside the installed
package is read: its ``UpdatePrices`` background fetch is never started here, so pricing never
touches the network. When the package is missing, ``rates`` answers None for every model and the
caller falls back to its dated table.

Only the ``openai`` provider is asked: a self-hosted open-weight model must not be priced at some
cloud host's rate because its id happens to match one.

A run keeps what it looked up in the project's scratch folder (``cached_rates``), by genai-prices
version: the snapshot inside a given version never changes, and importing it costs 0.13 s on its
own (less in a run that has pydantic loaded already) and leaves some ten thousand objects that
every later full collection of the garbage collector walks again. So only the first run after an
install (or a new model id) imports it.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from decimal import Decimal
from importlib import metadata
from typing import Any, NamedTuple, Protocol

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


class RatesCache(Protocol):
    """Where looked-up rates are kept between runs (``compare.diskcache.DiskCache``)."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...


def cached_rates(model_id: str, cache: RatesCache | None) -> Rates | None:
    """``rates``, read from ``cache`` when this genai-prices version already answered for
    ``model_id`` (an unknown model's None too), else looked up and kept there. An entry of another
    version or shape is a miss: looked up again and overwritten."""
    found_in = version()
    if cache is None or found_in is None:
        return rates(model_id)
    key = f"genai-prices {found_in} {PROVIDER} {model_id}"
    entry = cache.get(key)
    if isinstance(entry, dict) and entry.get("key") == key:
        readable, kept = _rates_of(entry.get("rates"))
        if readable:
            return kept
    answer = rates(model_id)
    with contextlib.suppress(OSError):  # a read-only checkout looks it up again next run
        cache.put(key, {"key": key, "rates": None if answer is None else list(answer)})
    return answer


def _rates_of(value: object) -> tuple[bool, Rates | None]:
    """A kept entry's rates: (True, None or the rates), or (False, None) for anything but None
    or three prices."""
    if value is None:
        return True, None
    if not isinstance(value, list) or len(value) != 3:
        return False, None
    if not (_price(value[0]) and _price(value[1]) and _price(value[2], optional=True)):
        return False, None
    cached = None if value[2] is None else float(value[2])
    return True, Rates(float(value[0]), float(value[1]), cached)


def _price(value: object, optional: bool = False) -> bool:
    if value is None:
        return optional
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _base(value: object) -> float | None:
    """A flat price as is, a tiered one's base tier, anything else None."""
    if isinstance(value, Decimal):
        return float(value)
    base = getattr(value, "base", None)
    return float(base) if isinstance(base, Decimal) else None
