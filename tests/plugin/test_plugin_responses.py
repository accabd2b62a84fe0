"""The Responses API swapped end to end: real pytest runs (pytester), the real openai client, the proxy.

The product calls ``client.responses.create`` (plain, streaming, async). The candidate serves only Chat
Completions (a FakeOpenAI named by an endpoint spec, or the real embedded SmolLM2 engine): the proxy
translates the call (responses.py), records it like a chat call, pairs it with the reference's golden
answer to the translated request and scores it; the product's typed ``Response`` has the answer. A
replay with the reference stopped must give the same outcome.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_helpers import read_report
from slam_helpers import write_pyproject

from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import asyncio
from openai import AsyncOpenAI, OpenAI

client = OpenAI()  # built at import time

def ask(question):
    r = client.responses.create(model="gpt-4o", instructions="Answer briefly.", input=question,
                                temperature=0)
    return r.output_text

def ask_stream(question):
    stream = client.responses.create(model="gpt-4o", input=question, temperature=0, stream=True)
    deltas, final = [], None
    for event in stream:
        if event.type == "response.output_text.delta":
            deltas.append(event.delta)
        elif event.type == "response.completed":
            final = event.response
    return "".join(deltas), final.output_text

def ask_async(question):
    async def go():
        r = await AsyncOpenAI().responses.create(
            model="gpt-4o", input=[{"role": "user", "content": question}], temperature=0)
        return r.output_text
    return asyncio.run(go())
"""

SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

def test_plain(slm_model):
    answer = product.ask("How do I get a refund?")
    (call,) = slm_model.calls
    assert answer == call.text == "mini says: How do I get a refund?"
    assert call.request["messages"][0] == {"role": "system", "content": "Answer briefly."}
    assert call.ttft_ms is not None and call.completion_tokens

def test_stream(slm_model):
    text, final = product.ask_stream("Reset my password")
    (call,) = slm_model.calls
    assert text == final == call.text == "mini says: Reset my password"
    assert call.streamed and call.ttft_ms <= call.e2e_ms

def test_async(slm_model):
    answer = product.ask_async("Error 500 since 9am")
    assert answer == slm_model.calls[0].text == "mini says: Error 500 since 9am"
"""


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    """The candidate: serves Chat Completions only (no /v1/responses route)."""
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def project(pytester: pytest.Pytester, reference: FakeOpenAI, extra: str = "") -> None:
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
reference = "{reference.base_url}#gpt-4"
reference_retries = 0
{extra}""")  # fmt: skip


def outcomes(report: Path) -> dict[str, dict[str, Any]]:
    return {o["nodeid"]: o for o in read_report(report)["outcomes"]}


def verdicts(report: Path) -> dict[str, tuple[str, list[tuple[str, str, float]]]]:
    """Each test's outcome, and per pair: golden key, reference text, first score."""
    return {
        nodeid: (
            o["outcome"],
            [(p["key"], p["reference_text"], p["scores"][0]["value"]) for p in o["pairs"]],
        )
        for nodeid, o in outcomes(report).items()
    }


def golden_entries(root: Path) -> dict[str, Any]:
    (path,) = [p for p in root.rglob("test_responses.json") if ".slam" not in p.parts]
    return read_report(path)["entries"]


