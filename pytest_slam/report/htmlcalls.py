"""One call as the HTML report's line carries it: its request and answer as recorded, and a few
numbers; the page's script (``templates/calls.js``) derives from them what the call's view shows
(its transcript step, its tokens and time, its raw request and answer).

At 10,000 tests the build's cost was these views, built in Python for every call (about 65 us of
a row's 90: issue 53). The line now carries each text once: the request (keeping only the
messages its previous call of the same role had not sent, naming the pair whose request holds
the rest), the answer's fields, and its text as the number 1 when it is the pair's candidate text
already on the line. Where the script's derivation could differ from Python's (a non-string role,
content part, id or tool-call argument, which Python would write as its ``str``; an id ending in
a space ``rstrip`` strips; a number JavaScript cannot format as Python does), the line carries
Python's own transcript step or facts text instead, so the page shows what Python would, always.
Every string is shown as ``textcodec.visible`` writes it (a bidi override is a marker, never
applied), keys included: once, over a row's whole line as it is written (``shown_json``).
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

# the facts' flags (``call_line``): estimated tokens, a replayed answer, a cached one
ESTIMATED, REPLAYED, CACHED = 1, 2, 4
_SAFE = 2**53  # an int JavaScript holds exactly


def call_line(
    calls: list[Call], index: int, previous: int, earlier: int, shipped: str
) -> tuple[list[JSON], bool]:
    """``[earlier pair, messages kept from its request, where the step's messages start, whether
    a call of the same role came before (0 or 1), the request with the other messages, model,
    text (1: ``shipped``, the pair's candidate text), finish reason, tool calls, prompt tokens,
    completion tokens, usage details, system fingerprint, TTFT, E2E, flags]`` of
    ``calls[index]`` (``[]``: no such call), and whether the script derives its transcript step
    as ``htmldata.transcript_step`` does (``step_derivable``). ``previous``: the index of the
    same role's call before it (-1: none); ``earlier``: the position, among its row's pairs, of
    that call's pair (-1: none). A time is ``fmt.ms``'s figure (``_ms``). Flags: ``ESTIMATED |
    REPLAYED | CACHED``, or Python's own facts text (``measured``) when a token count is not
    one JavaScript holds exactly."""
    if not 0 <= index < len(calls):
        return [], True
    call = calls[index]
    request = call.request
    messages = request.get("messages")
    kept = start = 0
    if previous >= 0 and isinstance(messages, list):
        before = calls[previous].request.get("messages")
        if isinstance(before, list) and len(before) <= len(messages):
            start = len(before)
            if earlier >= 0 and before and messages[:start] == before:
                kept = start
                request = {**request, "messages": messages[kept:]}
    text: JSON = 1 if call.text == shipped and call.text else call.text
    pt, ct = call.prompt_tokens, call.completion_tokens
    ttft, e2e = _ms(call.ttft_ms), _ms(call.e2e_ms)
    flags: JSON = (
        (ESTIMATED if call.tokens_estimated else 0)
        | (REPLAYED if call.replayed else 0)
        | (CACHED if call.cached else 0)
    )
    if not (_plain_count(pt) and _plain_count(ct)):
        flags = measured(call)
    line: list[JSON] = [
        earlier if kept else -1,
        kept,
        start,
        1 if previous >= 0 else 0,
        request,
        call.response_model or call.model,
        text,
        call.finish_reason,
        call.tool_calls or None,
        pt,
        ct,
        call.usage_details or None,
        call.system_fingerprint or None,
        ttft,
        e2e,
        flags,
    ]
    sent = messages[start:] if isinstance(messages, list) else []
    return line, step_derivable(sent, previous >= 0, call)


def _plain_count(value: object) -> bool:
    """A token count the script writes as ``f"{value:,}"`` does."""
    return value is None or (type(value) is int and -_SAFE < value < _SAFE)


def _ms(value: float | None) -> JSON:
    """``fmt.ms``'s figure as the page writes it: under 10 s the whole milliseconds (``round``
    rounds the double half to even, as ``f"{value:.0f}"`` does; a small int, not the float's 17
    digits that gzip cannot shorten), the script adding " ms"; else (10 s and more, a negative
    zero, a value that is not a time) Python's own text."""
    if value is None:
        return None
    if type(value) is float and 0 < value < 10_000:
        return round(value)
    if type(value) is int and 0 <= value < 10_000:
        return value
    return fmt.ms(value)


def step_derivable(sent: list[JSON], prior: bool, call: Call) -> bool:
    """The script's transcript step (``calls.js`` ``stepOf``) is ``transcript_step``'s: every
    role, id, name, argument and text part it reads is a string or absent (Python would show
    another value as its ``str``), and no id ends in a space (``rstrip`` would strip it)."""
    if type(call.text) is not str:
        return False
    for message in sent:
        if not isinstance(message, dict):
            continue
        role = message.get("role", "")
        if type(role) is not str:
            return False
        if role == "assistant" and prior:
            continue
        if role == "tool" and not _plain_id(message.get("tool_call_id")):
            return False
        content = message.get("content")
        if content is None or type(content) is str:
            continue
        if type(content) is not list:
            return False
        for part in content:
            if isinstance(part, dict) and not _plain_text(part.get("text")):
                return False
    for tc in call.tool_calls or ():
        fn = tc.get("function")
        found = fn if isinstance(fn, dict) else tc
        if type(found.get("name")) is not str or type(found.get("arguments")) is not str:
            return False
        if not _plain_id(tc.get("id")):
            return False
    return True


def _plain_text(value: JSON) -> bool:
    return value is None or type(value) is str


def _plain_id(value: JSON) -> bool:
    return value is None or (type(value) is str and not value[-1:].isspace())


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
