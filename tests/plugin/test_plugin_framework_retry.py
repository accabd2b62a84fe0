"""A framework's retry is understood (issue 52): when the candidate answers prose to a tool
request, instructor asks again with that prose in the conversation. The reference answered with
the tool call at once, so no golden answer exists for the retry, and recording one would ask the
reference to continue the candidate's conversation. The failure says so, with the first call's
verdict, and never proposes ``--slm-record``.

Real pytest runs (pytester): the reference and the candidate are FakeOpenAIs on loopback, the
framework a small copy of instructor's retry (the assistant's answer and a reprompt appended).
"""

from __future__ import annotations

import pytest

from pytest_slam.testing import FakeOpenAI

FRAMEWORK = """
import openai

TOOLS = [{"type": "function", "function": {"name": "ticket", "parameters": {"type": "object"}}}]


def extract(text, attempts=2):
    '''instructor's TOOLS mode: on an answer without the tool call, the answer and a reprompt go
    back into the conversation, and it asks again.'''
    client = openai.OpenAI(max_retries=0)
    messages = [{"role": "user", "content": text}]
    for _ in range(attempts):
        r = client.chat.completions.create(model="gpt-4", messages=messages, tools=TOOLS)
        message = r.choices[0].message
        if message.tool_calls:
            return message.tool_calls[0].function.arguments
        messages += [{"role": "assistant", "content": message.content},
                     {"role": "user", "content": "Recall the function correctly, fix the errors"}]
    raise RuntimeError("no tool call")
"""
TEST = """
import pytest, framework

pytestmark = pytest.mark.slm

def test_extract():
    assert framework.extract("Open a ticket: parcel late")
"""


def test_a_retry_after_the_candidates_answer_shows_the_first_calls_verdict(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLAM_WITH_CANDIDATES", raising=False)
    pytester.makepyfile(framework=FRAMEWORK, test_extract=TEST)
    reference = {"content": None, "tool_calls": [{"name": "ticket", "arguments": {"a": 1}}]}
    with FakeOpenAI(lambda _: reference) as ref, FakeOpenAI("I think it is late.") as prose:
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["prose"]
reference = "{ref.base_url}#gpt-4"

[tool.slam.models.prose]
base_url = "{prose.base_url}"
""")  # fmt: skip
        pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-record=new")
        assert ref.hits == 1  # the reference called the tool at once: one golden answer
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(failed=1)
    assert prose.hits == 1  # the retry was refused before the candidate was asked again
    out = " ".join(result.stdout.str().split())
    assert (
        "call 2: no golden answer: this request carries the candidate's answer to call 1 "
        "(a framework's retry after it" in out
    ), out
    assert "do not record it: call 1's answer is the failure; call 1: " in out, out
    assert "candidate called no tool; reference called ticket" in out, out
    assert "--slm-record" not in out
