"""Tool calls, ``n`` choices and logprobs through the swap, in real pytest sessions (pytester).

The reference (GPT-4) and the candidate are FakeOpenAI servers on loopback: the embedded SmolLM2
engine does not call tools reliably, and what is under test is the path, not a model's skill. The
product code uses the real openai client, built at import time, and never mentions pytest-slam.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import AGENT_TEST, PRODUCT, agent
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def reference() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(agent("get_weather"), model="gpt-4-0613") as server:
        yield server


def _project(pytester: pytest.Pytester, reference: FakeOpenAI, test: str = AGENT_TEST) -> None:
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n")
    pytester.makepyfile(product=PRODUCT, test_agent=test)


def _record(pytester: pytest.Pytester, candidate: FakeOpenAI) -> pytest.RunResult:
    """Record goldens with ``candidate`` as the one model, reporting to r.json."""
    return pytester.runpytest(
        f"--slm-models={candidate.base_url}#cand", "--slm-record=new", "--slm-report=r.json"
    )


def _record_agent(
    pytester: pytest.Pytester, reference: FakeOpenAI, function: str
) -> pytest.RunResult:
    """Record the agent test with a candidate agent that calls ``function``."""
    _project(pytester, reference)
    with FakeOpenAI(agent(function), model="cand") as candidate:
        return _record(pytester, candidate)


def _outcome(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    (outcome,) = read_report(pytester.path / name)["outcomes"]
    return outcome


def _golden(pytester: pytest.Pytester) -> dict[str, Any]:
    (path,) = (pytester.path / "__slam__").rglob("test_agent.json")
    return read_report(Path(path))["entries"]


def test_same_function_and_arguments_score_one(
    pytester: pytest.Pytester, reference: FakeOpenAI
) -> None:
    result = _record_agent(pytester, reference, "get_weather")
    result.assert_outcomes(passed=1)
    first, second = _outcome(pytester, "r.json")["pairs"]
    assert first["reference_tool_calls"][0]["function"]["name"] == "get_weather"
    assert [s["scorer"] for s in first["scores"]] == ["tool_calls"]
    assert (first["scores"][0]["value"], first["scores"][0]["explanation"]) == (
        1.0,
        "1/1 calls match",
    )
    assert second["scores"][0]["scorer"] == "fuzzy"  # the final answer is text on both sides
    assert second["scores"][0]["value"] == 1.0


def test_a_different_function_scores_zero_and_fails_showing_both_calls(
    pytester: pytest.Pytester, reference: FakeOpenAI
) -> None:
    result = _record_agent(pytester, reference, "delete_account")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*call 1: equivalence 0.00 < 0.50 (tool_calls): 0/1 calls match; "
        'called delete_account({"city": "Paris"}) instead of get_weather({"city": "Paris"})*',
        "*reference * | candidate",
        '*get_weather({"city": "Paris"}) ≠ delete_account({"city": "Paris"})',
    ])  # fmt: skip
    first = _outcome(pytester, "r.json")["pairs"][0]
    assert first["scores"][0]["value"] == 0.0


def test_text_beside_tool_calls_counts_too_the_lower_value_wins(pytester: pytest.Pytester) -> None:
    with (
        FakeOpenAI(agent("get_weather", "Let me look up the weather."), model="gpt-4") as reference,
        FakeOpenAI(agent("get_weather", "Sure, one moment."), model="cand") as candidate,
    ):
        _project(pytester, reference)
        result = _record(pytester, candidate)
    result.assert_outcomes(failed=1)  # the texts differ too much for at_least=0.5
    (score,) = _outcome(pytester, "r.json")["pairs"][0]["scores"]
    assert score["scorer"] == "tool_calls+fuzzy"
    assert score["explanation"].startswith("tool calls 1.00: 1/1 calls match; text 0.")
    assert score["value"] < 0.5
    result.stdout.fnmatch_lines(["*call 1: equivalence 0.* < 0.50 (tool_calls+fuzzy): tool calls*"])


def test_a_tool_loop_records_once_and_replays_with_zero_misses(
    pytester: pytest.Pytester, reference: FakeOpenAI
) -> None:
    _project(pytester, reference)
    with FakeOpenAI(agent("get_weather"), model="cand") as candidate:
        models = f"--slm-models={candidate.base_url}#cand"
        pytester.runpytest(models, "--slm-record=new").assert_outcomes(passed=1)
        assert reference.hits == 2  # the call, and the answer after the tool result
        recorded = _golden(pytester)
        for run in ("replay1.json", "replay2.json"):
            pytester.runpytest(models, f"--slm-report={run}").assert_outcomes(passed=1)
            pairs = _outcome(pytester, run)["pairs"]
            assert [p["missing"] for p in pairs] == [False, False]
            assert {p["key"] for p in pairs} == set(recorded)
    assert reference.hits == 2  # replay never asked the reference
    assert _golden(pytester) == recorded  # nor changed a byte of what it had recorded
    # The candidate made up new tool-call ids in every run; the keys did not depend on them.
    sent = [
        r.json["messages"][2]["tool_call_id"]
        for r in candidate.requests
        if len(r.json["messages"]) > 1
    ]
    assert len(sent) == 3 and len(set(sent)) == 3


CHOICES_TEST = """
import pytest
from product import client

