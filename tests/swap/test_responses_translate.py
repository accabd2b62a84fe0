"""Responses API translation, checked by the real openai SDK's typed parsing.

A small loopback server in this file does what the swap proxy will do for a Chat-Completions-only
candidate: it takes ``POST /v1/responses``, translates the body with ``to_chat``, asks the loopback
fake of the hosted API (real Chat Completions chunks over HTTP), and sends back the translated
``Response`` or event stream. The product side is the real ``OpenAI``/``AsyncOpenAI`` client.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from openai.types.responses import Response, ResponseFunctionToolCall, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

from pytest_slam.records import ModelSpec
from pytest_slam.swap.chat import Target, forward_chat
from pytest_slam.swap.responses import NotCarried, ResponsesStream, serve, sse, to_chat, to_response
from pytest_slam.testing import FakeOpenAI, count_tokens

ANSWER = "Paris is the capital of France."
Chunks = Callable[[dict[str, Any]], list[dict[str, Any]] | None]


def _chat_chunks(base_url: str, chat: dict[str, Any]) -> list[dict[str, Any]]:
    """Ask the fake for a streamed chat completion, as the proxy asks a candidate."""
    host, port = base_url.split("//")[1].split("/")[0].split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.request(
        "POST",
        "/v1/chat/completions",
        json.dumps({**chat, "stream": True, "stream_options": {"include_usage": True}}),
        {"Content-Type": "application/json"},
    )
    lines = conn.getresponse().read().decode().splitlines()
    conn.close()
    data = [line[6:] for line in lines if line.startswith("data: ")]
    return [json.loads(d) for d in data if d != "[DONE]"]


def _completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """The ChatCompletion those chunks add up to (what a golden replay would hold)."""
    text, calls, finish, usage = "", [], None, None
    for chunk in chunks:
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or ():
            text += choice["delta"].get("content") or ""
            calls += choice["delta"].get("tool_calls") or []
            finish = choice.get("finish_reason") or finish
    message = {"role": "assistant", "content": text, "tool_calls": calls or None}
    head = chunks[0]
    return {
        "id": head["id"],
        "object": "chat.completion",
        "created": head["created"],
        "model": head["model"],
        "usage": usage,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
    }


class _Translator(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeOpenAI) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.upstream = fake.base_url  # the Chat Completions server: the fake, or llama.cpp
        self.mode = "chunks"  # feed chunks, "replay" a finished completion, or "data-only" frames
        self.chunks: Chunks | None = None  # hand-made chunks instead of the fake's
        self.sent: list[
            dict[str, Any]
        ] = []  # every Response and event, validated strictly at teardown

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Translator

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        assert self.path == "/v1/responses"
        if self.server.mode in ("serve", "serve-replay"):
            return self._serve(body)
        try:
            chat = to_chat(body)
        except NotCarried as exc:
            return self._send(exc.status, "application/json", exc.error_body())
        made = self.server.chunks(chat) if self.server.chunks else None
        chunks = made or _chat_chunks(self.server.upstream, chat)
        if not body.get("stream"):
            answer = to_response(_completion(chunks), body)
            self.server.sent.append(answer)
            return self._send(200, "application/json", json.dumps(answer).encode())
        stream = ResponsesStream(body)
        if self.server.mode == "replay":
            events = stream.replay(_completion(chunks))
        else:
            events = [e for chunk in chunks for e in stream.feed(chunk)] + stream.finish()
        self.server.sent += events
        if self.server.mode == "data-only":  # as the proxy's _Stream frames chat chunks
            frames = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events)
            return self._send(200, "text/event-stream", frames + b"data: [DONE]\n\n")
        self._send(200, "text/event-stream", sse(events))

    def _serve(self, body: dict[str, Any]) -> None:
        """As the proxy will: ``serve`` with the real ``forward_chat`` the router uses."""
        spec = ModelSpec("smol", "openai", "smol-candidate", base_urls=[self.server.upstream])
        target = Target(spec, self.server.upstream, "sk-candidate")
        replay = self.server.mode == "serve-replay"  # the router answered from the goldens

        def chat(chat_body: dict[str, Any], relay: Callable[[bytes], None] | None) -> Any:
            return forward_chat(target, chat_body, None if replay else relay)

        frames: list[bytes] = []
        reply = serve(body, chat, frames.append)
        self.server.sent += [json.loads(frame) for frame in frames]
        if reply is not None:
            if reply.status == 200:
                self.server.sent.append(json.loads(reply.payload))
            return self._send(reply.status, "application/json", reply.payload)
        data = b"".join(b"data: %s\n\n" % frame for frame in frames)
        self._send(200, "text/event-stream", data + b"data: [DONE]\n\n")

    def _send(self, status: int, ctype: str, payload: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(ANSWER) as server:
        yield server


@pytest.fixture
def translator(fake: FakeOpenAI) -> Iterator[_Translator]:
    server = _Translator(fake)
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    ).start()
    yield server
    server.shutdown()
    server.server_close()
    _validate_strictly(server.sent)


def _validate_strictly(sent: list[dict[str, Any]]) -> None:
    """The SDK builds its objects leniently; the API's own models must accept what was sent."""
    events = TypeAdapter(ResponseStreamEvent)
    for payload in sent:
        if payload.get("object") == "response":
            Response.model_validate(payload)
        else:
            assert events.validate_python(payload).type == payload["type"]


