"""An agent test's calls as one transcript in the HTML report (issue 44).

A real run (pytester) of an agent loop: the model asks for a tool, the product runs it and sends
the result back, the model answers. The reference (recorded first) and the candidate are loopback
fakes that answer as such a model does. The report's opened row, in headless Chromium, lists every
step in order: the user's turn, the tool call with its arguments, the tool's result, the answer.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from html_helpers import chromium
from report_helpers import read_report
from slam_helpers import needs_chromium

from pytest_slam.testing import FakeOpenAI

AGENT = """
import json, openai, pytest

pytestmark = pytest.mark.slm
TOOLS = [{"type": "function", "function": {"name": "lookup_order",
          "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}]

def test_agent():
    client = openai.OpenAI()
    messages = [{"role": "user", "content": "Where is order 1182?"}]
    while True:
        r = client.chat.completions.create(model="gpt-4", messages=messages, tools=TOOLS)
        m = r.choices[0].message
        if not m.tool_calls:
            break
        messages.append(m.model_dump(exclude_none=True))
        for tc in m.tool_calls:
            result = {"order": json.loads(tc.function.arguments)["id"], "status": "shipped"}
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": json.dumps(result)})
    assert "shipped" in m.content
"""


def agent(final: str) -> Any:
    """A model that calls lookup_order first, then answers ``final`` once it has the result."""

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if any(m.get("role") == "tool" for m in request["messages"]):
            return {"content": final}
        return {
            "content": None,
            "tool_calls": [{"name": "lookup_order", "arguments": {"id": "1182"}}],
        }

    return answer


@needs_chromium
def test_the_report_shows_an_agent_tests_calls_as_one_transcript(
    pytester: pytest.Pytester, tmp_path
) -> None:
    pytester.makepyfile(test_agent=AGENT)
    with (
        FakeOpenAI(agent("Order 1182 has shipped.")) as ref,
        FakeOpenAI(agent("It shipped: order 1182 is on its way.")) as mini,
    ):
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-html=r.html",
        )  # fmt: skip
    result.assert_outcomes(passed=1)
    page = (pytester.path / "r.html").as_uri()
    dom = chromium(f"{page}#open=all", "--dump-dom", tmp_path=tmp_path)
    found = re.search(r'<ol class="transcript">(.*?)</ol>', dom, re.S)
    assert found is not None, "no transcript in the opened row"
    steps = [
        (html.unescape(who), html.unescape(text))
        for who, text in re.findall(r"<li [^>]*><b>(.*?)</b><pre>(.*?)</pre></li>", found.group(1))
    ]
    assert [who.split(" \u00b7 ")[1].split(" ")[0] for who in (s[0] for s in steps)] == [
        "user", "tool", "tool", "assistant"
    ]  # fmt: skip
    (call1, user), (_, tool_call), (call2, tool_result), (_, answer) = steps
    assert call1.startswith("call 1") and user == "Where is order 1182?"
    assert tool_call == 'lookup_order({"id": "1182"})'
    assert call2.startswith("call 2 \u00b7 tool result ")
    assert tool_result == '{"order": "1182", "status": "shipped"}'
    assert answer == "It shipped: order 1182 is on its way."


@needs_chromium
def test_the_transcript_shows_each_calls_tokens_time_and_raw_request_and_answer(
    pytester: pytest.Pytester, tmp_path
) -> None:
    """Issue 52 item 5: per call its tokens and time, and its raw request and answer as the run
    recorded them (the JSON report's), put back together in the page from what it carries once."""
    pytester.makepyfile(test_agent=AGENT)
    with (
        FakeOpenAI(agent("Order 1182 has shipped.")) as ref,
        FakeOpenAI(agent("It shipped: order 1182 is on its way.")) as mini,
    ):
        pytester.makefile(".toml", pyproject=f'[tool.slam]\nreference = "{ref.base_url}#gpt-4"\n')
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new",
            "--slm-html=r.html", "--slm-report=r.json",
        )  # fmt: skip
    result.assert_outcomes(passed=1)
    report = read_report(pytester.path / "r.json")
    calls = [c for o in report["outcomes"] if o["model"] == "mini" for c in o["calls"]]
    assert len(calls) == 2
    dom = chromium(
        f"{(pytester.path / 'r.html').as_uri()}#open=all", "--dump-dom", tmp_path=tmp_path
    )
    facts = re.findall(
        r'<li class="call-facts" data-call="(\d)"><span class="measured">(.*?)</span>.*?'
        r'<pre class="raw-request">(.*?)</pre>.*?<pre class="raw-answer">(.*?)</pre>',
        dom,
        re.S,
    )
    assert [f[0] for f in facts] == ["1", "2"]
    for (number, measured, request, answer), call in zip(facts, calls, strict=True):
        measured = html.unescape(measured)
        assert measured.startswith(
            f"call {number} \u00b7 prompt {call['prompt_tokens']:,} + completion "
            f"{call['completion_tokens']:,} tokens \u00b7 TTFT "
        ), measured
        assert " \u00b7 E2E " in measured and "E2E -" not in measured
        assert json.loads(html.unescape(request)) == call["request"]
        raw = json.loads(html.unescape(answer))
        assert raw["finish_reason"] == call["finish_reason"]
        assert raw["usage"]["completion_tokens"] == call["completion_tokens"]
        assert raw.get("content") == (call["text"] or None)
        assert raw.get("tool_calls") == call.get("tool_calls")
    assert len(json.loads(html.unescape(facts[1][2]))["messages"]) == 3  # user, tool call, result
