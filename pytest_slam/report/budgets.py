"""``[tool.slam.budget]`` checked against the whole run: each model's flat aggregate of its calls.

One function for a pytest run (run/start/session.py) and a merge of its shards (report/merge.py), so a
merged report breaches exactly the budgets the whole run would have.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pytest_slam.report.aggregate import Verdict

if TYPE_CHECKING:
    from pytest_slam.metrics.budget import SessionBudget


def session_budget_breaches(
    budget: SessionBudget,
    models: Iterable[str],
    outcomes: Iterable[dict[str, Any]],  # read again for each model
    verdict: Verdict,
) -> list[str]:
    """The session budget's breaches, model by model (none without a limit)."""
    if not budget.limits:
        return []
    from pytest_slam.metrics.latency import flatten_model

    breaches = []
    for model in models:
        calls = [c for o in outcomes if o["model"] == model for c in o["calls"]]
        flat = flatten_model(calls)
        row = verdict.row(model)
        if row is not None:
            flat.update({k: v for k, v in row.as_dict().items() if isinstance(v, int | float)})
        breaches.extend(budget.check(flat, model))
    return breaches
