"""Which recorded requests of a test depend on an earlier answer, and a later turn foreseen with the
answer a model gives now: what run/test/fetching.py plans to fetch ahead.

Dependence is read from the request's structure, never from a substring of its text. A later call
depends on an earlier answer when it carries an assistant or tool message (a conversation or a
tool loop), or an earlier answer as a whole message or a whole field: a message's text, a text
part, or a value in a message written as JSON (``{"previous": "positive"}``). Instructions that
merely mention a word an answer also is ("positive, negative, or neutral") are no dependence: a
label classifier's calls are all known before its first answer.

A dependent turn is foreseen from its golden request when the earlier answer arrives. A
conversation's turn ``k+1`` is recorded as turn ``k``'s messages, the answer given then (an
assistant message) and what followed; the request foreseen is the one sent for turn ``k`` now,
the assistant message with the answer given now (its tool calls' ids and arguments as they came
now, when they call the same tools with the same arguments as recorded: a tool loop whose tools
then answer as recorded), and what followed, every tool result's call id and every whole field
that was the earlier answer carried over. A foreseen request is a bet: it is used only when it is
the very request the product sends (the claim matches the upstream body), else it is unused.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from pytest_slam.records import JSON

# An answer as the product reads it: its text and its tool calls (OpenAI's form, ids included).
Answer = tuple[str, list[dict[str, JSON]] | None]
PROMPT_ROLES = ("system", "developer", "user")
# the ways a product writes a JSON message: json.dumps's default, compact, and with non-ASCII kept
_DUMPS: tuple[dict[str, Any], ...] = (
    {},
    {"separators": (",", ":")},
    {"ensure_ascii": False},
    {"separators": (",", ":"), "ensure_ascii": False},
)


def depends(request: dict[str, JSON], earlier: Iterable[str]) -> bool:
    """Whether ``request`` carries an earlier answer (texts of ``earlier``): an assistant or tool
    message, or one of them as a whole message or field. A request without a message list is
    taken as dependent (nothing to read it by)."""
    messages = request.get("messages")
    if not isinstance(messages, list):
        return True
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in PROMPT_ROLES:
            return True
    forms = {form for answer in earlier for form in _forms(answer)}
    return bool(forms) and any(value in forms for value in fields(messages))


def fields(messages: list[JSON]) -> Iterator[str]:
    """Every whole field of the prompt messages: each text (stripped), and in a text written as
    JSON each value (a string stripped, an object or array as canonical JSON)."""
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in PROMPT_ROLES:
            continue
        for text in _texts(message.get("content")):
            yield text.strip()
            parsed = _json(text)
            if parsed is not None:
                yield from _values(parsed)


def _forms(answer: str) -> set[str]:
    """How an answer shows as a whole field: its text stripped, and canonical JSON if it is JSON."""
    text = answer.strip()
    if not text:
        return set()
    parsed = _json(text)
    return {text} if parsed is None else {text, _canonical(parsed)}


def _texts(content: JSON) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [
            p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)
        ]
    return []


def _json(text: str) -> JSON | None:
    """A text written as a JSON object or array, parsed; else None."""
    if not text.lstrip().startswith(("{", "[")):
        return None
    try:
        parsed: JSON = json.loads(text)
    except ValueError:
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def _values(value: JSON) -> Iterator[str]:
    if isinstance(value, str):
        yield value.strip()
    elif isinstance(value, (dict, list)):
        yield _canonical(value)
        for inner in value.values() if isinstance(value, dict) else value:
            yield from _values(inner)


def _canonical(value: JSON) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# -- a later turn foreseen ---------------------------------------------------------------------


def foreseen(
    before: dict[str, JSON],
    after: dict[str, JSON],
    sent: dict[str, JSON],
    given: Answer,
    swaps: dict[str, str],
    owns: Callable[[Answer], bool] = lambda recorded: True,
) -> dict[str, JSON] | None:
    """The request of the golden turn ``after`` as it is sent now: ``before`` is the golden request
    of the turn before, ``sent`` the request foreseen (or recorded) for it now, ``given`` the
    answer it got now. ``swaps`` maps each earlier answer as recorded to the one given now (whole
    fields holding it carry the new one; it gets the recorded answer found here). ``owns`` says
    whether the answer recorded at this place is the answering model's own (else it stays, as
    whoever gave it would give it again). None: it cannot be foreseen."""
    old, new, now = before.get("messages"), after.get("messages"), sent.get("messages")
    if not (isinstance(old, list) and isinstance(new, list) and isinstance(now, list)):
        return None
    ids: dict[str, str] = {}
    at = len(old)
    if len(new) > at and new[:at] == old and _is_assistant(new[at]):
        recorded = _answer_of(new[at])
        message: JSON = new[at]
        if owns(recorded):
            message = _answered(new[at], recorded, given, ids)
            if message is None:
                return None
            if recorded[0].strip() and recorded[0] != given[0]:
                swaps[recorded[0].strip()] = given[0].strip()
        messages = [*now, message, *new[at + 1 :]]
        start = len(now) + 1
    else:
        messages, start = list(new), 0
    tail = [_carried(m, swaps, ids) for m in messages[start:]]
    if any(m is None for m in tail):
        return None
    return {**after, "messages": [*messages[:start], *tail]}


def _is_assistant(message: JSON) -> bool:
    return isinstance(message, dict) and message.get("role") == "assistant"


def _answer_of(message: JSON) -> Answer:
    assert isinstance(message, dict)
    content, calls = message.get("content"), message.get("tool_calls")
    text = content if isinstance(content, str) else ""
    return text, [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else None


def _called(calls: list[dict[str, JSON]] | None) -> list[tuple[JSON, JSON]]:
    """Each tool call's name and parsed arguments: what decides what the tool answers."""
    out = []
    for call in calls or ():
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        args = fn.get("arguments")
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = args
        out.append((fn.get("name"), parsed))
    return out


