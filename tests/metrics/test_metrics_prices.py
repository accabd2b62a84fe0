"""Where API prices come from: overrides, then genai-prices (offline), then the dated table."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from patience import patient

from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.metrics import catalog
from pytest_slam.metrics.cost import PRICE_AS_OF, Price, Prices, api_call_cost
from pytest_slam.metrics.metering import cached_prompt_tokens, price_call
from pytest_slam.records import Call, ModelSpec

needs_genai_prices = pytest.mark.skipif(
    catalog.version() is None, reason="genai-prices is not installed"
)


@needs_genai_prices
@pytest.mark.parametrize("model_id", ["gpt-5", "gpt-5-mini", "o3", "o4-mini"])
def test_new_openai_models_are_priced_by_genai_prices(model_id: str) -> None:
    prices = Prices()
    price = prices.get(model_id)
    assert price is not None and price.input_per_mtok > 0 and price.output_per_mtok > 0
    assert price.cached_input_per_mtok is not None
    assert price.cached_input_per_mtok < price.input_per_mtok
    assert prices.priced_by(model_id) == "genai-prices"


@needs_genai_prices
def test_cached_prompt_tokens_cost_the_cached_input_rate() -> None:
    price = Prices().get("gpt-5")
    assert price is not None and price.cached_input_per_mtok is not None
    full = price.cost(1_000_000, 0)
    half_cached = price.cost(1_000_000, 0, cached_tokens=500_000)
    assert full == pytest.approx(price.input_per_mtok)
    assert half_cached == pytest.approx((price.input_per_mtok + price.cached_input_per_mtok) / 2)
    call = Call(model="gpt-5", role="reference", request={}, prompt_tokens=1_000_000,
                completion_tokens=0,
                usage_details={"prompt_tokens_details": {"cached_tokens": 500_000}})  # fmt: skip
    price_call(ModelSpec("gpt-5", "openai", "gpt-5"), call, Prices())
    assert call.cost_usd == pytest.approx(half_cached)


def test_cached_tokens_are_read_only_from_the_usage_the_server_sent() -> None:
    assert cached_prompt_tokens({"prompt_tokens_details": {"cached_tokens": 7}}) == 7
    assert cached_prompt_tokens({"prompt_tokens_details": {"cached_tokens": True}}) == 0
    assert cached_prompt_tokens({"prompt_tokens_details": None}) == 0
    assert cached_prompt_tokens(None) == 0
    # No cached-input rate: every prompt token costs the input price.
    assert Price(1.0, 2.0).cost(1_000_000, 0, cached_tokens=400_000) == pytest.approx(1.0)


def test_a_model_genai_prices_lacks_falls_back_to_the_table() -> None:
    prices = Prices(table={"house-model": Price(1.0, 2.0)})
    assert prices.get("house-model-2025-01-31") == Price(1.0, 2.0)
    assert prices.priced_by("house-model") == "table"
    assert Prices().get("smollm2-135m") is None and Prices().priced_by("smollm2-135m") is None


def test_the_table_alone_still_prices_what_it_lists() -> None:
    prices = Prices(genai_prices=False)
    assert prices.get("gpt-4o-2024-08-06") == Price(2.50, 10.0)
    assert prices.priced_by("gpt-4o") == "table"
    assert prices.get("gpt-5") is None


def test_an_override_wins_over_every_source() -> None:
    prices = Prices.from_config({"gpt-5": {"input_per_mtok": 9, "output_per_mtok": 9}})
    price = prices.get("gpt-5")
    assert price is not None and (price.input_per_mtok, price.output_per_mtok) == (9.0, 9.0)
    assert prices.priced_by("gpt-5-2025-08-07") == "override"
    assert api_call_cost("gpt-5", 1_000_000, 0, prices) == pytest.approx(9.0)


def test_pricing_never_reaches_the_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object) -> None:
        raise AssertionError("pricing tried to open a connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    catalog.rates.cache_clear()
    try:
        assert Prices().get("gpt-4o-mini") is not None
    finally:
        catalog.rates.cache_clear()
    if catalog.version() is not None:
        from genai_prices import data_snapshot

        assert data_snapshot.get_snapshot().from_auto_update is False


_WITHOUT_GENAI_PRICES = """
import json, sys
sys.modules["genai_prices"] = None
from pytest_slam.metrics.cost import Prices
p = Prices()
print(json.dumps([p.as_of, p.source, p.priced_by("gpt-4o"), p.get("gpt-4o").input_per_mtok,
                  p.get("gpt-5") is None]))
