"""metering: tokens counted where a server reported none, prices, GPU energy around each call.

Calls are real: a real llama.cpp server (SmolLM2-135M) and FakeOpenAI on loopback, through the
swap's own ``forward_chat``. The energy meter runs against this machine's real NVML situation.
"""

from __future__ import annotations

import pytest

from pytest_slam.metrics.cost import Prices
from pytest_slam.metrics.energy import GpuMeter
from pytest_slam.metrics.metering import (
    EnergyMeter,
    fill_tokens,
    gpu_served,
    measure,
    outcome_energy,
    price_call,
    validate_tables,
)
from pytest_slam.metrics.tokens import framed_prompt_count, openai_encoding
from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.testing import FakeOpenAI

SYSTEM = {"role": "system", "content": "You are a terse assistant."}
ASKS = [
    ("Say hello.", 40),  # ends by itself: the engine counts its end-of-turn token
    ("List the colours of the rainbow, one per line.", 6),  # cut at max_tokens
]


def _call(url: str, spec: ModelSpec, question: str, max_tokens: int) -> Call:
    body = {"model": "gpt-4o", "messages": [SYSTEM, {"role": "user", "content": question}],
            "max_tokens": max_tokens, "temperature": 0}  # fmt: skip
    result = forward_chat(Target(spec, url, None), body)
    assert result.call.ok, result.call.error
    return result.call


def _without_usage(call: Call) -> Call:
    bare = Call.from_dict(call.as_dict())
    bare.prompt_tokens = bare.completion_tokens = None
    return bare


@pytest.mark.engine
@pytest.mark.parametrize("provider", ["llamacpp", "endpoint"])
def test_missing_usage_is_counted_by_the_engine_as_it_bills(
    smollm2_url: str, provider: str
) -> None:
    spec = ModelSpec("smol", provider, "SmolLM2-135M-Instruct", base_urls=[smollm2_url])
    finishes = set()
    for question, max_tokens in ASKS:
        served = _call(smollm2_url, spec, question, max_tokens)
        counted = _without_usage(served)
        assert fill_tokens(spec, counted) == "llamacpp"  # an endpoint is probed for /tokenize
        assert (counted.prompt_tokens, counted.completion_tokens) == (
            served.prompt_tokens,
            served.completion_tokens,
        )
        assert counted.tokens_estimated and not served.tokens_estimated
        finishes.add(served.finish_reason)
    assert finishes == {"stop", "length"}


def test_openai_model_without_usage_is_counted_with_tiktoken() -> None:
    encoding, reason = openai_encoding("gpt-4")
    if encoding is None:
        pytest.skip(reason)
    spec = ModelSpec("gpt-4-like", "endpoint", "gpt-4")
    with FakeOpenAI("Blue, mostly; sunsets are red.", report_usage=False) as fake:
        calls = [_call(fake.base_url, spec, "What colour is the sky?", 20) for _ in range(2)]
        for call in calls:
            assert call.prompt_tokens is None and call.completion_tokens is None
            assert fill_tokens(spec, call) == "tiktoken:cl100k_base"
        probes = [r.path for r in fake.requests if r.path != "/v1/chat/completions"]
    assert calls[0].completion_tokens == len(encoding.encode("Blue, mostly; sunsets are red."))
    # 3 per message, role and content, 3 to prime the reply (OpenAI's own framing)
    messages = calls[0].request["messages"]
    assert calls[0].prompt_tokens == framed_prompt_count(
        messages, lambda t: len(encoding.encode(t))
    )
    assert calls[0].prompt_tokens == 3 + (3 + 1 + 6) + (3 + 1 + 6)
    assert all(c.tokens_estimated for c in calls)
    assert probes == ["/tokenize", "/tokenize"]  # llama.cpp's, then vLLM's: once per endpoint


def test_unknown_model_without_tokenizer_falls_back_to_the_heuristic() -> None:
    spec = ModelSpec("remote", "ollama", "mystery-7b")
    call = Call(model="remote", role="candidate", text="Hello, world!", finish_reason="stop",
                request={"messages": [{"role": "user", "content": "Hi there"}]})  # fmt: skip
    assert fill_tokens(spec, call) == "heuristic"
    assert call.completion_tokens == 4  # Hello , world !
    assert call.prompt_tokens == 3 + 3 + 1 + 2
    assert call.tokens_estimated