@pytest.fixture
def client(translator: _Translator) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=translator.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


def _sent(fake: FakeOpenAI) -> dict[str, Any]:
    return fake.requests[-1].json


# -- plain create -------------------------------------------------------------------------------


def test_text_input_and_instructions_become_system_and_user_messages(
    client: openai.OpenAI, fake: FakeOpenAI
) -> None:
    r = client.responses.create(
        model="gpt-4o",
        input="Capital of France?",
        instructions="Answer in one sentence.",
        temperature=0,
        max_output_tokens=50,
    )
    assert isinstance(r, Response)
    assert r.output_text == ANSWER
    assert r.status == "completed" and r.model == fake.model
    sent = _sent(fake)
    assert sent["messages"] == [
        {"role": "system", "content": "Answer in one sentence."},
        {"role": "user", "content": "Capital of France?"},
    ]
    assert (sent["temperature"], sent["max_tokens"]) == (0, 50)
    assert r.usage is not None and r.usage.output_tokens == count_tokens(ANSWER)
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens


def test_message_list_with_parts_roles_and_history(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    r = client.responses.create(
        model="gpt-4o",
        input=[
            {"role": "developer", "content": "Be brief."},
            {"role": "user", "content": [{"type": "input_text", "text": "Capital of Italy?"}]},
            {
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [{"type": "output_text", "text": "Rome.", "annotations": []}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "And France?"},
                    {
                        "type": "input_image",
                        "image_url": "data:image/png;base64,AA==",
                        "detail": "low",
                    },
                ],
            },
        ],
    )
    assert r.output_text == ANSWER
    assert _sent(fake)["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Capital of Italy?"},
        {"role": "assistant", "content": "Rome."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "And France?"},
                {
                    "type": "image_url",
                    "image_url": {"url": "data:image/png;base64,AA==", "detail": "low"},
                },
            ],
        },
    ]


class Capital(BaseModel):
    city: str
    country: str


