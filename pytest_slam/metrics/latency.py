"""Per-model latency and usage summaries from recorded calls, and vLLM-style flat exports.

Which calls count as a latency measurement:

- replayed calls (served from the golden cache) never do: their timings are not this run's;
- cold-start calls (the first call after an engine started) are summarized on their own, under
  ``cold_start``, and kept out of the ``ok`` percentiles, which would otherwise carry load time;
- errored calls are summarized on their own, under ``errored`` (how long a failure took);
- everything else is ``ok``: the numbers a latency budget is checked against; where some of them
  were sent alone (``alone``: nothing else in flight on the server, swap/limits.py), ``ok`` is
  those, the latency a user meets, and the others are ``under_load`` (the run's own load).

Input is ``Call.as_dict()`` output (``pytest_slam.records.Call``), so ``tpot_ms`` and
``tokens_per_s`` are already derived: ``tpot_ms = (e2e_ms - ttft_ms) / (completion_tokens - 1)``
and ``tokens_per_s = completion_tokens / e2e`` (``metrics.stats.METRICS``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pytest_slam.metrics.energy import energy_per_token
from pytest_slam.metrics.stats import Summary, SummaryDict, summarize
from pytest_slam.records import JSON

LATENCY_METRICS: tuple[str, ...] = ("ttft_ms", "e2e_ms", "tpot_ms", "tokens_per_s")
USAGE_METRICS: tuple[str, ...] = (
    "prompt_tokens",
    "completion_tokens",
    "cost_usd",
    "energy_j",
    "energy_j_per_token",
)
BUCKETS: tuple[str, ...] = ("ok", "errored", "cold_start")


def bucket_of(call: Mapping[str, JSON]) -> str | None:
    """The latency bucket of one call, or None when it is not a measurement (replayed)."""
    if call.get("replayed"):
        return None
    if call.get("error") is not None:
        return "errored"
    if call.get("cold_start"):
        return "cold_start"
    return "ok"


def _summaries(
    calls: Iterable[Mapping[str, JSON]], metrics: Iterable[str]
) -> dict[str, SummaryDict]:
    rows = list(calls)
    return {m: summarize(metric_value(c, m) for c in rows).as_dict() for m in metrics}


def metric_value(call: Mapping[str, JSON], metric: str) -> float | None:
    """One metric of one call dict; derives ``energy_j_per_token`` when asked."""
    if metric == "energy_j_per_token":
        return energy_per_token(call.get("energy_j"), call.get("completion_tokens"))
    value = call.get(metric)
    return None if isinstance(value, bool) else value


def model_latency(calls: list[dict[str, JSON]]) -> dict[str, JSON]:
    """Latency summaries of one model's calls, kept apart by bucket (see module docstring).

    Returns ``{"counts": {...}, "ok": {metric: summary}, "errored": {...}, "cold_start": {...}}``
    where each summary is ``Summary.as_dict()`` and metrics are ``LATENCY_METRICS``.
    """
    by_bucket: dict[str, list[dict[str, JSON]]] = {b: [] for b in BUCKETS}
    for call in calls:
        bucket = bucket_of(call)
        if bucket is not None:
            by_bucket[bucket].append(call)
    counts = {"total": len(calls), "replayed": sum(1 for c in calls if c.get("replayed"))}
    counts.update({b: len(rows) for b, rows in by_bucket.items()})
    result: dict[str, JSON] = {"counts": counts}
    alone = [c for c in by_bucket["ok"] if c.get("alone")]
    if alone:
        loaded = [c for c in by_bucket["ok"] if not c.get("alone")]
        by_bucket = {**by_bucket, "ok": alone, "under_load": loaded}
        counts["alone"] = len(alone)
    for bucket, rows in by_bucket.items():
        result[bucket] = _summaries(rows, LATENCY_METRICS)
    return result


def model_usage(calls: list[dict[str, JSON]]) -> dict[str, SummaryDict]:
    """Token, cost and energy summaries over one model's successful calls, replayed included.

    A replayed answer's token counts are real (the server reported them when it was recorded),
    so unlike latency they are kept; its cost and energy are whatever the caller stored.
    """
    return _summaries((c for c in calls if c.get("error") is None), USAGE_METRICS)


def flatten(
    summaries: Mapping[str, Summary | Mapping[str, float | None]], prefix: str = ""
) -> dict[str, float | None]:
    """Flat ``<prefix><stat>_<metric>`` names, vLLM style: ``p99_ttft_ms``, ``mean_e2e_ms``.

    ``summaries`` maps metric name to a Summary or its dict (one bucket of ``model_latency``,
    or ``model_usage``). Use ``prefix`` to keep buckets apart, e.g. ``"cold_start_"``.
    """
    flat: dict[str, float | None] = {}
    for metric, summary in summaries.items():
        data = summary.as_dict() if isinstance(summary, Summary) else summary
        for stat in Summary.FIELDS:
            flat[f"{prefix}{stat}_{metric}"] = data.get(stat)
    return flat


def flatten_model(calls: list[dict[str, JSON]]) -> dict[str, float | None]:
    """Everything one model measured, flat: ``ok`` latency unprefixed, other buckets prefixed.

    This is the per-model aggregate a ``SessionBudget`` is checked against (add
    ``mean_cost_ratio`` from ``cost.cost_ratio`` where a reference was priced).
    """
    latency = model_latency(calls)
    flat = flatten(latency["ok"])
    flat.update(flatten(latency["cold_start"], "cold_start_"))
    flat.update(flatten(latency["errored"], "errored_"))
    if "under_load" in latency:
        flat.update(flatten(latency["under_load"], "under_load_"))
    flat.update(flatten(model_usage(calls)))
    flat.update({f"{name}_calls": n for name, n in latency["counts"].items()})
    return flat