def test_reported_usage_and_failed_calls_are_left_alone() -> None:
    spec = ModelSpec("m", "openai", "gpt-4")
    reported = Call(model="m", role="candidate", request={}, prompt_tokens=7, completion_tokens=3)
    failed = Call(model="m", role="candidate", request={"messages": []}, error="HTTP 500")
    assert fill_tokens(spec, reported) is None and fill_tokens(spec, failed) is None
    assert (reported.prompt_tokens, reported.completion_tokens) == (7, 3)
    assert failed.prompt_tokens is None and not failed.tokens_estimated


def test_price_of_api_and_self_hosted_calls() -> None:
    prices = Prices.from_config({"gpt-4": {"input_per_mtok": 20.0}})  # output stays at 60
    api = Call(model="ref", role="candidate", request={}, prompt_tokens=1000, completion_tokens=500)
    price_call(ModelSpec("ref", "openai", "gpt-4-0613"), api, prices)
    assert api.cost_usd == (1000 * 20.0 + 500 * 60.0) / 1e6 == 0.05
    hosted = Call(model="vm", role="candidate", request={}, e2e_ms=1800.0, completion_tokens=9)
    price_call(ModelSpec("vm", "vllm", "qwen", hourly_usd=4.0), hosted, prices)
    assert hosted.cost_usd == 4.0 * 1.8 / 3600.0 == 0.002


def test_measure_prices_the_tokens_it_counted() -> None:
    spec = ModelSpec("m", "ollama", "mystery", input_usd_per_mtok=1.0, output_usd_per_mtok=2.0)
    call = Call(model="m", role="candidate", text="One two three", finish_reason="stop",
                request={"messages": [{"role": "user", "content": "Count"}]})  # fmt: skip
    measure(spec, call, Prices())
    assert (call.prompt_tokens, call.completion_tokens) == (8, 3)
    assert call.cost_usd == (8 * 1.0 + 3 * 2.0) / 1e6


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ({"gpt-4": {"input_per_mtok": "cheap"}}, "input_per_mtok must be a number of USD >= 0"),
        ({"new-model": {"input_per_mtok": 1.0}}, "new model needs both prices"),
    ],
)
def test_bad_price_table_is_refused(table: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        validate_tables(table, {})


def test_bad_budget_table_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown key 'p95_latency'"):
        validate_tables({}, {"p95_latency": 100})
    validate_tables({"as_of": "2026-01"}, {"p95_e2e_ms": 2000})  # good tables pass


def test_which_models_are_gpu_served() -> None:
    assert gpu_served(ModelSpec("q", "vllm", "Qwen/Qwen2.5-0.5B-Instruct"))
    assert not gpu_served(ModelSpec("q", "vllm", "q", engine_args={"gpu": False}))
    assert gpu_served(ModelSpec("e", "endpoint", "e", engine_args={"gpu": True}))
    assert not gpu_served(ModelSpec("smol", "llamacpp", "smol"))


def test_energy_meter_opens_nvml_only_for_gpu_served_models() -> None:
    meter = EnergyMeter([ModelSpec("smol", "llamacpp", "smol")])
    assert meter.gpu is None and meter.line == "" and not meter.available


def test_energy_meter_around_a_real_call() -> None:
    spec = ModelSpec("gpu-model", "endpoint", "gpu-model", engine_args={"gpu": True})
    meter = EnergyMeter([spec])
    try:
        with FakeOpenAI("ok") as fake:
            body = {"model": "x", "messages": [{"role": "user", "content": "hi"}]}
            result = meter.metered(
                spec, lambda: forward_chat(Target(spec, fake.base_url, None), body)
            )
        assert result.call.text == "ok"
        if GpuMeter().available:
            assert meter.line.startswith("GPU telemetry: ")
            assert result.call.energy_j is not None and result.call.energy_j >= 0
        else:  # this machine's real situation: one line saying why, and the call still served
            assert meter.line.startswith("GPU telemetry not available (")
            assert result.call.energy_j is None
    finally:
        meter.close()


def test_a_tests_energy_is_the_sum_of_its_calls() -> None:
    calls = [Call(model="m", role="candidate", request={}, energy_j=e) for e in (1.5, None, 2.0)]
    assert outcome_energy(calls) == 3.5
    assert outcome_energy(calls[1:2]) is None
    assert outcome_energy([]) is None
