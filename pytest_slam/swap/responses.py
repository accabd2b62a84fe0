"""Responses API <-> Chat Completions, for candidates that serve only ``/v1/chat/completions``.

A product calling ``client.responses.create(...)`` must be swapped like a chat call (every call
is accounted for), but llama.cpp, Ollama and older vLLM serve only Chat Completions. These pure
functions turn the Responses request into a chat body (``to_chat``), and the chat answer back into
what the SDK parses: a ``Response`` object (``to_response``) or its event stream (``ResponsesStream``).
Anything the translation cannot carry raises ``NotCarried``: the call fails with one line naming
the feature, and nothing is recorded as a made-up answer. ``serve`` is the proxy's side: one call
through the router's ``chat`` (so it is recorded, paired, scored and timed like a chat call).

What is carried (request -> chat body):

- ``input`` as a string, or a list of messages (``user``/``system``/``developer``/``assistant``,
  ``developer`` sent as ``system``; text and ``image_url`` image parts), ``function_call`` items
  (assistant ``tool_calls``) and ``function_call_output`` items (``tool`` messages);
- ``instructions`` (first ``system`` message), ``max_output_tokens`` (``max_tokens``),
  ``temperature``, ``top_p``, ``stream``, ``parallel_tool_calls``;
- ``text.format``: ``json_schema`` and ``json_object`` (``response_format``), ``text``;
- function ``tools``; ``tool_choice`` ``auto``/``none``/``required``/a named function.

Dropped, since they do not change the answer: ``store``, ``metadata``, ``user``,
``safety_identifier``, ``prompt_cache_*``, ``service_tier``, ``truncation``, ``stream_options``,
``include`` (except logprobs), ``max_tool_calls`` (it limits built-in tools, which are refused),
``text.verbosity``, ``reasoning`` (a chat candidate has no reasoning effort), ``reasoning`` input
items, ``background: false``.

Refused (``NotCarried``): built-in tools (web search, file search, computer use, code interpreter,
image generation, MCP, shell, apply-patch, custom and namespace tools, tool search) and their items in
``input``; ``previous_response_id``, ``conversation``, ``prompt`` and ``item_reference`` (server-side
state); ``background: true``; ``top_logprobs`` and ``include`` logprobs; ``input_file``, file-id
images and audio parts; ``tool_choice`` ``allowed_tools`` or a hosted tool; any parameter this
module does not know. Answer side: refusals are carried in a plain response, not in a stream.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON

# Request keys sent on (translated), and keys left out because they do not change the answer.
CARRIED = frozenset(
    {"model", "input", "instructions", "max_output_tokens", "temperature", "top_p", "stream", "text",
     "tools", "tool_choice", "parallel_tool_calls"}
)  # fmt: skip
DROPPED = frozenset(
    {"store", "metadata", "user", "safety_identifier", "prompt_cache_key", "prompt_cache_retention",
     "prompt_cache_options", "service_tier", "truncation", "stream_options", "include",
     "max_tool_calls", "reasoning", "background"}
)  # fmt: skip
_LOGPROBS = "message.output_text.logprobs"
_FINISH_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}


class NotCarried(ValueError, SlamError, kind="swap"):
    """A Responses feature that a Chat Completions candidate cannot serve; the call must fail."""

    status = 400

    def __init__(self, feature: str) -> None:
        self.feature = feature
        super().__init__(
            f"pytest-slam: the Responses API feature {feature} is not carried to a Chat Completions "
            "candidate; remove it from the request, or mark the model `responses = true` if it "
            "serves /v1/responses itself"
        )

    def error_body(self) -> bytes:
        """The OpenAI-shaped error the SDK raises as ``BadRequestError`` with this message."""
        error = {
            "message": str(self),
            "type": "invalid_request_error",
            "param": self.feature,
            "code": "not_carried",
        }
        return json.dumps({"error": error}).encode()


class _Call(Protocol):
    error: str | None


class ChatOutcome(Protocol):
    """What the router's ``chat`` returns (``chat.ChatResult``): only these fields are read."""

    @property
    def call(self) -> _Call: ...
    @property
    def completion(self) -> dict[str, JSON] | None: ...
    @property
    def status(self) -> int: ...
    @property
    def error_body(self) -> bytes | None: ...


Chat = Callable[[dict[str, JSON], Callable[[bytes], None] | None], ChatOutcome]


