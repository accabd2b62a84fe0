"""Canonical requests and their keys: one golden entry per request that may get its own answer.

A key must change whenever the reference could answer differently and must not change for transport
details, or an answer recorded by a non-streaming call would miss for the same call made streaming.

Kept: every field that is not a known transport field. Unknown fields (vendor extensions such as
``top_k``) are kept on purpose: a spurious miss asks for a re-record, a spurious hit serves a wrong
answer. Dropped (``TRANSPORT_FIELDS``): streaming, timeouts, headers, end-user ids, metadata,
storage, ``service_tier`` (changes priority and price, not the model), prompt-cache hints and
``api_key`` (a credential smuggled into the body).
``extra_body`` is merged into the body, as the OpenAI SDK sends it.

Normalised, representation only (each one sends the same thing to the model):
- ``null`` is the same as omitted, at the top level and in a message;
- a value equal to the API's documented default is omitted (``DEFAULTS``; ``tool_choice`` is
  ``"auto"`` with tools and ``"none"`` without, likewise ``function_call`` with ``functions``);
- sampling parameters are floats, so ``temperature=0`` and ``0.0`` agree;
- ``stop="x"`` is ``["x"]``;
- message content made of one text part is that text as a string.
- tool-call ids (``tool_calls[].id`` in assistant messages, ``tool_call_id`` in tool messages) are
  replaced by their order of first appearance (``call_0``, ``call_1``...): the API makes up a new
  random id for every answer, so without this a tool loop's second request would never replay.
  Requests without them keep the bytes they always had.
Never normalised: the text itself (whitespace and Unicode form change the tokens), message and
tool order, ``max_tokens`` versus ``max_completion_tokens`` (not equivalent for reasoning models),
``system`` versus ``developer`` roles.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from pytest_slam.records import JSON
from pytest_slam.util import textcodec

TRANSPORT_FIELDS = frozenset(
    {
        "stream",
        "stream_options",
        "timeout",
        "user",
        "metadata",
        "store",
        "service_tier",
        "extra_headers",
        "extra_query",
        "headers",
        "safety_identifier",
        "prompt_cache_key",
        "prompt_cache_retention",
        "api_key",
    }
)
DEFAULTS: dict[str, JSON] = {
    "temperature": 1.0,
    "top_p": 1.0,
    "n": 1,
    "presence_penalty": 0.0,
    "frequency_penalty": 0.0,
    "logit_bias": {},
    "logprobs": False,
    "parallel_tool_calls": True,
    "response_format": {"type": "text"},
    "stop": [],
    "tools": [],
    "functions": [],
}
FLOAT_FIELDS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
KEY_LENGTH = 16


_LEAVES = frozenset({str, int, float, bool, type(None)})  # copied as they are


def _plain(obj: object) -> JSON:
    """JSON-shaped copy: SDK pydantic objects dumped, tuples as lists, mappings as dicts."""
    kind = type(obj)
    if kind in _LEAVES:
        return obj  # the common leaves first: no attribute probe per string
    if type(obj) is dict:  # narrows, unlike ``kind is dict``
        # a leaf value taken in the same pass: one call per container, not one per string
        return {str(k): v if type(v) in _LEAVES else _plain(v) for k, v in obj.items()}
    if hasattr(obj, "model_dump"):
        obj = obj.model_dump(mode="json", exclude_unset=True)
    if isinstance(obj, Mapping):
        return {str(k): _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [v if type(v) in _LEAVES else _plain(v) for v in obj]
    return obj


def _message(msg: JSON) -> JSON:
    """One message without nulls; a single text part becomes a plain string."""
    if not isinstance(msg, dict):
        return msg
    out = {k: v for k, v in msg.items() if v is not None}
    if out.get("annotations") == []:
        del out["annotations"]  # response-only field, echoed when a reply is sent back
    content = out.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        part = {k: v for k, v in content[0].items() if v is not None}
        if part.get("type") == "text" and set(part) == {"type", "text"}:
            out["content"] = part["text"]
    return out


def _tool_call_ids(messages: list[JSON]) -> list[JSON]:
    """Tool-call ids replaced by ``call_N``, N their order of first appearance in the request."""
    ids: dict[str, str] = {}

    def renamed(value: JSON) -> JSON:
        return ids.setdefault(value, f"call_{len(ids)}") if isinstance(value, str) else value

    out = []
    for msg in messages:
        if isinstance(msg, dict) and isinstance(msg.get("tool_calls"), list):
            calls = [
                dict(tc, id=renamed(tc["id"])) if isinstance(tc, dict) and "id" in tc else tc
                for tc in msg["tool_calls"]
            ]
            msg = {**msg, "tool_calls": calls}
        if isinstance(msg, dict) and "tool_call_id" in msg:
            msg = {**msg, "tool_call_id": renamed(msg["tool_call_id"])}
        out.append(msg)
    return out


def _is_default(name: str, value: JSON, body: dict[str, JSON]) -> bool:
    if name == "tool_choice":
        return bool(value == ("auto" if body.get("tools") else "none"))
    if name == "function_call":
        return bool(value == ("auto" if body.get("functions") else "none"))
    if name not in DEFAULTS:
        return False
    default = DEFAULTS[name]
    return type(value) is type(default) and value == default  # True is not 1


def canonical_request(body: dict[str, JSON]) -> dict[str, JSON]:
    """The parts of a chat request that can change the answer, in one representation."""
    if not isinstance(body, Mapping):
        raise TypeError(f"canonical_request expects a chat request body (dict), got {type(body)}")
    raw = _plain(body)
    raw.update(raw.pop("extra_body", None) or {})
    out = {k: v for k, v in raw.items() if k not in TRANSPORT_FIELDS and v is not None}
    for name in FLOAT_FIELDS:
        if isinstance(out.get(name), int) and not isinstance(out[name], bool):
            out[name] = float(out[name])
    if isinstance(out.get("stop"), str):
        out["stop"] = [out["stop"]]
    if isinstance(out.get("messages"), list):
        out["messages"] = _tool_call_ids([_message(m) for m in out["messages"]])
    return {k: v for k, v in out.items() if not _is_default(k, v, out)}


def canonical_json(request: dict[str, JSON]) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTF-8 as is (a lone surrogate, which
    UTF-8 cannot encode, as its JSON escape ``\\ud800``: every other key is what it always was)."""
    return textcodec.dumps(request, hidden=False, sort_keys=True, separators=(",", ":"))


def request_key(body: dict[str, JSON]) -> str:
    """sha256 of the canonical request, first 16 hex digits (64 bits: no collisions in practice)."""
    text = canonical_json(canonical_request(body))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:KEY_LENGTH]
