"""What a call used and cost: tokens where the server gave none, its price, and its GPU energy.

Tokens: a server that ignores ``stream_options.include_usage`` (llama-cpp-python's, some proxies)
reports no usage. The swap then counts the request and the answer itself with the engine's own
tokenizer (llama.cpp or vLLM ``/tokenize``), else tiktoken for OpenAI models, else a heuristic
(metrics.tokens), and marks the call ``tokens_estimated``: even an exact tokenizer cannot see what
the server billed around the text (template, end-of-turn token), so the count is never called exact.

Cost of an API call is tokens times the model's list price (metrics.cost), cached prompt tokens at
the cached-input price where the server reported them; a self-hosted call is the
engine machine's hourly price times the seconds it kept it busy (its E2E), the assumption every
report states.

Energy: each call to a GPU-served model (a provider that says ``gpu``, as vLLM does, or any model
whose engine table says ``gpu = true``) is metered on this machine's GPUs with NVML
(metrics.energy); a test's energy is the sum of its calls' (the GPU's idle time between calls is
the product's, not the model's).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pytest_slam.records import JSON, Call, ModelSpec, spent
from pytest_slam.swap.engines.registry import provider_of

if TYPE_CHECKING:
    from pytest_slam.metrics.cost import Prices
    from pytest_slam.metrics.energy import GpuMeter
    from pytest_slam.swap.chat import ChatResult

TOKENIZER_TIMEOUT_S = 5.0
_TOKENIZER_BY_URL: dict[str, str | None] = {}  # endpoint -> "llamacpp" | "vllm" | None (none)


def gpu_served(spec: ModelSpec) -> bool:
    """A model served on this machine's GPU: as its provider says (vLLM), or ``gpu = true``."""
    return bool(spec.engine_args.get("gpu", provider_of(spec).gpu))


# -- tokens ------------------------------------------------------------------------------------


def fill_tokens(spec: ModelSpec, call: Call) -> str | None:
    """Count what the server did not report; the method used, or None when nothing was missing."""
    from pytest_slam.metrics import tokens

    if not spent(call) or (call.prompt_tokens is not None and call.completion_tokens is not None):
        return None
    server, url = _tokenizer(spec, call)
    model_id = spec.model_id or call.response_model or ""
    method = ""
    if call.completion_tokens is None:
        text = _completion_text(call)
        count, method = tokens.count_tokens(text, model_id, url, TOKENIZER_TIMEOUT_S, server)
        call.completion_tokens = count + _end_token(call, method)
    if call.prompt_tokens is None:
        messages = list(call.request.get("messages") or [])
        count, method = tokens.count_prompt_tokens(
            messages, model_id, url, TOKENIZER_TIMEOUT_S, server
        )
        call.prompt_tokens = count
    call.tokens_estimated = True
    return method


def _tokenizer(spec: ModelSpec, call: Call) -> tuple[str, str | None]:
    """(server kind, base URL) of the engine's own tokenizer, or a URL of None when it has none."""
    url = call.endpoint or (spec.base_urls[0] if spec.base_urls else "")
    tokenizer = provider_of(spec).tokenizer
    if tokenizer in ("llamacpp", "vllm"):
        return tokenizer, url or None
    if tokenizer != "probe" or not url or urlsplit(url).hostname == "api.openai.com":
        return "llamacpp", None
    if url not in _TOKENIZER_BY_URL:
        _TOKENIZER_BY_URL[url] = _probe(url, spec.model_id)
    kind = _TOKENIZER_BY_URL[url]
    return (kind, url) if kind else ("llamacpp", None)


def _probe(url: str, model_id: str) -> str | None:
    """Which tokenizer an OpenAI-compatible endpoint offers, asked once per endpoint."""
    from pytest_slam.metrics import tokens

    for kind in tokens.SERVERS:
        _count, method = tokens.count_tokens("probe", model_id, url, TOKENIZER_TIMEOUT_S, kind)
        if method == kind:
            return kind
    return None


def _completion_text(call: Call) -> str:
    parts = [call.text or ""]
    for tool_call in call.tool_calls or ():
        fn = tool_call.get("function") or {}
        parts += [str(fn.get("name") or ""), str(fn.get("arguments") or "")]
    return " ".join(p for p in parts if p)


def _end_token(call: Call, method: str) -> int:
    """An engine counts the end-of-turn token it generated; its text does not show it."""
    natural_stop = call.finish_reason == "stop" and not call.request.get("stop")
    return 1 if natural_stop and method in ("llamacpp", "vllm") else 0


# -- cost --------------------------------------------------------------------------------------