@dataclass
class Reply:
    """A reply the proxy sends whole (JSON), when the answer did not go out as a stream."""

    status: int
    payload: bytes


def serve(
    body: dict[str, JSON], chat: Chat, send: Callable[[bytes], None] | None = None
) -> Reply | None:
    """One Responses call through a Chat Completions route, for the proxy.

    ``chat(chat_body, relay)`` is the router's chat for the route (it records, pairs, scores and
    times the call like any other); ``send`` writes one SSE ``data:`` payload to a caller that asked
    to stream. Returns the Reply to send whole, or None when everything went out on ``send``.
    """
    try:
        chat_body = to_chat(body)
    except NotCarried as exc:
        return Reply(exc.status, exc.error_body())
    if send is None or not body.get("stream"):
        result = chat(chat_body, None)
        if result.call.error is not None or result.completion is None:
            return _error_reply(result)
        return Reply(200, json.dumps(to_response(result.completion, body)).encode())
    return _serve_stream(body, chat_body, chat, send)


def _serve_stream(
    body: dict[str, JSON], chat_body: dict[str, JSON], chat: Chat, send: Callable[[bytes], None]
) -> Reply | None:
    events = ResponsesStream(body)

    def relay(payload: bytes) -> None:
        for event in events.feed(json.loads(payload)):
            send(json.dumps(event).encode())

    result = chat(chat_body, relay)
    error = result.call.error
    if events.started:  # broke off mid-stream: the stream says why
        tail = events.fail(f"pytest-slam: {error}") if error else events.finish(result.completion)
    elif error is not None or result.completion is None:
        return _error_reply(result)
    else:  # answered without upstream chunks: a golden replay
        tail = events.replay(result.completion)
    for event in tail:
        send(json.dumps(event).encode())
    return None


def _error_reply(result: ChatOutcome) -> Reply:
    message = {"error": {"message": f"pytest-slam: {result.call.error}", "type": "pytest_slam"}}
    return Reply(result.status, result.error_body or json.dumps(message).encode())


# -- request ------------------------------------------------------------------------------------


def to_chat(body: dict[str, JSON]) -> dict[str, JSON]:
    """The Chat Completions body that asks the same question as a Responses ``create`` body."""
    _refuse_unknown(body)
    messages = (
        [{"role": "system", "content": body["instructions"]}] if body.get("instructions") else []
    )
    messages += _messages(body.get("input", ""))
    chat: dict[str, JSON] = {"model": body.get("model"), "messages": messages}
    for key in ("temperature", "top_p", "parallel_tool_calls"):
        if body.get(key) is not None:
            chat[key] = body[key]
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("tools"):
        chat["tools"] = [_tool(tool, i) for i, tool in enumerate(body["tools"])]
    if body.get("tool_choice") is not None:
        chat["tool_choice"] = _tool_choice(body["tool_choice"])
    fmt = _response_format((body.get("text") or {}).get("format"))
    if fmt is not None:
        chat["response_format"] = fmt
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def _refuse_unknown(body: dict[str, JSON]) -> None:
    for key, value in body.items():
        if key in CARRIED or value is None:
            continue
        if key not in DROPPED or (key == "background" and value):
            raise NotCarried(f"`{key}`")
    if _LOGPROBS in (body.get("include") or ()) or body.get("top_logprobs"):
        raise NotCarried("logprobs (`top_logprobs` / `include`)")


def _messages(value: str | list[dict[str, JSON]]) -> list[dict[str, JSON]]:
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    out: list[dict[str, JSON]] = []
    for i, item in enumerate(value):
        kind = item.get("type", "message")
        if kind == "message":
            out.append(_message(item, i))
        elif kind == "function_call":
            _add_tool_call(out, item)
        elif kind == "function_call_output":
            content = _text_only(item.get("output", ""), f"input[{i}].output")
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content})
        elif kind != "reasoning":  # a model's hidden reasoning: the candidate has its own
            raise NotCarried(f"input item type {kind!r} (input[{i}])")
    return out


def _message(item: dict[str, JSON], i: int) -> dict[str, JSON]:
    role = "system" if item["role"] == "developer" else item["role"]
    content = item.get("content", "")
    if not isinstance(content, str):
        parts = [_part(part, f"input[{i}].content[{j}]") for j, part in enumerate(content)]
        text_only = all(part["type"] == "text" for part in parts)
        content = parts[0]["text"] if text_only and len(parts) == 1 else parts
    return {"role": role, "content": content}


