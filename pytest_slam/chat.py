"""One chat completion through the swap layer: stream from upstream, time it, rebuild the answer.

TTFT is the first chunk that carries content (text or a tool call) minus the request start; E2E is the
last chunk minus the start (DESIGN.md). A caller that did not stream gets an ordinary ChatCompletion
assembled from the chunks, so its code sees no difference.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import upstream
from .records import Call, ModelSpec

Relay = Callable[[bytes], None]


@dataclass
class Target:
    """Where one call goes: a model, one of its replicas, and the key for it (never recorded)."""

    spec: ModelSpec
    base_url: str
    api_key: str | None
    role: str = "candidate"


@dataclass
class ChatResult:
    call: Call
    completion: dict[str, Any] | None = None
    status: int = 200
    error_body: bytes | None = None
    retry_after: str | None = None


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish_reason: str | None = None
    role: str = "assistant"


class Accumulator:
    """Folds streamed chunks into one completion, noting when content first and last arrived."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.first: float | None = None
        self.last: float | None = None
        self.choices: dict[int, _Choice] = {}
        self.meta: dict[str, Any] = {}
        self.usage: dict[str, Any] | None = None

    def feed(self, chunk: dict[str, Any], now: float) -> None:
        for key in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(key) is not None:
                self.meta.setdefault(key, chunk[key])
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for raw in chunk.get("choices") or ():
            choice = self.choices.setdefault(raw.get("index", 0), _Choice())
            delta = raw.get("delta") or {}
            if delta.get("content"):
                choice.text.append(delta["content"])
                self._content(now)
            for tc in delta.get("tool_calls") or ():
                self._tool_call(choice, tc)
                self._content(now)
            if raw.get("finish_reason"):
                choice.finish_reason = raw["finish_reason"]
        self.last = now

    def _content(self, now: float) -> None:
        if self.first is None:
            self.first = now

    @staticmethod
    def _tool_call(choice: _Choice, tc: dict[str, Any]) -> None:
        slot = choice.tool_calls.setdefault(
            tc.get("index", 0),
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        if tc.get("id"):
            slot["id"] = tc["id"]
        fn = tc.get("function") or {}
        slot["function"]["name"] += fn.get("name") or ""
        slot["function"]["arguments"] += fn.get("arguments") or ""

    def text(self, index: int = 0) -> str:
        choice = self.choices.get(index)
        return "".join(choice.text) if choice else ""

    def completion(self) -> dict[str, Any]:
        """The ChatCompletion a non-streaming caller would have received."""
        choices = []
        for index in sorted(self.choices) or [0]:
            choice = self.choices.get(index, _Choice())
            message: dict[str, Any] = {"role": "assistant", "content": "".join(choice.text)}
            if choice.tool_calls:
                message["tool_calls"] = [choice.tool_calls[i] for i in sorted(choice.tool_calls)]
            choices.append({"index": index, "message": message, "logprobs": None,
                            "finish_reason": choice.finish_reason or "stop"})  # fmt: skip
        return {
            "id": self.meta.get("id", "chatcmpl-slam"),
            "object": "chat.completion",
            "created": self.meta.get("created", int(time.time())),
            "model": self.meta.get("model", ""),
            "system_fingerprint": self.meta.get("system_fingerprint"),
            "choices": choices,
            "usage": self.usage,
        }

    def ms(self, at: float | None) -> float | None:
        return None if at is None else (at - self.start) * 1000.0


def upstream_body(body: dict[str, Any], spec: ModelSpec) -> dict[str, Any]:
    """The request as the target should see it: its own model name, always streamed, with usage."""
    out = dict(body)
    out["model"] = spec.model_id or body.get("model")
    out["stream"] = True
    out["stream_options"] = {"include_usage": True}
    if spec.provider == "llamacpp":
        # llama.cpp reuses a cached prompt prefix by default, which can change a temperature-0 answer
        # from one call to the next; a regression test wants the same answer every time.
        out.setdefault("cache_prompt", bool(spec.engine_args.get("cache_prompt", False)))
    return out


def forward_chat(
    target: Target, body: dict[str, Any], relay: Relay | None = None, timeout: float = 600.0
) -> ChatResult:
    """Send one chat request to ``target``; relay chunks to a streaming caller; return what was measured."""
    call = Call(model=target.spec.name, role=target.role, request=body, endpoint=target.base_url,
                streamed=bool(body.get("stream")), started_at=time.time())  # fmt: skip
    start = time.perf_counter()
    try:
        resp = upstream.post(target.base_url, "/chat/completions",
                             upstream_body(body, target.spec), target.api_key, timeout)  # fmt: skip
    except upstream.UpstreamUnreachable as exc:
        call.error = f"model {target.spec.name!r} at {target.base_url} is unreachable ({exc})"
        call.e2e_ms = (time.perf_counter() - start) * 1000.0
        return ChatResult(call, status=502)
    if resp.status != 200:
        payload = resp.read()
        call.error = upstream.error_message(resp.status, payload)
        call.e2e_ms = (time.perf_counter() - start) * 1000.0
        return ChatResult(call, status=resp.status, error_body=payload,
                          retry_after=resp.headers.get("retry-after"))  # fmt: skip
    acc = _consume(resp, start, relay, _wants_usage(body))
    _fill(call, acc)
    return ChatResult(call, completion=acc.completion())


def _wants_usage(body: dict[str, Any]) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def _consume(
    resp: upstream.Response, start: float, relay: Relay | None, usage: bool
) -> Accumulator:
    acc = Accumulator(start)
    for payload in resp.events():
        now = time.perf_counter()
        chunk = json.loads(payload)
        acc.feed(chunk, now)
        if relay is not None and (chunk.get("choices") or usage):
            relay(payload)
    return acc


def _fill(call: Call, acc: Accumulator) -> None:
    call.text = acc.text()
    first = acc.choices.get(0)
    call.finish_reason = first.finish_reason if first else None
    if first and first.tool_calls:
        call.tool_calls = [first.tool_calls[i] for i in sorted(first.tool_calls)]
    call.response_model = acc.meta.get("model")
    call.system_fingerprint = acc.meta.get("system_fingerprint")
    call.ttft_ms = acc.ms(acc.first)
    call.e2e_ms = acc.ms(acc.last)
    if acc.usage:
        call.prompt_tokens = acc.usage.get("prompt_tokens")
        call.completion_tokens = acc.usage.get("completion_tokens")


def stream_events(completion: dict[str, Any], include_usage: bool) -> list[bytes]:
    """SSE payloads that replay a stored completion to a caller that asked to stream."""
    base = {k: completion.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    out = []
    for choice in completion["choices"]:
        msg, idx = choice["message"], choice["index"]
        delta: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or ""}
        if msg.get("tool_calls"):
            delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
        out.append({**base, "choices": [{"index": idx, "delta": delta, "finish_reason": None}]})
        out.append({**base, "choices": [{"index": idx, "delta": {},
                                         "finish_reason": choice["finish_reason"]}]})  # fmt: skip
    if include_usage and completion.get("usage"):
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return [json.dumps(chunk).encode() for chunk in out]