def cached_prompt_tokens(usage_details: Mapping[str, JSON] | None) -> int:
    """Prompt tokens the server served from its cache (``prompt_tokens_details.cached_tokens``)."""
    details = (usage_details or {}).get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return cached if isinstance(cached, int) and not isinstance(cached, bool) and cached > 0 else 0


def price_call(spec: ModelSpec, call: Call, prices: Prices | None) -> None:
    """Set ``call.cost_usd``: the model's own prices, its hourly price, else the price table."""
    from pytest_slam.metrics.cost import Price, api_call_cost, self_hosted_cost

    cost_model = provider_of(spec).cost_model(spec)
    if call.cost_usd is not None or not spent(call) or cost_model == "none":
        return
    if cost_model == "hourly" and spec.hourly_usd is not None and call.e2e_ms is not None:
        call.cost_usd = self_hosted_cost(call.e2e_ms / 1000.0, spec.hourly_usd)
    elif spec.input_usd_per_mtok is not None and spec.output_usd_per_mtok is not None:
        if call.prompt_tokens is not None and call.completion_tokens is not None:
            own = Price(spec.input_usd_per_mtok, spec.output_usd_per_mtok)
            call.cost_usd = own.cost(call.prompt_tokens, call.completion_tokens)
    else:
        call.cost_usd = api_call_cost(
            spec.model_id,
            call.prompt_tokens,
            call.completion_tokens,
            prices,
            cached_tokens=cached_prompt_tokens(call.usage_details),
        )


def measure(spec: ModelSpec, call: Call, prices: Prices | None) -> None:
    """Everything the swap adds to a finished call before it is checked and reported."""
    fill_tokens(spec, call)
    price_call(spec, call, prices)


def validate_tables(prices: Mapping[str, JSON] | None, budget: Mapping[str, JSON] | None) -> None:
    """``[tool.slam.prices]`` and ``[tool.slam.budget]`` checked at configure time: ValueError."""
    from pytest_slam.metrics.budget import SessionBudget
    from pytest_slam.metrics.cost import Prices

    Prices.from_config(prices)
    SessionBudget.from_config(budget)


# -- energy ------------------------------------------------------------------------------------


class Overlap:
    """Each metered call's share of the time it overlapped others: over a span where n calls
    were in flight, each gets 1/n of it. ``leave`` gives the call's share of its own span (1.0
    alone), by which its span's energy is divided among the calls that spent it."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._active: dict[int, list[float]] = {}  # call -> [start, time owned]
        self._last = 0.0
        self._next = 0

    def _advance(self, now: float) -> None:
        if self._active:
            slice_s = (now - self._last) / len(self._active)
            for held in self._active.values():
                held[1] += slice_s
        self._last = now

    def enter(self) -> int:
        with self._lock:
            now = self._clock()
            self._advance(now)
            self._next += 1
            self._active[self._next] = [now, 0.0]
            return self._next

    def leave(self, token: int) -> float:
        with self._lock:
            now = self._clock()
            self._advance(now)
            start, owned = self._active.pop(token)
        return owned / (now - start) if now > start else 1.0


class EnergyMeter:
    """GPU energy of each call to a GPU-served model, for one process (one NVML session).

    NVML is opened only when a selected model is GPU-served; ``line`` then says what is metered
    or why nothing can be (the run's ``gpu_telemetry``), and is empty otherwise.
    """

    def __init__(self, specs: Iterable[ModelSpec]) -> None:
        self.gpu: GpuMeter | None = None
        self.line = ""
        self.overlap = Overlap()
        if any(gpu_served(spec) for spec in specs):
            from pytest_slam.metrics.energy import GpuMeter

            self.gpu = GpuMeter()
            self.line = self.gpu.reason

    @property
    def available(self) -> bool:
        return self.gpu is not None and self.gpu.available

    def metered(self, spec: ModelSpec, chat: Callable[[], ChatResult]) -> ChatResult:
        """Run one chat call; a GPU-served model's call gets ``energy_j`` from its own span,
        shared with the calls in flight beside it (``Overlap``): with 8 calls at once the GPU's
        energy over a span is 8 calls' work, not this one's."""
        gpu = self.gpu
        if gpu is None or not gpu.available or not gpu_served(spec):
            return chat()
        mine = self.overlap.enter()
        span = gpu.span().start()
        try:
            result = chat()
        finally:
            sample = span.stop()
            share = self.overlap.leave(mine)
        if sample.energy_j is not None:
            result.call.energy_j = sample.energy_j * share
        return result

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()


def outcome_energy(calls: Iterable[Call]) -> float | None:
    """A test's energy: the sum over its metered calls; None when none was metered."""
    measured = [c.energy_j for c in calls if c.energy_j is not None]
    return sum(measured) if measured else None
