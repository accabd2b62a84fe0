"""Distribution summaries and the named metrics they describe.

Which definition each statistic uses, stated once so numbers can be compared with other tools:

- Percentiles use linear interpolation between closest ranks, numpy's default
  (``method="linear"``, Hyndman & Fan type 7): for sorted ``x`` of length ``n`` the ``q``-th
  percentile sits at rank ``h = (n - 1) * q / 100`` and is ``x[floor(h)]`` plus the fraction of
  ``h`` times the gap to the next value. Implemented here without numpy.
- ``std`` is the population standard deviation (divide by ``n``), numpy's ``np.std`` default and
  what vLLM's ``std_ttft_ms`` reports, so flat exports compare with vLLM's numbers. One value
  gives ``std == 0``.
- ``cv`` (coefficient of variation) is ``std / mean``: the consistency figure that compares models
  of different speeds. It is ``None`` when the mean is 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import ClassVar

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)

# ``Summary.as_dict()``: field name to value (count is an int, the rest float or None).
SummaryDict = dict[str, float | None]

# Every metric name is <metric>_<unit>; the description says how it is measured.
METRICS: dict[str, str] = {
    "ttft_ms": "time to first token, ms: first content chunk minus request start",
    "e2e_ms": "end-to-end latency, ms: last chunk minus request start",
    "tpot_ms": "time per output token, ms: (e2e_ms - ttft_ms) / (completion_tokens - 1)",
    "tokens_per_s": "output throughput of one call, tokens/s: completion_tokens / e2e",
    "prompt_tokens": "input tokens of one call, tokens, as the server's usage reports them",
    "completion_tokens": "output tokens of one call, tokens, as the server's usage reports them",
    "cost_usd": "cost of one call, USD: API token prices, or hourly price x busy time if hosted",
    "cost_ratio": "candidate cost / reference cost over the same requests, dimensionless",
    "energy_j": "GPU energy of one call, joules: change of NVML's total-energy counter",
    "energy_j_per_token": "GPU energy per output token, joules/token: energy_j / completion_tokens",
    "avg_power_w": "mean GPU power while measuring, watts: energy_j / duration",
    "peak_memory_mib": "highest GPU memory in use while measuring, MiB, summed over devices",
    "gpu_util_pct": "mean GPU utilisation while measuring, percent",
}

# Metrics where more is better: a budget on them is a floor, not a ceiling.
HIGHER_IS_BETTER: frozenset[str] = frozenset({"tokens_per_s"})


@dataclass
class Summary:
    """A distribution summary of one metric (guidellm/vLLM fields); empty means count 0, Nones."""

    FIELDS: ClassVar[tuple[str, ...]] = (
        "count", "mean", "median", "std", "cv", "min", "max", "p50", "p90", "p95", "p99",
    )  # fmt: skip

    count: int = 0
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    cv: float | None = None
    min: float | None = None
    max: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None

    def as_dict(self) -> SummaryDict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, float | None]) -> Summary:
        values = {k: data[k] for k in cls.FIELDS[1:] if k in data}
        return cls(count=int(data.get("count") or 0), **values)


def percentile(sorted_values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of already sorted values, linear interpolation."""
    if not sorted_values:
        raise ValueError("percentile of no values is undefined; check count first")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile q={q} is outside 0..100")
    rank = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac


def _clean(values: Iterable[float | None]) -> list[float]:
    """Drop Nones (not measured); refuse NaN, which would poison every statistic silently."""
    kept: list[float] = []
    for value in values:
        if value is None:
            continue
        number = float(value)
        if math.isnan(number):
            raise ValueError("summarize: got NaN; pass None for a value that was not measured")
        kept.append(number)
    return kept


def summarize(values: Iterable[float | None]) -> Summary:
    """Summarize the measured values (Nones dropped): mean, median, std, cv, min, max, p50-p99."""
    data = sorted(_clean(values))
    if not data:
        return Summary()
    n = len(data)
    mean = math.fsum(data) / n
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in data) / n)
    pcts = {f"p{q}": percentile(data, q) for q in PERCENTILES}
    return Summary(
        count=n,
        mean=mean,
        median=percentile(data, 50),
        std=std,
        cv=std / mean if mean else None,
        min=data[0],
        max=data[-1],
        **pcts,
    )