ASK = dict(model="gpt-4", messages=[{"role": "user", "content": "Capital of France?"}],
           n=2, logprobs=True, top_logprobs=2)

def texts(chunks):
    out = {}
    for chunk in chunks:
        for c in chunk.choices:
            out[c.index] = out.get(c.index, "") + (c.delta.content or "")
    return [out[i] for i in sorted(out)]

def streamed_logprobs(chunks, index):
    return [t.token for chunk in chunks for c in chunk.choices if c.index == index
            for t in (c.logprobs.content if c.logprobs else None) or ()]

def check(r):
    assert [c.message.content for c in r.choices] == ["Paris.", "SECOND"]
    assert [c.finish_reason for c in r.choices] == ["stop", "stop"]
    tokens = r.choices[1].logprobs.content
    assert "".join(t.token for t in tokens) == "SECOND"
    assert len(tokens[0].top_logprobs) == 2 and tokens[0].logprob < 0
    assert r.system_fingerprint == "fp_fake" and r.usage.completion_tokens > 0

@pytest.mark.slm
@pytest.mark.slm_equivalence("exact")
def test_choices(slm_model, gpt4_reference):
    check(client.chat.completions.create(**ASK))
    chunks = list(client.chat.completions.create(
        **ASK, stream=True, stream_options={"include_usage": True}))
    assert texts(chunks) == ["Paris.", "SECOND"]
    assert "".join(streamed_logprobs(chunks, 1)) == "SECOND"
    assert chunks[-1].usage.completion_tokens > 0
    (call, _) = slm_model.calls
    assert call.other_choices[0]["text"] == "SECOND" and call.logprobs["content"]
    # the reference, replayed from the golden file (or recorded): the same shapes
    reference = gpt4_reference.client.chat.completions.create(**ASK)
    assert len(reference.choices) == 2 and reference.choices[1].logprobs.content
    assert reference.system_fingerprint == "fp_fake"
    chunks = list(gpt4_reference.client.chat.completions.create(**ASK, stream=True))
    assert texts(chunks) == ["Paris.", "Paris is the capital."]
    assert "".join(streamed_logprobs(chunks, 1)) == "Paris is the capital."
"""


def test_n_choices_and_logprobs_reach_the_product_and_each_choice_is_scored(
    pytester: pytest.Pytester,
) -> None:
    with (
        FakeOpenAI(["Paris.", "Paris is the capital."], model="gpt-4-0613") as reference,
        FakeOpenAI(["Paris.", "Lyon."], model="cand") as candidate,
    ):
        _project(pytester, reference, CHOICES_TEST.replace("SECOND", "Lyon."))
        models = f"--slm-models={candidate.base_url}#cand"
        recorded = pytester.runpytest(models, "--slm-record=new", "--slm-report=r.json")
        # exact is structural: it decides on its own, and choice 1 differs, so the test fails
        recorded.assert_outcomes(failed=1)
        recorded.stdout.fnmatch_lines(["*call 1: equivalence 0.00 < 1.00 (exact): choice 1:*"])
        assert reference.hits == 1  # one request key: streaming is transport
        replayed = pytester.runpytest(models, "--slm-report=replay.json")
        replayed.assert_outcomes(failed=1)
        assert reference.hits == 1
    (answer,) = next(iter(_golden(pytester).values()))["answers"]
    assert answer["other_choices"][0]["text"] == "Paris is the capital."
    assert answer["logprobs"]["content"][0]["token"] == "Paris"
    for report in ("r.json", "replay.json"):
        pairs = _outcome(pytester, report)["pairs"]
        assert len(pairs) == 2  # the plain call and the streamed one
        for pair in pairs:  # choice i of the candidate against choice i of the reference
            assert [
                (s["value"], s["explanation"][:9], s["verdict"], s["decided_by"])
                for s in pair["scores"]
            ] == [
                (1.0, "choice 0:", "equivalent", "structure"),
                (0.0, "choice 1:", "different", "structure"),
            ]