def test_responses_calls_are_swapped_recorded_paired_and_replayed(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(product=PRODUCT, test_responses=SUITE)
    project(
        pytester,
        fake_gpt4,
        "[tool.slam.prices]\nmini = { input_per_mtok = 1, output_per_mtok = 2 }",
    )
    models = f"--slm-models={mini.base_url}#mini"
    recorded = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-record=new",
                                  "--slm-report=recorded.json")  # fmt: skip
    recorded.assert_outcomes(passed=3)
    # The candidate got chat requests with its own model name, never a Responses call.
    assert {(r.path, r.json["model"]) for r in mini.requests} == {("/v1/chat/completions", "mini")}
    assert fake_gpt4.hits == 3
    entries = golden_entries(pytester.path)
    asked = sorted(e["request"]["messages"][-1]["content"] for e in entries.values())
    assert asked == ["Error 500 since 9am", "How do I get a refund?", "Reset my password"]
    assert all(
        "stream" not in e["request"] and "input" not in e["request"] for e in entries.values()
    )
    before = verdicts(pytester.path / "recorded.json")
    for outcome, pairs in before.values():
        ((key, reference_text, score),) = pairs
        assert outcome == "passed" and key in entries
        assert reference_text.startswith("GPT-4 says: ") and 0 < score < 1
    for o in outcomes(pytester.path / "recorded.json").values():
        (call,) = o["calls"]
        assert call["ttft_ms"] is not None and call["cost_usd"] > 0
        assert o["pairs"][0]["reference_cost_usd"] > 0

    fake_gpt4.stop()
    replayed = pytester.runpytest("-p", "no:cacheprovider", models, "--slm-report=replayed.json")
    replayed.assert_outcomes(passed=3)
    assert verdicts(pytester.path / "replayed.json") == before


def test_a_builtin_tool_fails_that_call_with_one_line(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    pytester.makepyfile(test_tools="""
        import openai, pytest

        @pytest.mark.slm(calls=0)
        def test_web_search(slm_model):
            with pytest.raises(openai.BadRequestError) as err:
                openai.OpenAI(max_retries=0).responses.create(
                    model="gpt-4o", input="News?", tools=[{"type": "web_search"}])
            assert "built-in tool 'web_search' (tools[0]) is not carried" in str(err.value)
            assert slm_model.calls == []  # nothing recorded as a made-up answer
        """)  # fmt: skip
    project(pytester, fake_gpt4)
    result = pytester.runpytest("-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini")
    result.assert_outcomes(passed=1)
    assert mini.hits == 0


def test_a_native_responses_candidate_gets_the_call_as_is(
    pytester: pytest.Pytester, mini: FakeOpenAI
) -> None:
    """``responses = true``: sent to its /v1/responses with its own model name (the fake has no such
    route, so the product sees the candidate's own 404), and an output limit when none was set."""
    pytester.makepyfile(test_native="""
        import openai, pytest

        @pytest.mark.slm(calls=0)
        def test_native(slm_model):
            with pytest.raises(openai.NotFoundError):
                openai.OpenAI(max_retries=0).responses.create(model="gpt-4o", input="Hi")
        """)  # fmt: skip
    extra = "responses = true\nmax_tokens_cap = 77\n"
    write_pyproject(pytester, mini.base_url, name="native", model="qwen-native", extra=extra)
    pytester.runpytest("-p", "no:cacheprovider").assert_outcomes(passed=1)
    (request,) = mini.requests
    assert request.path == "/v1/responses"
    assert request.json == {"model": "qwen-native", "input": "Hi", "max_output_tokens": 77}
    assert "authorization" not in request.headers  # the caller's key is not the candidate's


def test_responses_on_the_embedded_engine(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, smollm2_endpoint: str
) -> None:
    pytester.makepyfile(test_embedded="""
        import asyncio, openai, pytest

        pytestmark = pytest.mark.slm

        def test_plain_stream_async(slm_model):
            client = openai.OpenAI()
            r = client.responses.create(model="gpt-4o", input="Say hi", max_output_tokens=8,
                                        temperature=0)
            assert r.output_text == slm_model.calls[0].text and r.output_text
            assert r.usage.output_tokens == slm_model.calls[0].completion_tokens <= 8
            events = list(client.responses.create(model="gpt-4o", input="Say hi",
                                                  max_output_tokens=8, temperature=0, stream=True))
            assert events[-1].type in ("response.completed", "response.incomplete")
            assert events[-1].response.output_text == slm_model.calls[1].text
            async def go():
                return await openai.AsyncOpenAI().responses.create(
                    model="gpt-4o", input="Say hi", max_output_tokens=8, temperature=0)
            assert asyncio.run(go()).output_text == slm_model.calls[2].text
            assert all(c.ttft_ms is not None for c in slm_model.calls)
        """)  # fmt: skip
    project(pytester, fake_gpt4)
    recorded = pytester.runpytest("-p", "no:cacheprovider", f"--slm-models={smollm2_endpoint}",
                                  "--slm-record=new", "--slm-report=recorded.json")  # fmt: skip
    recorded.assert_outcomes(passed=1)
    fake_gpt4.stop()
    replayed = pytester.runpytest("-p", "no:cacheprovider", f"--slm-models={smollm2_endpoint}",
                                  "--slm-report=replayed.json")  # fmt: skip
    replayed.assert_outcomes(passed=1)
    (before,) = outcomes(pytester.path / "recorded.json").values()
    (after,) = outcomes(pytester.path / "replayed.json").values()
    assert len(before["pairs"]) == 3 and all(p["reference_text"] for p in before["pairs"])
    assert [p["key"] for p in after["pairs"]] == [p["key"] for p in before["pairs"]]
    assert [p["reference_text"] for p in after["pairs"]] == [
        p["reference_text"] for p in before["pairs"]
    ]


def test_the_golden_key_of_a_responses_call_does_not_depend_on_its_shape() -> None:
    """Text or message input, one text part or a string, streamed or not: one question, one key."""
    from pytest_slam.golden.keys import request_key
    from pytest_slam.swap.responses import to_chat

    shapes = [
        {"model": "gpt-4o", "input": "Hi", "temperature": 0},
        {"model": "gpt-4o", "input": "Hi", "temperature": 0.0, "stream": True, "store": False},
        {"model": "gpt-4o", "input": [{"role": "user", "content": "Hi"}], "temperature": 0},
        {"model": "gpt-4o", "temperature": 0, "input": [
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]}
        ]},
    ]  # fmt: skip
    assert len({request_key(to_chat(body)) for body in shapes}) == 1
    other = {"model": "gpt-4o", "input": "Hi", "temperature": 0, "max_output_tokens": 5}
    assert request_key(to_chat(other)) != request_key(to_chat(shapes[0]))