def test_json_schema_format_is_carried_and_parse_gives_the_typed_object(
    fake: FakeOpenAI, client: openai.OpenAI
) -> None:
    fake.answer = json.dumps({"city": "Paris", "country": "France"})
    parsed = client.responses.parse(model="gpt-4o", input="Capital of France?", text_format=Capital)
    assert parsed.output_parsed == Capital(city="Paris", country="France")
    fmt = _sent(fake)["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["name"] == "Capital"
    assert fmt["json_schema"]["schema"]["properties"]["city"] == {"title": "City", "type": "string"}
    client.responses.create(model="gpt-4o", input="x", text={"format": {"type": "json_object"}})
    assert _sent(fake)["response_format"] == {"type": "json_object"}


WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def test_tool_call_round_trip(client: openai.OpenAI, fake: FakeOpenAI) -> None:
    fake.answer = lambda body: (
        ANSWER
        if body["messages"][-1]["role"] == "tool"
        else {
            "tool_calls": [{"id": "call_w1", "name": "get_weather", "arguments": {"city": "Paris"}}]
        }
    )
    first = client.responses.create(
        model="gpt-4o",
        input="Weather in Paris?",
        tools=[WEATHER],
        tool_choice={"type": "function", "name": "get_weather"},
    )
    call = first.output[0]
    assert isinstance(call, ResponseFunctionToolCall) and len(first.output) == 1
    assert (call.name, json.loads(call.arguments), call.call_id) == (
        "get_weather",
        {"city": "Paris"},
        "call_w1",
    )
    assert _sent(fake)["tools"][0]["function"]["name"] == "get_weather"
    assert _sent(fake)["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    history = [
        "Weather in Paris?",
        call.model_dump(exclude_none=True),
        {"type": "function_call_output", "call_id": call.call_id, "output": "18 C, sunny"},
    ]
    history[0] = {"role": "user", "content": history[0]}
    second = client.responses.create(model="gpt-4o", input=history, tools=[WEATHER])
    assert second.output_text == ANSWER
    assert _sent(fake)["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_w1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_w1", "content": "18 C, sunny"},
    ]


def test_length_finish_is_an_incomplete_response(client: openai.OpenAI) -> None:
    r = client.responses.create(model="gpt-4o", input="Capital?", max_output_tokens=2)
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == "Paris is"


# -- streams ------------------------------------------------------------------------------------

TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]


@pytest.mark.parametrize("mode", ["chunks", "replay", "data-only"])
def test_create_stream_events_are_typed_and_end_with_the_answer(
    client: openai.OpenAI, translator: _Translator, mode: str
) -> None:
    translator.mode = mode
    events = list(client.responses.create(model="gpt-4o", input="Capital?", stream=True))
    kinds = [e.type for e in events]
    assert [k for k in kinds if k != "response.output_text.delta"] == TEXT_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == ANSWER
    assert len(deltas) == 1 if mode == "replay" else len(deltas) == len(ANSWER.split()) + 1
    final = events[-1].response
    assert final.output_text == ANSWER and final.usage is not None and final.usage.output_tokens > 0


