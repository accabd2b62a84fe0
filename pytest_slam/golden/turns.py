"""The reference's turn at the same place: how a conversation turn with no exact golden is matched.

A follow-up turn carries the candidate's own earlier answers (and the tool results and validation
errors that followed from them), so its exact request changes whenever the candidate answers
differently, and its golden key (``golden.keys``) has no entry. Such a turn is matched by its place
instead: the same test, the same call position in it (``GoldenRecord.turns``), and the same shape,
which is the request with everything the candidate caused set aside:

- every field but ``messages`` and ``seed`` (model, tools, response format, sampling, limits: what
  the product wrote);
- each message's role, in order; an assistant message keeps the names of the tools it called, in
  order (the tool sequence), never its text nor the call arguments; a tool message keeps only its
  role (its result follows from the arguments);
- the texts of the system, developer and user messages. Those after the first assistant message
  are kept by the strict shape and set aside by the lenient one, because a product often writes the
  candidate's answer into them: instructor's and pydantic-ai's retries resend the conversation with
  a validation error that quotes it.

Replay tries the strict shape, then the lenient one. Recording (``--slm-record=new``) takes a place
as matched only by the strict shape, so a product that changed a follow-up prompt gets it recorded,
and a retry whose error text changed is recorded too (replay then finds it by the lenient shape).
When several records sit at one place (two candidates recorded the turn, or a re-record), the one
recorded last wins, then the lowest key: the same golden files always give the same match.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from pytest_slam.golden.keys import KEY_LENGTH, canonical_json, canonical_request
from pytest_slam.records import JSON, GoldenRecord

SET_ASIDE = frozenset({"messages", "seed"})
PROMPT_ROLES = frozenset({"system", "developer", "user"})


def _tool_names(message: dict[str, JSON]) -> list[JSON]:
    calls = message.get("tool_calls")
    if not isinstance(calls, list):
        calls = [message["function_call"]] if isinstance(message.get("function_call"), dict) else []
    names = []
    for call in calls:
        fn = call.get("function", call) if isinstance(call, dict) else None
        names.append(fn.get("name") if isinstance(fn, dict) else None)
    return names


def _shape_messages(messages: list[JSON], strict: bool) -> list[JSON]:
    out: list[JSON] = []
    answered = False
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        role = message.get("role")
        item: dict[str, JSON] = {"role": role}
        if role == "assistant":
            answered = True
            names = _tool_names(message)
            if names:
                item["tools"] = names
        elif role in PROMPT_ROLES and (strict or not answered):
            item["content"] = message.get("content")
        out.append(item)
    return out


def request_shape(body: dict[str, JSON], strict: bool = False) -> dict[str, JSON]:
    """The request as the product wrote it, without what the candidate's earlier answers caused
    (``strict``: with every system/developer/user text)."""
    request = canonical_request(body)
    shape = {k: v for k, v in request.items() if k not in SET_ASIDE}
    messages = request.get("messages")
    if isinstance(messages, list):
        shape["messages"] = _shape_messages(messages, strict)
    return shape


def shape_key(body: dict[str, JSON], strict: bool = False) -> str:
    """sha256 of the request's shape, 16 hex digits, as ``request_key`` is of the request."""
    text = canonical_json(request_shape(body, strict))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]


def at_place(records: Iterable[GoldenRecord], test: str, turn: int) -> list[GoldenRecord]:
    """The records asked at call ``turn`` (1-based) of ``test``."""
    return [rec for rec in records if turn in rec.turns.get(test, ())]


def reference_turn(
    records: Iterable[GoldenRecord],
    test: str,
    turn: int,
    body: dict[str, JSON],
    lenient: bool = True,
) -> GoldenRecord | None:
    """The reference's turn at the place of ``body`` (call ``turn`` of ``test``, same shape:
    strict first, then lenient unless told not to)."""
    placed = [r for r in at_place(records, test, turn) if r.answers]
    for strict in (True, False) if lenient else (True,):
        shape = shape_key(body, strict)
        found = [r for r in placed if shape_key(r.request, strict) == shape]
        if found:
            return max(found, key=lambda r: (r.answers[0].recorded_at or "", _reversed(r.key)))
    return None


def _reversed(key: str) -> tuple[int, ...]:
    """Orders keys so that ``max`` picks the lowest one."""
    return tuple(-ord(c) for c in key)


def with_turn(turns: dict[str, list[int]], test: str, turn: int | None) -> dict[str, list[int]]:
    """``turns`` with call ``turn`` of ``test`` added (sorted, once); unchanged without a place."""
    if not test or turn is None or turn in turns.get(test, ()):
        return turns
    return {**turns, test: sorted({*turns.get(test, ()), turn})}


def merged_turns(*many: dict[str, list[int]]) -> dict[str, list[int]]:
    """The places of several copies of one record, each test's positions sorted once."""
    out: dict[str, set[int]] = {}
    for turns in many:
        for test, positions in turns.items():
            out.setdefault(test, set()).update(positions)
    return {test: sorted(positions) for test, positions in sorted(out.items())}