def test_function_tools_and_json_schema_through_responses(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """A tool loop (call, tool result) and structured output, as agents and pydantic-ai send them."""

    def answer(req: dict[str, Any]) -> Any:
        if req.get("tools") and req["messages"][-1]["role"] != "tool":
            return {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
        return '{"city": "Paris", "sky": "sunny"}'

    with FakeOpenAI(answer) as candidate:
        pytester.makepyfile(test_agent="""
            import json, openai, pytest

            TOOLS = [{"type": "function", "name": "get_weather", "description": "Weather by city",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
            FORMAT = {"format": {"type": "json_schema", "name": "weather", "strict": True, "schema": {
                "type": "object", "properties": {"city": {"type": "string"},
                "sky": {"type": "string"}}, "required": ["city", "sky"],
                "additionalProperties": False}}}

            @pytest.mark.slm(reference=False)
            def test_loop(slm_model):
                client = openai.OpenAI()
                first = client.responses.create(model="gpt-4o", input="Weather in Paris?", tools=TOOLS)
                (call,) = [item for item in first.output if item.type == "function_call"]
                assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
                second = client.responses.create(model="gpt-4o", tools=TOOLS, text=FORMAT, input=[
                    {"role": "user", "content": "Weather in Paris?"}, call.model_dump(),
                    {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
                assert json.loads(second.output_text) == {"city": "Paris", "sky": "sunny"}
                sent = slm_model.calls[1].request
                assert sent["messages"][-1] == {"role": "tool", "tool_call_id": call.call_id,
                                                "content": "sunny"}
                assert sent["response_format"]["json_schema"]["name"] == "weather"
                assert slm_model.calls[0].tool_calls[0]["function"]["name"] == "get_weather"
            """)  # fmt: skip
        project(pytester, fake_gpt4)
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={candidate.base_url}#c"
        )
        result.assert_outcomes(passed=1)
