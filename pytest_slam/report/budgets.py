"""``[tool.slam.budget]`` checked against the whole run: each model's flat aggregate of its calls.

One function for a pytest run (run/session.py) and a merge of its shards (report/merge.py), so a
merged report breaches exactly the budgets the whole run would have.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_slam.report.aggregate import Verdict


def session_budget_breaches(
    budget_table: Mapping[str, float],
    models: Iterable[str],
    outcomes: list[dict[str, Any]],
    verdict: Verdict,
) -> list[str]:
    """The session budget's breaches, model by model (none without a budget table)."""
    if not budget_table:
        return []
    from pytest_slam.metrics.budget import SessionBudget
    from pytest_slam.metrics.latency import flatten_model

    budget = SessionBudget.from_config(dict(budget_table))
    breaches = []
    for model in models:
        calls = [c for o in outcomes if o["model"] == model for c in o["calls"]]
        flat = flatten_model(calls)
        row = verdict.row(model)
        if row is not None:
            flat.update({k: v for k, v in row.as_dict().items() if isinstance(v, int | float)})
        breaches.extend(budget.check(flat, model))
    return breaches