def _answered(
    message: JSON, recorded: Answer, given: Answer, ids: dict[str, str]
) -> dict[str, JSON] | None:
    """The assistant message as the product writes it for ``given``: the recorded one with the
    new text, and the new calls' ids and arguments; None when it calls other tools or arguments."""
    assert isinstance(message, dict)
    out = dict(message)
    if recorded[1] or given[1]:
        if _called(recorded[1]) != _called(given[1]):
            return None
        calls: list[JSON] = []
        for was, now in zip(recorded[1] or [], given[1] or [], strict=True):
            fn, new_fn = was.get("function"), now.get("function")
            if isinstance(was.get("id"), str) and isinstance(now.get("id"), str):
                ids[str(was["id"])] = str(now["id"])
            merged = dict(was)
            merged["id"] = now.get("id", was.get("id"))
            if isinstance(fn, dict) and isinstance(new_fn, dict):
                merged["function"] = {**fn, "arguments": new_fn.get("arguments")}
            calls.append(merged)
        out["tool_calls"] = calls
    if isinstance(message.get("content"), str) or given[0]:  # else left as written (None, absent)
        out["content"] = given[0]
    return out


def _carried(message: JSON, swaps: dict[str, str], ids: dict[str, str]) -> JSON | None:
    """A message after the answer, as it is written now: a tool result's call id carried over, a
    prompt's whole fields that held an earlier answer holding the new one; None when an earlier
    answer sits in it where it cannot be carried (an assistant message of its own, a JSON text
    written in no form it is known by)."""
    if not isinstance(message, dict):
        return message
    role = message.get("role")
    if role == "tool":
        call_id = message.get("tool_call_id")
        return (
            {**message, "tool_call_id": ids.get(call_id, call_id)}
            if isinstance(call_id, str)
            else message
        )
    if role not in PROMPT_ROLES:
        return None
    content = message.get("content")
    if isinstance(content, str):
        text = _swapped_text(content, swaps)
        return None if text is None else {**message, "content": text}
    if isinstance(content, list):
        parts: list[JSON] = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                text = _swapped_text(str(part["text"]), swaps)
                if text is None:
                    return None
                part = {**part, "text": text}
            parts.append(part)
        return {**message, "content": parts}
    return message


def _swapped_text(text: str, swaps: dict[str, str]) -> str | None:
    if not swaps:
        return text
    if text.strip() in swaps:
        return swaps[text.strip()]
    parsed = _json(text)
    if parsed is None:
        return text
    changed = _swapped_value(parsed, swaps)
    if changed == parsed:
        return text
    for options in _DUMPS:
        if json.dumps(parsed, **options) == text:
            return json.dumps(changed, **options)
    return None  # an earlier answer is in it, written in a form not known here


def _swapped_value(value: JSON, swaps: dict[str, str]) -> JSON:
    if isinstance(value, str):
        return swaps.get(value.strip(), value)
    if isinstance(value, dict):
        return {k: _swapped_value(v, swaps) for k, v in value.items()}
    if isinstance(value, list):
        return [_swapped_value(v, swaps) for v in value]
    return value
