"""Records travel from xdist workers to the controller with nothing lost.

The same suite runs serially and with ``-n 2`` against a deterministic candidate (FakeOpenAI: fixed
answers, fixed token counts, per-token prices) and a GPT-4 stand-in whose answers the serial run
records and the xdist run replays. Everything that must not depend on how tests were distributed
is compared exactly from the two JSON reports: per-call tokens, costs and texts, pairs and scores,
test outcomes, and every per-model and per-test count and sum. Latency is measured anew in each run
and differs, so it is compared by count only (how many calls were timed).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

PRODUCT = """
import openai, pytest

pytestmark = pytest.mark.slm

def ask(question, stream=False):
    client = openai.OpenAI()
    messages = [{"role": "user", "content": question}]
    if stream:
        chunks = client.chat.completions.create(
            model="gpt-4", messages=messages, max_tokens=16, stream=True)
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    r = client.chat.completions.create(model="gpt-4", messages=messages, max_tokens=16)
    return r.choices[0].message.content

@pytest.mark.parametrize("n", range(6))
def test_question(slm_model, n):
    assert ask(f"What is {n} plus {n}?")

def test_two_calls(slm_model):
    ask("First question?")
    ask("Second question, streamed?", stream=True)
    assert len(slm_model.calls) == 2

def test_product_assertion_fails(slm_model):
    ask("Will this fail?")
    assert False, "the product's own assertion"

def test_skipped_after_a_call(slm_model):
    ask("Skip me?")
    pytest.skip("skipped after one call")
"""
# not latency_samples: the calls sent alone (swap/limits.py), each worker's first among them
ROW_COUNTS = (
    "tests_passed", "tests_failed", "tests_errored", "tests_skipped", "pass_rate", "calls",
    "calls_errored", "calls_replayed", "pairs", "missing_golden",
    "equivalence_mean", "equivalence_worst", "equivalence_by_scorer", "prompt_tokens",
    "completion_tokens", "tokens_estimated", "cost_per_call_usd", "cost_per_1000_calls_usd",
    "cost_ratio", "energy_per_call_j", "cold_starts",
)  # fmt: skip
CALL_FIELDS = ("model", "role", "request", "text", "finish_reason", "prompt_tokens",
               "completion_tokens", "tokens_estimated", "cost_usd", "energy_j", "streamed",
               "replayed", "error", "key")  # fmt: skip
TEST_FIELDS = ("test", "model", "outcome", "runs", "calls", "missing_golden", "equivalence_mean",
               "equivalence_worst", "cost_usd", "message")  # fmt: skip


def _pick(data: dict[str, Any], fields: tuple[str, ...]) -> dict[str, Any]:
    return {k: data.get(k) for k in fields}


def _what_must_not_depend_on_distribution(path: Path) -> dict[str, Any]:
    report = read_report(path)
    outcomes = {
        o["nodeid"]: {
            "outcome": o["outcome"],
            "calls": [_pick(c, CALL_FIELDS) for c in o["calls"]],
            "pairs": o["pairs"],
            "energy_j": o["energy_j"],
            "message": o["message"],
        }
        for o in report["outcomes"]
    }
    return {
        "models": [_pick(r, ("model", *ROW_COUNTS)) for r in report["models"]],
        "reference": _pick(report["reference"], ("model", *ROW_COUNTS)),
        "tests": [_pick(t, TEST_FIELDS) for t in report["tests"]],
        "outcomes": outcomes,
    }


def test_aggregates_with_two_workers_equal_a_serial_run(
    pytester: pytest.Pytester, fake_gpt4
) -> None:
    answer = lambda body: "Answer: " + body["messages"][-1]["content"]  # noqa: E731
    with FakeOpenAI(answer, model="tiny", latency_s=0.005) as candidate:
        pytester.makefile(
            ".toml",
            pyproject=f"""
            [tool.slam]
            reference = "{fake_gpt4.base_url}#gpt-4"

            [tool.slam.models.tiny]
            provider = "endpoint"
            base_url = "{candidate.base_url}"
            input_per_mtok = 1.5
            output_per_mtok = 2.5
            """,
        )
        pytester.makepyfile(test_product=PRODUCT)
        models = "--slm-models=tiny"
        serial = pytester.runpytest_subprocess(
            models, "--slm-record=new", "--slm-report=serial.json"
        )
        recorded = fake_gpt4.hits
        spread = pytester.runpytest_subprocess(
            models, "-p", "xdist", "-n", "2", "-v", "--slm-report=xdist.json"
        )
    serial.assert_outcomes(passed=7, failed=1, skipped=1)
    spread.assert_outcomes(passed=7, failed=1, skipped=1)
    assert fake_gpt4.hits == recorded == 10  # recorded once, then replayed by the workers
    spread.stdout.fnmatch_lines(["*[[]gw0[]]*", "*[[]gw1[]]*"], consecutive=False)
    once = _what_must_not_depend_on_distribution(pytester.path / "serial.json")
    twice = _what_must_not_depend_on_distribution(pytester.path / "xdist.json")
    assert (
        len(once["outcomes"]) == 9 and sum(len(o["calls"]) for o in once["outcomes"].values()) == 10
    )
    (row,) = once["models"]
    assert (row["calls"], row["pairs"], row["missing_golden"]) == (10, 10, 0)
    serial_row = read_report(pytester.path / "serial.json")["models"][0]
    assert serial_row["latency_samples"] == 1  # the latency sample: the first call, sent alone
    assert row["prompt_tokens"] > 0 and row["cost_ratio"] is not None
    assert twice == once
