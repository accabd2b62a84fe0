"""One call's facts for the HTML report's transcript: its tokens and time, and its raw request and
answer, as small as the page can carry them at 10,000 tests.

The raw request is not a second copy of the conversation: a call of an agent sends again every
message its previous call sent, so its request keeps only the messages that call had not sent,
naming the pair whose request holds the rest; a message whose text the transcript step already
shows carries that step's index instead of the text. The answer's text is the step's too. The
page's script puts the whole request and answer back together. Every string is shown as
``textcodec.visible`` writes it (a bidi override is a marker, never applied), keys included: once,
over a row's whole line as it is written (``shown_json``), not string by string.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pytest_slam.records import JSON, Call
from pytest_slam.report import fmt
from pytest_slam.util.textcodec import dumps, visible

# What ``visible`` changes beyond ASCII, as ``json.dumps(ensure_ascii=False)`` writes it: a
# surrogate, a bidi control, a C1 control... Within ASCII: DEL, and a C0 control, which json writes
# as an escape (a backslash, then b, f or u; an escaped backslash before one of those letters
# counts too: the walk then, never a wrong line).
_CHANGED = re.compile(
    "[\ud800-\udfff\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ufeff\ufffe\uffff\x80-\x9f]"
)

# one encoder for every line: ``json.dumps`` with options builds a new one a call (3 us of 20)
_LINE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def call_data(calls: list[Call], index: int, steps: list[JSON], earlier: int) -> list[JSON]:
    """``[tokens and time, raw request, raw answer]`` of ``calls[index]``; ``steps``: its
    transcript step (``htmldata.transcript_step``); ``earlier``: the position, among its row's
    pairs, of the pair whose call is this call's previous one of the same role (-1: none)."""
    if not 0 <= index < len(calls):
        return []
    call = calls[index]
    return [measured(call), raw_request(calls, index, steps, earlier), raw_answer(call, steps)]


def measured(call: Call) -> str:
    """``"prompt 120 + completion 35 tokens · TTFT 80 ms · E2E 412 ms"``, with what the figures
    are not (estimated tokens, a replayed or cached answer's timings)."""
    tokens = (
        f"prompt {_count(call.prompt_tokens)} + completion {_count(call.completion_tokens)} tokens"
    )
    if call.tokens_estimated:
        tokens += " (estimated)"
    parts = [tokens, f"TTFT {fmt.ms(call.ttft_ms)}", f"E2E {fmt.ms(call.e2e_ms)}"]
    if call.replayed:
        parts.append("replayed (not measured in this run)")
    elif call.cached:
        parts.append("from the answer cache (timed in the run that asked first)")
    return " \u00b7 ".join(parts)


def _count(value: int | None) -> str:
    return "-" if value is None else f"{value:,}"


def raw_request(calls: list[Call], index: int, steps: list[JSON], earlier: int) -> list[JSON]:
    """``[earlier pair, messages kept from its request, the request with the other messages]``:
    a message whose text is a step's shown text has that step's index as its ``content``."""
    call = calls[index]
    request: dict[str, Any] = dict(call.request)
    messages = request.get("messages")
    kept = 0
    if isinstance(messages, list):
        before = _previous_messages(calls, index) if earlier >= 0 else None
        if before is not None and messages[: len(before)] == before:
            kept = len(before)
        request["messages"] = [_by_step(m, steps) for m in messages[kept:]]
    return [earlier if kept else -1, kept, request]


def _previous_messages(calls: list[Call], index: int) -> list[JSON] | None:
    role = calls[index].role
    earlier = [c for c in calls[:index] if c.role == role]
    found = earlier[-1].request.get("messages") if earlier else None
    return found if isinstance(found, list) else None


def _by_step(message: JSON, steps: list[JSON]) -> JSON:
    """The message, its string content replaced by the index of the step showing that text."""
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        return message
    text = message["content"]
    for i, step in enumerate(steps):
        if isinstance(step, list) and step[1] == text and step[0] != "assistant":
            return {**message, "content": i}
    return message


def raw_answer(call: Call, steps: list[JSON]) -> list[JSON]:
    """``[the step holding the answer's text (-1: none), the answer without it]``."""
    answer: dict[str, JSON] = {"model": call.response_model or call.model}
    if call.error is not None:
        answer["error"] = call.error
    answer["finish_reason"] = call.finish_reason
    if call.tool_calls:
        answer["tool_calls"] = list(call.tool_calls)
    usage: dict[str, JSON] = {"prompt_tokens": call.prompt_tokens}
    usage["completion_tokens"] = call.completion_tokens
    if call.usage_details:
        usage.update(call.usage_details)
    answer["usage"] = usage
    if call.system_fingerprint:
        answer["system_fingerprint"] = call.system_fingerprint
    text = call.text or None
    found = [i for i, s in enumerate(steps) if isinstance(s, list) and s == ["assistant", text]]
    if text is not None and not found:  # not in the steps: carried here, once
        answer["content"] = call.text
    return [found[-1] if found else -1, answer]


def shown_json(data: JSON) -> str:
    """``data`` as one compact line of JSON with every string ``shown``: written once at C speed;
    walked string by string only when the text holds something ``visible`` changes."""
    text = _LINE.encode(data)
    changed = "\\u" in text or "\\b" in text or "\\f" in text or "\x7f" in text
    if not changed and (text.isascii() or _CHANGED.search(text) is None):
        return text
    return dumps(shown(data), separators=(",", ":"))


def shown(data: Any) -> JSON:
    """``data`` with every string, keys too, as a page may show it (``textcodec.visible``)."""
    if isinstance(data, str):
        return visible(data)
    if isinstance(data, dict):
        return {visible(str(k)): shown(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [shown(v) for v in data]
    return data
