"""``n`` > 1 choices from an engine that lacks ``n``: n calls, merged into one completion.

llama.cpp's server refuses ``n`` > 1 (400), and so may any OpenAI-compatible server. A product that
asks for several choices would then fail against that candidate for a reason that is not the
model's. A candidate that answers 400 to ``n`` > 1 (llama.cpp is known to, and is not asked with
it) is asked ``n`` times with ``n`` left out, each call with its own seed (the product's, or
``CANDIDATE_SEED``, plus the choice's index: the same seed would give the same choice), and the
answers become choices 0..n-1 of one completion: what the product reads, the pair's scores (one
per choice) and the usage (prompt once, completion tokens summed, as the API counts them).
A streaming caller gets the merged completion as a stream once every call has ended.
"""

from __future__ import annotations

from pytest_slam.records import in_ms
from pytest_slam.swap.chat import (
    ChatResult,
    Relay,
    Target,
    caller_left,
    completion_choice,
    forward_chat,
    stream_events,
)
from pytest_slam.swap.engines.registry import provider_of
from pytest_slam.swap.request import CANDIDATE_SEED, Request
from pytest_slam.swap.upstream import JSONObject


def forward_candidate(target: Target, request: Request, relay: Relay | None = None) -> ChatResult:
    """A candidate's chat call: ``n`` > 1 through ``forward_n`` (n requests of their own where
    the engine lacks it), any other as the one request built for it."""
    n = request.body.get("n")
    if isinstance(n, int) and not isinstance(n, bool) and n > 1:
        return forward_n(target, request.body, relay, None, request.cap)
    return forward_chat(target, request.body, relay, cap=request.cap, sent=request.sent)


def forward_n(
    target: Target,
    body: JSONObject,
    relay: Relay | None = None,
    timeout: float | None = None,
    cap: int | None = None,
) -> ChatResult:
    """``body`` (``n`` > 1) answered by ``target``: in one call where the engine takes ``n``,
    else in ``n`` calls merged. A failed call fails the whole answer, as one call would."""
    if provider_of(target.spec).serves_n:
        result = forward_chat(target, body, relay, timeout, cap)
        if result.status != 400:
            return result
    one = {k: v for k, v in body.items() if k != "n"}
    seed = body.get("seed")
    base = seed if isinstance(seed, int) and not isinstance(seed, bool) else CANDIDATE_SEED
    results = []
    for index in range(int(body["n"])):
        result = forward_chat(target, {**one, "seed": base + index}, None, timeout, cap)
        result.call.request = body
        if not result.call.ok or result.completion is None:
            return result
        results.append(result)
    merged = merged_choices(results)
    if relay is not None:
        try:
            for payload in stream_events(merged.completion or {}, _wants_usage(body)):
                relay(payload)
        except OSError:  # the caller hung up: it never saw the answer
            caller_left(merged.call, stopped=True)
            return ChatResult(merged.call, status=499)
    return merged


def _wants_usage(body: JSONObject) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def merged_choices(results: list[ChatResult]) -> ChatResult:
    """One-choice results as one completion with choices 0..n-1, in order; the first call is the
    merged call, its timings from the first chunk of the first to the end of the last."""
    call = results[0].call
    summaries = []
    for index, result in enumerate(results):
        c = result.call
        summary: JSONObject = {
            "index": index,
            "text": c.text,
            "finish_reason": c.finish_reason or "stop",
        }
        if c.tool_calls:
            summary["tool_calls"] = c.tool_calls
        if c.logprobs is not None:
            summary["logprobs"] = c.logprobs
        summaries.append(summary)
    call.other_choices = summaries[1:]
    counts = [r.call.completion_tokens for r in results]
    known = [t for t in counts if isinstance(t, int)]
    call.completion_tokens = sum(known) if len(known) == len(counts) else None
    last = results[-1].call
    if call.e2e_ms is not None and last.e2e_ms is not None:
        call.e2e_ms = in_ms(last.started_at - call.started_at + last.e2e_ms / 1000.0)
    completion = dict(results[0].completion or {})
    completion["choices"] = [completion_choice(s) for s in summaries]
    usage = completion.get("usage")
    if isinstance(usage, dict) and call.completion_tokens is not None:
        prompt = usage.get("prompt_tokens") or 0
        completion["usage"] = {
            **usage,
            "completion_tokens": call.completion_tokens,
            "total_tokens": prompt + call.completion_tokens,
        }
    return ChatResult(call, completion=completion)
