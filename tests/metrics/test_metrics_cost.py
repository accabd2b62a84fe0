"""Unit tests of metrics.cost: price arithmetic, dated table, overrides, self-hosted, ratios."""

from __future__ import annotations

import re

import pytest

from pytest_slam.metrics import catalog
from pytest_slam.metrics.cost import (
    PRICE_AS_OF,
    PRICE_SOURCE,
    SELF_HOSTED_ASSUMPTION,
    Price,
    Prices,
    api_call_cost,
    cost_ratio,
    per_1000,
    self_hosted_cost,
)


def test_gpt4_call_cost() -> None:
    # 1000 x $30/Mtok + 500 x $60/Mtok = $0.03 + $0.03
    assert api_call_cost("gpt-4", 1000, 500) == pytest.approx(0.06)


@pytest.mark.parametrize(
    ("model_id", "expected"),
    [
        ("gpt-4o-mini", (0.15, 0.60)),
        ("gpt-4o-mini-2024-07-18", (0.15, 0.60)),
        ("gpt-4o-2024-08-06", (2.50, 10.0)),
        ("gpt-4o-2024-05-13", (5.00, 15.0)),
        ("gpt-4-0613", (30.0, 60.0)),
        ("gpt-4-1106-preview", (10.0, 30.0)),
        ("gpt-4-turbo-2024-04-09", (10.0, 30.0)),
        ("gpt-4.1", (2.00, 8.00)),
        ("gpt-4.1-mini", (0.40, 1.60)),
        ("gpt-3.5-turbo-0125", (0.50, 1.50)),
    ],
)
def test_snapshot_ids_price_like_their_family(model_id: str, expected: tuple) -> None:
    price = Prices().get(model_id)
    assert price is not None
    assert (price.input_per_mtok, price.output_per_mtok) == expected


def test_unknown_model_or_usage_has_no_cost() -> None:
    assert api_call_cost("smollm2-135m", 10, 10) is None
    assert api_call_cost("gpt-4", None, 10) is None
    assert Prices().get("gpt-4-vision") is None  # not a dated snapshot of gpt-4


def test_table_is_dated_with_its_source() -> None:
    assert re.fullmatch(r"\d{4}-\d{2}", PRICE_AS_OF)
    assert PRICE_SOURCE.startswith("https://")
    version = catalog.version()
    assert Prices().as_of == (
        PRICE_AS_OF if version is None else f"the genai-prices {version} snapshot"
    )
    assert Prices().source.startswith("https://")


def test_overrides_from_pyproject() -> None:
    prices = Prices.from_config(
        {
            "gpt-4": {"input_per_mtok": 10},
            "my-model": {"input_per_mtok": 1, "output_per_mtok": 2},
            "as_of": "2026-01",
        }
    )
    assert prices.get("gpt-4") == Price(10.0, 60.0)  # the output price is kept
    assert api_call_cost("my-model", 1_000_000, 500_000, prices) == pytest.approx(2.0)
    assert prices.as_of == "2026-01"
    assert Prices().get("gpt-4") == Price(30.0, 60.0)  # the default is untouched


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"gpt-4": {"input": 1}}, r"'gpt-4': unknown key 'input'; use input_per_mtok and output"),
        (
            {"new": {"input_per_mtok": 1}},
            r"'new': new model needs both prices; add output_per_mtok",
        ),
        (
            {"gpt-4": {"input_per_mtok": -1}},
            r"'gpt-4': input_per_mtok must be a number of USD >= 0, got -1",
        ),
        ({"gpt-4": {"input_per_mtok": "3"}}, r"'gpt-4': input_per_mtok must be .* got '3'"),
        ({"gpt-4": 30}, r"'gpt-4': expected a table like"),
    ],
)
def test_bad_overrides_name_the_entry_and_the_fix(config: dict, message: str) -> None:
    with pytest.raises(ValueError, match=r"\[tool.slam.prices\] " + message):
        Prices.from_config(config)


def test_self_hosted_cost_and_assumption() -> None:
    assert self_hosted_cost(1.8, 2.0) == pytest.approx(0.001)  # $2/h for 1.8 s
    assert self_hosted_cost(0.0, 2.0) == 0.0
    assert "E2E" in SELF_HOSTED_ASSUMPTION and "idle time" in SELF_HOSTED_ASSUMPTION
    with pytest.raises(ValueError, match="must be >= 0"):
        self_hosted_cost(-1.0, 2.0)


def test_per_1000() -> None:
    assert per_1000(0.06) == pytest.approx(60.0)
    assert per_1000(None) is None


def test_cost_ratio_over_aligned_lists_skips_unpriced_requests() -> None:
    assert cost_ratio([1.0, 2.0, None], [4.0, 4.0, 4.0]) == pytest.approx(3 / 8)


def test_cost_ratio_over_mappings_joins_on_request_key() -> None:
    candidate = {"a": 0.001, "b": 0.003, "only-candidate": 9.0}
    reference = {"a": 0.06, "b": 0.02, "only-reference": 9.0}
    assert cost_ratio(candidate, reference) == pytest.approx(0.004 / 0.08)


def test_cost_ratio_edge_cases() -> None:
    assert cost_ratio([], []) is None
    assert cost_ratio([1.0], [0.0]) is None
    with pytest.raises(ValueError, match="1 candidate costs vs 2 reference costs"):
        cost_ratio([1.0], [1.0, 2.0])
    with pytest.raises(TypeError, match="two mappings keyed by request, or two aligned lists"):
        cost_ratio({"a": 1.0}, [1.0])
