"""What a report says about how its numbers were made: the reference's name and the cost model.

Kept apart from the session so the wording is tested once and reads the same in every rendering.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.registry import provider_of

if TYPE_CHECKING:
    from pytest_slam.metrics.cost import Prices


def reference_name(spec_text: str, spec: ModelSpec | None) -> str:
    """The name a reader knows the reference by: ``gpt-4``, not ``http://127.0.0.1:8000/v1#gpt-4``.

    An endpoint spec's name is its model id; every other spec keeps the text the user gave, which
    already reads well (``openai:gpt-4``, ``curated``). The full spec stays in ``run.settings``.
    """
    if spec is None:
        return spec_text
    return spec.name if spec.provider == "endpoint" else spec_text


def cost_assumption(
    candidates: Iterable[ModelSpec], reference: ModelSpec | None, table: Prices
) -> str:
    """One sentence per cost model the run used: API list prices, self-hosted busy time."""
    from pytest_slam.metrics.cost import SELF_HOSTED_ASSUMPTION

    specs = [*candidates, *([reference] if reference is not None else [])]
    parts = []
    api = [s for s in specs if provider_of(s).cost_model(s) == "tokens"]
    if api:
        by = ", ".join(f"{s.model_id}: {_priced_by(s, table)}" for s in api)
        parts.append(
            f"API cost = tokens x list prices as of {table.as_of} ({table.source}) [{by}]; "
            "override them in [tool.slam.prices]"
        )
    if any(s.hourly_usd is not None for s in specs):
        parts.append(SELF_HOSTED_ASSUMPTION)
    return "; ".join(parts)


def _priced_by(spec: ModelSpec, table: Prices) -> str:
    """Where a model's price comes from, as metering.price_call decides it: its own model table's
    ``input_per_mtok``/``output_per_mtok`` first, then the price sources (unpriced: none)."""
    if spec.input_usd_per_mtok is not None and spec.output_usd_per_mtok is not None:
        return "its model table"
    return table.priced_by(spec.model_id) or "unpriced"
