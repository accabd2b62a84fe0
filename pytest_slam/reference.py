"""The reference model's side of a swap: golden answers replayed, or recorded from the real model.

Replay is the default and what CI runs: a request with no golden answer fails the test with the exact
command that records it. Recording asks the real reference (a hosted API, or any model spec) with
retries and backoff; nothing reaches the golden file until the store flushes it whole.
Latency is never served from the cache: a replayed answer carries the latency measured when it was
recorded, and it is shown as such.
"""

from __future__ import annotations

import datetime as dt
import email.utils
import os
import time
from dataclasses import dataclass, field
from typing import Any

from .chat import ChatResult, Relay, Target, forward_chat
from .golden.keys import request_key
from .golden.store import GoldenStore
from .records import Call, GoldenAnswer, GoldenRecord, ModelSpec

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 30.0


class MissingGolden(LookupError):
    """No golden answer for a request, in replay mode."""


class ReferenceFailed(RuntimeError):
    """The real reference could not be reached or kept failing while recording."""


def _now_iso() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def completion_from(rec: GoldenRecord, sample: int = 0) -> dict[str, Any]:
    """The ChatCompletion the reference returned, rebuilt from its golden answer."""
    ans = rec.answers[sample]
    message: dict[str, Any] = {"role": "assistant", "content": ans.text}
    if ans.tool_calls:
        message["tool_calls"] = ans.tool_calls
    usage = None
    if ans.prompt_tokens is not None and ans.completion_tokens is not None:
        usage = {"prompt_tokens": ans.prompt_tokens, "completion_tokens": ans.completion_tokens,
                 "total_tokens": ans.prompt_tokens + ans.completion_tokens}  # fmt: skip
    return {
        "id": f"chatcmpl-golden-{rec.key}", "object": "chat.completion", "created": 0,
        "model": ans.model or "", "system_fingerprint": ans.system_fingerprint, "usage": usage,
        "choices": [{"index": 0, "message": message, "logprobs": None,
                     "finish_reason": ans.finish_reason or "stop"}],
    }  # fmt: skip


def answer_from(call: Call) -> GoldenAnswer:
    return GoldenAnswer(
        text=call.text, model=call.response_model, recorded_at=_now_iso(),
        finish_reason=call.finish_reason, tool_calls=call.tool_calls,
        prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens,
        ttft_ms=call.ttft_ms, e2e_ms=call.e2e_ms, system_fingerprint=call.system_fingerprint,
    )  # fmt: skip


@dataclass
class ReferenceService:
    """Answers for the reference model: from the golden store, or recorded when the mode allows."""

    spec: ModelSpec
    store: GoldenStore
    mode: str = "none"  # none | new | all
    samples: int = 1
    retries: int = 4
    timeout_s: float = 120.0
    backoff_s: float = 0.5
    rerecorded: set[tuple[str, str]] = field(default_factory=set)

    def answer(self, module: str, test: str, body: dict[str, Any], selector: str) -> GoldenRecord:
        """The golden record for ``body`` as asked by ``test``; records it if the mode says so."""
        key = request_key(body)
        rec = self.store.lookup(module, key)
        stale_all = self.mode == "all" and (module, key) not in self.rerecorded
        if rec is not None and rec.answers and not stale_all:
            self.store.mark_used(module, key, test)
            return rec
        if self.mode == "none":
            raise MissingGolden(self._missing_message(module, key, selector))
        rec = self.record(module, test, key, body)
        self.rerecorded.add((module, key))
        return rec

    def _missing_message(self, module: str, key: str, selector: str) -> str:
        return (
            f"no golden answer of {self.store.reference} for this request in "
            f"{self.store.path_for(module)} (key {key}). Record it from the real reference with: "
            f"pytest --slm-record=new '{selector}'"
            + (f" (needs ${self.spec.api_key_env})" if self.spec.api_key_env else "")
        )

    def record(self, module: str, test: str, key: str, body: dict[str, Any]) -> GoldenRecord:
        answers = [answer_from(self.ask(body)) for _ in range(self.samples)]
        rec = GoldenRecord(key=key, request=body, answers=answers, tests=[test])
        self.store.record(module, rec, test)
        return self.store.lookup(module, key) or rec

    def ask(self, body: dict[str, Any]) -> Call:
        """One real call to the reference, retried with exponential backoff on 429, 5xx and timeouts."""
        if self.spec.provider == "curated" or not self.spec.base_urls:
            raise ReferenceFailed(
                f"the reference {self.spec.name!r} cannot be asked: its answers are written by hand. "
                "Add the answer to the golden file, or import it with `slam golden import FILE`."
            )
        target = Target(self.spec, self.spec.base_urls[0], _key(self.spec), role="reference")
        request = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        delay = self.backoff_s
        for attempt in range(self.retries + 1):
            result = forward_chat(target, request, timeout=self.timeout_s)
            if result.call.ok:
                return result.call
            retryable = result.status in RETRY_STATUSES or "unreachable" in (result.call.error or "")
            if not retryable or attempt == self.retries:
                break
            time.sleep(max(delay, _retry_after(result)))
            delay *= 2
        raise ReferenceFailed(
            f"recording from reference {self.spec.name!r} at {target.base_url} failed after "
            f"{attempt + 1} attempt(s): {result.call.error}. Nothing was written for this request."
        )

    def chat(self, ctx: Any, body: dict[str, Any], relay: Relay | None) -> ChatResult:
        """Serve the ``gpt4_reference`` client: the golden answer, as the API would return it."""
        if ctx is None:
            raise LookupError("gpt4_reference was called outside an opted-in test")
        rec = self.answer(ctx.module, ctx.test, body, ctx.test)
        completion = completion_from(rec)
        ans = rec.answers[0]
        call = Call(model=self.spec.name, role="reference", request=body, text=ans.text,
                    finish_reason=ans.finish_reason, response_model=ans.model,
                    prompt_tokens=ans.prompt_tokens, completion_tokens=ans.completion_tokens,
                    ttft_ms=ans.ttft_ms, e2e_ms=ans.e2e_ms, replayed=True, key=rec.key,
                    streamed=bool(body.get("stream")), started_at=time.time())  # fmt: skip
        ctx.add(call)
        return ChatResult(call, completion=completion)


def _key(spec: ModelSpec) -> str | None:
    return os.environ.get(spec.api_key_env) if spec.api_key_env else None


def _retry_after(result: ChatResult) -> float:
    """Seconds from a Retry-After the server sent with a 429 (absent here: 0)."""
    header = result.retry_after
    if not header:
        return 0.0
    try:
        seconds = float(header)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return 0.0
        seconds = (parsed - dt.datetime.now(dt.UTC)).total_seconds()
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)