def _part(part: dict[str, JSON], where: str) -> dict[str, JSON]:
    kind = part.get("type")
    if kind in ("input_text", "output_text", "text"):
        return {"type": "text", "text": part.get("text", "")}
    if kind == "refusal":
        return {"type": "text", "text": part.get("refusal", "")}
    if kind == "input_image" and part.get("image_url"):
        image = {"url": part["image_url"], "detail": part.get("detail") or "auto"}
        return {"type": "image_url", "image_url": image}
    what = "input_image by file_id" if kind == "input_image" else repr(kind)
    raise NotCarried(f"content part {what} ({where})")


def _text_only(value: str | list[dict[str, JSON]], where: str) -> str:
    if isinstance(value, str):
        return value
    parts = [_part(part, f"{where}[{j}]") for j, part in enumerate(value)]
    if any(part["type"] != "text" for part in parts):
        raise NotCarried(f"a non-text function_call_output ({where})")
    return "".join(part["text"] for part in parts)


def _add_tool_call(out: list[dict[str, JSON]], item: dict[str, JSON]) -> None:
    """Consecutive function calls (and the text before them) are one assistant turn in chat."""
    call = {
        "id": item.get("call_id"),
        "type": "function",
        "function": {"name": item.get("name"), "arguments": item.get("arguments", "")},
    }
    if not out or out[-1]["role"] != "assistant":
        out.append({"role": "assistant", "content": None})
    out[-1].setdefault("tool_calls", []).append(call)


def _tool(tool: dict[str, JSON], i: int) -> dict[str, JSON]:
    if tool.get("type") != "function":
        raise NotCarried(f"built-in tool {tool.get('type')!r} (tools[{i}])")
    function = {"name": tool["name"], "parameters": tool.get("parameters") or {"type": "object"}}
    for key in ("description", "strict"):
        if tool.get(key) is not None:
            function[key] = tool[key]
    return {"type": "function", "function": function}


def _tool_choice(choice: str | dict[str, JSON]) -> str | dict[str, JSON]:
    if isinstance(choice, str):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice["name"]}}
    raise NotCarried(f"tool_choice type {choice.get('type')!r}")


def _response_format(fmt: dict[str, JSON] | None) -> dict[str, JSON] | None:
    if fmt is None or fmt.get("type") == "text":
        return None
    if fmt.get("type") == "json_object":
        return {"type": "json_object"}
    if fmt.get("type") == "json_schema":
        schema = {
            key: fmt[key] for key in ("name", "schema", "strict", "description") if key in fmt
        }
        return {"type": "json_schema", "json_schema": schema}
    raise NotCarried(f"text.format type {fmt.get('type')!r}")


# -- response -----------------------------------------------------------------------------------


def to_response(
    completion: dict[str, JSON], request: dict[str, JSON], response_id: str | None = None
) -> dict[str, JSON]:
    """The ``Response`` a Responses caller gets for a ChatCompletion (its first choice)."""
    rid = response_id or new_response_id()
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    status = _status(choice.get("finish_reason"))
    items: list[dict[str, JSON]] = []
    if message.get("content") or message.get("refusal") or not message.get("tool_calls"):
        items.append(
            _message_item(rid, 0, message.get("content") or "", status[0], message.get("refusal"))
        )
    for call in message.get("tool_calls") or ():
        fn = call.get("function") or {}
        items.append(
            _call_item(
                rid,
                len(items),
                call.get("id"),
                fn.get("name", ""),
                fn.get("arguments") or "",
                "completed",
            )
        )
    return envelope(request, rid, completion, items, status)


def new_response_id() -> str:
    return f"resp_{uuid.uuid4().hex}"


def _status(finish_reason: str | None) -> tuple[str, dict[str, str] | None]:
    reason = _FINISH_INCOMPLETE.get(finish_reason or "")
    return ("incomplete", {"reason": reason}) if reason else ("completed", None)