"""


def test_without_genai_prices_the_dated_table_is_used() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _WITHOUT_GENAI_PRICES],
        capture_output=True,
        text=True,
        check=True,
        timeout=patient(60),
    ).stdout
    as_of, source, by, gpt4o_input, gpt5_unpriced = json.loads(out)
    assert (as_of, by, gpt4o_input, gpt5_unpriced) == (PRICE_AS_OF, "table", 2.5, True)
    assert source.startswith("https://")


# -- genai-prices' answers kept between runs (catalog.cached_rates) --------------------------------


@needs_genai_prices
def test_a_kept_answer_is_the_looked_up_one_and_an_unknown_model_is_kept_too(tmp_path) -> None:
    cache = DiskCache(tmp_path / ".slam" / "prices")
    first = Prices(cache=cache)
    assert first.get("gpt-4o") == Prices().get("gpt-4o") is not None
    assert first.get("no-such-model-anywhere") is None
    kept = sorted(json.loads(p.read_text())["key"] for p in tmp_path.rglob("*.json"))
    version = catalog.version()
    assert kept == [
        f"genai-prices {version} openai {m}" for m in ("gpt-4o", "no-such-model-anywhere")
    ]
    assert (tmp_path / ".slam" / ".gitignore").read_text().endswith("*\n")  # never committed


_KEPT_RUN = """
import json, sys
from pytest_slam.compare.diskcache import DiskCache
from pytest_slam.metrics.cost import Prices
p = Prices(cache=DiskCache(sys.argv[1]))
price = p.get("gpt-4o")
print(json.dumps([price.input_per_mtok, p.priced_by("gpt-4o"), "genai_prices" in sys.modules]))
"""


@needs_genai_prices
def test_a_second_run_prices_from_the_kept_answer_without_importing_genai_prices(tmp_path) -> None:
    def run() -> list[object]:
        argv = [sys.executable, "-c", _KEPT_RUN, str(tmp_path / "prices")]
        return json.loads(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)

    looked_up, kept = run(), run()
    assert looked_up[2] is True and kept[2] is False  # the snapshot is imported once
    assert kept[:2] == looked_up[:2] == [Prices().get("gpt-4o").input_per_mtok, "genai-prices"]


@needs_genai_prices
@pytest.mark.parametrize(
    "rates",
    [[-1.0, 2.0, None], [1.0, "2", None], [1.0, 2.0], "30", [True, 2.0, None], [1.0, 2.0, -3.0]],
)
def test_a_kept_entry_of_another_shape_is_looked_up_again_and_rewritten(tmp_path, rates) -> None:
    cache = DiskCache(tmp_path)
    key = f"genai-prices {catalog.version()} openai gpt-4o"
    cache.put(key, {"key": key, "rates": rates})
    assert catalog.cached_rates("gpt-4o", cache) == catalog.rates("gpt-4o") is not None
    assert cache.get(key) == {"key": key, "rates": list(catalog.rates("gpt-4o"))}


@needs_genai_prices
def test_an_entry_of_another_version_is_not_read(tmp_path) -> None:
    cache = DiskCache(tmp_path)
    key = f"genai-prices {catalog.version()} openai gpt-4o"
    cache.put(key, {"key": "genai-prices 0.0.1 openai gpt-4o", "rates": [999.0, 999.0, None]})
    assert catalog.cached_rates("gpt-4o", cache) == catalog.rates("gpt-4o")
    assert catalog.rates("gpt-4o") != (999.0, 999.0, None)


@needs_genai_prices
def test_a_read_only_scratch_folder_still_prices(tmp_path) -> None:
    class ReadOnly(DiskCache):
        def put(self, key: str, value: object) -> None:
            raise PermissionError(13, "read-only file system", key)

    assert catalog.cached_rates("gpt-4o", ReadOnly(tmp_path)) == catalog.rates("gpt-4o")