def test_stream_helper_gives_the_final_response_and_text_deltas(client: openai.OpenAI) -> None:
    with client.responses.stream(model="gpt-4o", input="Capital?") as stream:
        snapshots = [e.snapshot for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert final.output_text == ANSWER and snapshots[-1] == ANSWER


def _split_call_chunks(chat: dict[str, Any]) -> list[dict[str, Any]]:
    """A streamed answer as llama.cpp and vLLM send it: text, then a call with split arguments."""
    head = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    deltas = [
        {"role": "assistant", "content": "Let me check."},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
    ]
    chunks = [
        {**head, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    usage = {"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16}
    return [*chunks, {**head, "choices": [], "usage": usage}]


def test_streamed_tool_call_with_split_arguments(
    client: openai.OpenAI, translator: _Translator
) -> None:
    translator.chunks = _split_call_chunks
    with client.responses.stream(model="gpt-4o", input="Weather?", tools=[WEATHER]) as stream:
        kinds = [e.type for e in stream]
        final = stream.get_final_response()
    assert kinds.count("response.function_call_arguments.delta") == 2
    assert "response.function_call_arguments.done" in kinds
    _message, call = final.output
    assert final.output_text == "Let me check."
    assert isinstance(call, ResponseFunctionToolCall) and call.call_id == "call_a"
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert final.usage is not None and (final.usage.input_tokens, final.usage.output_tokens) == (
        9,
        7,
    )


def test_async_client_plain_and_stream(translator: _Translator) -> None:
    async def run() -> tuple[str, str]:
        async with openai.AsyncOpenAI(base_url=translator.base_url, api_key="sk-test") as client:
            plain = await client.responses.create(model="gpt-4o", input="Capital?")
            text = ""
            async for event in await client.responses.create(
                model="gpt-4o", input="Capital?", stream=True
            ):
                text += event.delta if event.type == "response.output_text.delta" else ""
            return plain.output_text, text

    assert asyncio.run(run()) == (ANSWER, ANSWER)


# -- refused ------------------------------------------------------------------------------------

REFUSED = [
    ({"tools": [{"type": "web_search"}]}, "built-in tool 'web_search' (tools[0])"),
    (
        {"tools": [WEATHER, {"type": "file_search", "vector_store_ids": ["vs_1"]}]},
        "'file_search' (tools[1])",
    ),
    (
        {"tools": [{"type": "code_interpreter", "container": {"type": "auto"}}]},
        "'code_interpreter'",
    ),
    ({"tools": [{"type": "image_generation"}]}, "'image_generation'"),
    ({"tools": [{"type": "mcp", "server_label": "x", "server_url": "https://x.invalid"}]}, "'mcp'"),
    (
        {
            "tools": [
                {
                    "type": "computer_use_preview",
                    "display_width": 1,
                    "display_height": 1,
                    "environment": "linux",
                }
            ]
        },
        "'computer_use_preview'",
    ),
    ({"previous_response_id": "resp_1"}, "`previous_response_id`"),
    ({"background": True}, "`background`"),
    ({"conversation": "conv_1"}, "`conversation`"),
    ({"prompt": {"id": "pmpt_1"}}, "`prompt`"),
    ({"top_logprobs": 3}, "logprobs"),
    ({"include": ["message.output_text.logprobs"]}, "logprobs"),
    ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "'item_reference' (input[0])"),
    (
        {"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]},
        "'input_file'",
    ),
    ({"tool_choice": {"type": "web_search_preview"}}, "tool_choice type 'web_search_preview'"),
]


@pytest.mark.parametrize(("extra", "feature"), REFUSED)
def test_what_cannot_be_carried_fails_with_one_line(
    client: openai.OpenAI, fake: FakeOpenAI, extra: dict[str, Any], feature: str
) -> None:
    body = {"model": "gpt-4o", "input": "Hi", **extra}
    with pytest.raises(openai.BadRequestError) as info:
        client.responses.create(**body)
    message = info.value.body["message"]
    assert feature in message and "\n" not in message and "not carried" in message
    assert fake.hits == 0  # nothing reached a model, nothing can be recorded


def test_dropped_settings_do_not_reach_the_chat_body() -> None:
    chat = to_chat(
        {
            "model": "m",
            "input": "Hi",
            "store": False,
            "metadata": {"a": "b"},
            "user": "u",
            "reasoning": {"effort": "low"},
            "service_tier": "auto",
            "background": False,
            "text": {"format": {"type": "text"}, "verbosity": "low"},
            "input_extra": None,
        }
    )
    assert chat == {"model": "m", "messages": [{"role": "user", "content": "Hi"}]}


def test_reasoning_items_in_history_are_dropped_and_text_outputs_joined() -> None:
    chat = to_chat(
        {
            "model": "m",
            "input": [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
                {
                    "type": "function_call_output",
                    "call_id": "c1",
                    "output": [
                        {"type": "input_text", "text": "a"},
                        {"type": "input_text", "text": "b"},
                    ],
                },
            ],
        }
    )
    assistant, tool = chat["messages"]
    assert [c["id"] for c in assistant["tool_calls"]] == ["c1", "c2"]
    assert tool == {"role": "tool", "tool_call_id": "c1", "content": "ab"}


def test_to_response_validates_for_refusals_and_empty_answers() -> None:
    base = {"id": "chatcmpl-1", "created": 5, "model": "m", "usage": None}
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    r = Response.model_validate(
        to_response(
            {**base, "choices": [{"message": refusal, "finish_reason": "stop"}]}, {"model": "m"}
        )
    )
    assert r.output[0].content[0].type == "refusal" and r.output_text == ""
    empty = {"role": "assistant", "content": ""}
    r = Response.model_validate(
        to_response({**base, "choices": [{"message": empty}]}, {"model": "m"})
    )
    assert r.output_text == "" and r.usage is None and len(r.output) == 1


def test_a_broken_upstream_ends_the_stream_with_response_failed() -> None:
    stream = ResponsesStream({"model": "m", "input": "Hi"})
    events = stream.feed(_split_call_chunks({})[0]) + stream.fail("candidate went away")
    assert [e["type"] for e in events][-1] == "response.failed"
    failed = Response.model_validate(events[-1]["response"])
    assert failed.status == "failed" and failed.error is not None
    assert failed.error.message == "candidate went away"


# -- serve(): the proxy's side ------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["serve", "serve-replay"])
def test_serve_plain_and_stream_through_forward_chat(
    client: openai.OpenAI, translator: _Translator, fake: FakeOpenAI, mode: str
) -> None:
    translator.mode = mode
    plain = client.responses.create(model="gpt-4o", input="Capital?", instructions="Be brief.")
    with client.responses.stream(model="gpt-4o", input="Capital?") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert plain.output_text == final.output_text == "".join(deltas) == ANSWER
    assert len(deltas) == (1 if mode == "serve-replay" else len(ANSWER.split()) + 1)
    assert {r.json["model"] for r in fake.requests} == {"smol-candidate"}
    assert final.usage is not None and final.usage.output_tokens == count_tokens(ANSWER)


def test_serve_refuses_before_any_call_and_relays_upstream_errors(
    client: openai.OpenAI, translator: _Translator, fake: FakeOpenAI
) -> None:
    translator.mode = "serve"
    with pytest.raises(openai.BadRequestError, match="built-in tool 'web_search'"):
        client.responses.create(model="gpt-4o", input="Hi", tools=[{"type": "web_search"}])
    assert fake.hits == 0
    with FakeOpenAI(ANSWER, fail=[503, 503]) as failing:
        translator.upstream = failing.base_url
        with pytest.raises(openai.InternalServerError, match="Service Unavailable"):
            client.responses.create(model="gpt-4o", input="Hi")
        with pytest.raises(openai.InternalServerError, match="Service Unavailable"):
            client.responses.create(model="gpt-4o", input="Hi", stream=True)
    assert failing.hits == 2


# -- the real engine ----------------------------------------------------------------------------

LABEL = {
    "type": "json_schema",
    "name": "label",
    "strict": True,
    "schema": {
        "type": "object",
        "additionalProperties": False,
        "required": ["label"],
        "properties": {"label": {"enum": ["positive", "negative"]}},
    },
}


@pytest.mark.engine
def test_llamacpp_serves_translated_requests(translator: _Translator, smollm2_url: str) -> None:
    """llama.cpp accepts what ``to_chat`` makes (developer role, instructions, json_schema)."""
    translator.upstream = smollm2_url
    ask = {
        "model": "gpt-4o",
        "instructions": "Answer briefly.",
        "temperature": 0,
        "max_output_tokens": 24,
        "input": [
            {"role": "developer", "content": "You are a helpful assistant."},
            {"role": "user", "content": [{"type": "input_text", "text": "Name a color."}]},
        ],
    }
    with openai.OpenAI(base_url=translator.base_url, api_key="sk-test", max_retries=0) as client:
        plain = client.responses.create(**ask)
        with client.responses.stream(**ask) as stream:
            deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
            final = stream.get_final_response()
        label = client.responses.create(model="gpt-4o", input="I love it!", text={"format": LABEL})
    assert plain.output_text.strip() and plain.usage is not None and plain.usage.input_tokens > 0
    assert final.output_text == "".join(deltas) and deltas
    assert json.loads(label.output_text)["label"] in ("positive", "negative")
