"""What a report says about its reference and its cost model."""

from __future__ import annotations

from pytest_slam.metrics.cost import Prices
from pytest_slam.report.runinfo import cost_assumption, reference_name
from pytest_slam.swap.models import resolve


def test_reference_name_is_the_model_a_reader_knows() -> None:
    endpoint = "http://127.0.0.1:8000/v1#gpt-4"
    assert reference_name(endpoint, resolve(endpoint)) == "gpt-4"
    assert reference_name("openai:gpt-4", resolve("openai:gpt-4")) == "openai:gpt-4"
    assert reference_name("curated", resolve("curated")) == "curated"
    assert reference_name("", None) == ""


def test_cost_assumption_names_only_the_cost_models_used() -> None:
    api = cost_assumption(
        [resolve("openai:gpt-4o-mini")], None, Prices.from_config({"as_of": "2026-01"})
    )
    assert api.startswith("API cost = tokens x list prices as of 2026-01 (https://")
    assert "self-hosted" not in api
    local = cost_assumption([resolve("smollm2-135m")], resolve("curated"), Prices())
    assert local.startswith("self-hosted cost = the engine machine's hourly price x the seconds")
    both = cost_assumption([resolve("smollm2-135m")], resolve("openai:gpt-4"), Prices())
    assert both.startswith("API cost") and "; self-hosted cost" in both


def test_cost_note_names_a_model_table_that_sets_its_prices() -> None:
    """A model table's input_per_mtok/output_per_mtok price its calls (metering.price_call): the
    note says so, and "unpriced" only for a model nothing prices."""
    from dataclasses import replace

    base = resolve("openai:gpt-4o-mini")
    own = replace(base, model_id="house-model-7", input_usd_per_mtok=0.2, output_usd_per_mtok=0.8)
    bare = replace(base, model_id="house-model-8")
    note = cost_assumption([own, bare], None, Prices())
    assert "house-model-7: its model table" in note
    assert "house-model-8: unpriced" in note