def _message_item(
    rid: str, index: int, text: str, status: str, refusal: str | None = None
) -> dict[str, JSON]:
    content: list[dict[str, JSON]] = []
    if text or not refusal:
        content.append({"type": "output_text", "text": text, "annotations": [], "logprobs": []})
    if refusal:
        content.append({"type": "refusal", "refusal": refusal})
    return {
        "id": f"msg_{rid[5:]}_{index}",
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _call_item(
    rid: str, index: int, call_id: str | None, name: str, arguments: str, status: str
) -> dict[str, JSON]:
    return {
        "id": f"fc_{rid[5:]}_{index}",
        "type": "function_call",
        "status": status,
        "call_id": call_id or f"call_{rid[5:]}_{index}",
        "name": name,
        "arguments": arguments,
    }


def envelope(
    request: dict[str, JSON],
    rid: str,
    completion: dict[str, JSON],
    items: list[dict[str, JSON]],
    status: tuple[str, dict[str, str] | None],
) -> dict[str, JSON]:
    """The ``Response`` object around ``items``, echoing the request's settings as OpenAI does."""
    created = completion.get("created") or int(time.time())
    return {
        "id": rid,
        "object": "response",
        "created_at": created,
        "status": status[0],
        "completed_at": created if status[0] == "completed" else None,
        "incomplete_details": status[1],
        "error": None,
        "model": completion.get("model") or request.get("model") or "",
        "instructions": request.get("instructions"),
        "output": items,
        "max_output_tokens": request.get("max_output_tokens"),
        "temperature": request.get("temperature"),
        "top_p": request.get("top_p"),
        "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "text": request.get("text") or {"format": {"type": "text"}},
        "metadata": request.get("metadata") or {},
        "store": request.get("store", True),
        "background": False,
        "previous_response_id": None,
        "truncation": "disabled",
        "usage": usage(completion.get("usage")),
    }


def usage(chat_usage: dict[str, JSON] | None) -> dict[str, JSON] | None:
    """Chat ``usage`` as Responses ``usage``: prompt -> input tokens, completion -> output tokens."""
    if not chat_usage:
        return None
    cached = (chat_usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    reasoning = (chat_usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    inp, out = chat_usage.get("prompt_tokens") or 0, chat_usage.get("completion_tokens") or 0
    return {
        "input_tokens": inp,
        "output_tokens": out,
        "total_tokens": chat_usage.get("total_tokens") or inp + out,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
        "output_tokens_details": {"reasoning_tokens": reasoning},
    }


# -- stream -------------------------------------------------------------------------------------


@dataclass
class _Item:
    index: int
    kind: str  # "message" or "function_call"
    text: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str = ""


class ResponsesStream:
    """Turns chat completion chunks into the Responses event stream the SDK accumulates.

    ``feed`` each chunk (a parsed ``chat.completion.chunk``) as it arrives, then ``finish`` once;
    each returns the events to send, in order, as dicts (``sse`` frames them). ``replay`` does it
    all for a finished ChatCompletion (a golden answer, or a candidate that did not stream).
    """

    def __init__(self, request: dict[str, JSON], response_id: str | None = None) -> None:
        self.request = request
        self.rid = response_id or new_response_id()
        self.seq = 0
        self.items: list[_Item] = []
        self.message: _Item | None = None
        self.calls: dict[int, _Item] = {}
        self.meta: dict[str, JSON] = {"created": int(time.time())}
        self.finish_reason: str | None = None
        self.started = False

    def start(self) -> list[dict[str, JSON]]:
        """``response.created`` and ``response.in_progress`` (sent before the first chunk)."""
        if self.started:
            return []
        self.started = True
        shell = envelope(self.request, self.rid, self.meta, [], ("in_progress", None))
        shell["completed_at"] = None
        return [
            self._event("response.created", response=shell),
            self._event("response.in_progress", response=shell),
        ]

    def feed(self, chunk: dict[str, JSON]) -> list[dict[str, JSON]]:
        events = self.start()
        for key in ("model", "created"):
            if chunk.get(key):
                self.meta[key] = chunk[key]
        if chunk.get("usage"):
            self.meta["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) != 0:
                continue  # the Responses API has one answer per request
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or ():
                events += self._call(call)
            self.finish_reason = choice.get("finish_reason") or self.finish_reason
        return events

    def finish(self, completion: dict[str, JSON] | None = None) -> list[dict[str, JSON]]:
        """Close every item and end with ``response.completed`` (or ``response.incomplete``)."""
        events = self.start()
        if completion:
            self.meta["usage"] = completion.get("usage") or self.meta.get("usage")
            self.finish_reason = self.finish_reason or _first_finish(completion)
        if not self.items:
            events += self._text("")
        status = _status(self.finish_reason)
        done = [self._done_item(item, status[0]) for item in self.items]
        events += [event for pair in done for event in pair[1]]
        final = envelope(self.request, self.rid, self.meta, [pair[0] for pair in done], status)
        kind = "response.completed" if status[0] == "completed" else "response.incomplete"
        return [*events, self._event(kind, response=final)]

    def fail(self, message: str) -> list[dict[str, JSON]]:
        """End a stream whose upstream broke: ``response.failed`` with the reason."""
        events = self.start()
        final = envelope(self.request, self.rid, self.meta, [], ("failed", None))
        final["error"] = {"code": "server_error", "message": message}
        return [*events, self._event("response.failed", response=final)]

    def replay(self, completion: dict[str, JSON]) -> list[dict[str, JSON]]:
        """The whole event stream for a finished ChatCompletion: one text delta per item."""
        self.meta["created"] = completion.get("created") or self.meta["created"]
        message = ((completion.get("choices") or [{}])[0]).get("message") or {}
        calls = [{"index": i, **call} for i, call in enumerate(message.get("tool_calls") or ())]
        delta = {"content": message.get("content"), "tool_calls": calls}
        chunk = {"model": completion.get("model"), "choices": [{"index": 0, "delta": delta}]}
        return self.feed(chunk) + self.finish(completion)

    def _event(self, kind: str, **fields: JSON) -> dict[str, JSON]:
        event = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return event

    def _text(self, delta: str) -> list[dict[str, JSON]]:
        events = []
        if self.message is None:
            self.message = item = _Item(len(self.items), "message")
            self.items.append(item)
            added = _message_item(self.rid, item.index, "", "in_progress")
            added["content"] = []
            events.append(
                self._event("response.output_item.added", output_index=item.index, item=added)
            )
            events.append(
                self._event("response.content_part.added", **self._where(item), part=_text_part(""))
            )
        self.message.text.append(delta)
        if delta:
            events.append(
                self._event(
                    "response.output_text.delta",
                    **self._where(self.message),
                    delta=delta,
                    logprobs=[],
                )
            )
        return events

    def _call(self, call: dict[str, JSON]) -> list[dict[str, JSON]]:
        fn = call.get("function") or {}
        item = self.calls.get(call.get("index", 0))
        events = []
        if item is None:
            item = _Item(len(self.items), "function_call", name=fn.get("name") or "")
            item.call_id = call.get("id") or f"call_{self.rid[5:]}_{item.index}"
            self.calls[call.get("index", 0)] = item
            self.items.append(item)
            added = _call_item(self.rid, item.index, item.call_id, item.name, "", "in_progress")
            events.append(
                self._event("response.output_item.added", output_index=item.index, item=added)
            )
        if fn.get("arguments"):
            item.text.append(fn["arguments"])
            events.append(
                self._event(
                    "response.function_call_arguments.delta",
                    item_id=_item_id(self.rid, item),
                    output_index=item.index,
                    delta=fn["arguments"],
                )
            )
        return events

    def _done_item(self, item: _Item, status: str) -> tuple[dict[str, JSON], list[dict[str, JSON]]]:
        text = "".join(item.text)
        if item.kind == "function_call":
            final = _call_item(self.rid, item.index, item.call_id, item.name, text, "completed")
            args = self._event(
                "response.function_call_arguments.done",
                item_id=final["id"],
                output_index=item.index,
                arguments=text,
            )
            return final, [
                args,
                self._event("response.output_item.done", output_index=item.index, item=final),
            ]
        final = _message_item(self.rid, item.index, text, status)
        where = self._where(item)
        return final, [
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=_text_part(text)),
            self._event("response.output_item.done", output_index=item.index, item=final),
        ]

    def _where(self, item: _Item) -> dict[str, JSON]:
        return {"item_id": _item_id(self.rid, item), "output_index": item.index, "content_index": 0}


def _item_id(rid: str, item: _Item) -> str:
    return f"{'msg' if item.kind == 'message' else 'fc'}_{rid[5:]}_{item.index}"


def _text_part(text: str) -> dict[str, JSON]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _first_finish(completion: dict[str, JSON]) -> str | None:
    reason = ((completion.get("choices") or [{}])[0]).get("finish_reason")
    return reason if isinstance(reason, str) else None


def sse(events: list[dict[str, JSON]]) -> bytes:
    """Server-sent event frames as OpenAI sends them (``event:`` line, then ``data:``)."""
    return b"".join(
        b"event: %s\ndata: %s\n\n" % (event["type"].encode(), json.dumps(event).encode())
        for event in events
    )
