"""A weather agent (the tool loop every agent runs) and the models that drive it, for the
tool-call tests: its product, its test, and a model that calls a function then answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PRODUCT = """
from openai import OpenAI

client = OpenAI()
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


def weather_agent(question):
    # the tool loop every agent runs: call, tool result, answer
    messages = [{"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4", messages=messages, tools=TOOLS)
    message = first.choices[0].message
    messages.append(message)
    for call in message.tool_calls or ():
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 C, sunny"})
    if not message.tool_calls:
        return message.content, first
    second = client.chat.completions.create(model="gpt-4", messages=messages, tools=TOOLS)
    return second.choices[0].message.content, first
"""
AGENT_TEST = """
import pytest
from product import weather_agent

@pytest.mark.slm
@pytest.mark.slm_equivalence(at_least=0.5)
def test_weather(slm_model):
    answer, first = weather_agent("What is the weather in Paris?")
    assert first.choices[0].finish_reason == "tool_calls"
    assert answer
"""


def agent(function: str, says: str | None = None) -> Callable[[dict[str, Any]], Any]:
    """A model that calls ``function`` for Paris (saying ``says`` too), then answers from the
    tool's result."""

    def answer(request: dict[str, Any]) -> Any:
        last = request["messages"][-1]
        if last["role"] == "tool":
            return f"It is {last['content']} in Paris."
        call = {"function": {"name": function, "arguments": {"city": "Paris"}}}
        return {"content": says, "tool_calls": [call]}

    return answer
