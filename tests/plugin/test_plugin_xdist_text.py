"""Any text a model sends crosses xdist's report transport (execnet), which cannot encode a lone
surrogate: under ``-n 2`` a recording run and a replay whose candidate and reference answer
``"\\ud800"`` for some questions keep every answer, with no INTERNALERROR."""

from __future__ import annotations

from plugin_golden_helpers import GOLDEN, PRODUCT, entries, run, write_project
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

QUESTIONS = [f"question {i}" for i in range(8)]
LONE = {"question 2": "\ud800", "question 5": "tail \udfff"}  # lone halves, in both roles
SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    assert product.ask(question) is not None
"""


def answer(who: str):
    def reply(request: dict) -> str:
        question = request["messages"][-1]["content"]
        return LONE.get(question, f"{who} says: {question}")

    return reply


def test_lone_surrogates_in_both_roles_cross_xdist_when_recording_and_replaying(pytester):
    with (
        FakeOpenAI(answer("GPT-4")) as reference,
        FakeOpenAI(answer("mini"), model="gpt-4o-mini-2024-07-18") as candidate,
    ):
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
        write_project(pytester, reference, candidate)
        recorded = run(pytester, "-n", "2", "--slm-record=new", "--slm-report=recorded.json")
        assert "INTERNALERROR" not in recorded.stdout.str()
        recorded.assert_outcomes(passed=len(QUESTIONS))
        kept = entries(pytester.path / GOLDEN / "test_product.json")
        texts = sorted(a["text"] for e in kept.values() for a in e["answers"])
        assert texts == sorted(LONE.get(q, f"GPT-4 says: {q}") for q in QUESTIONS)
        reference.stop()

        replayed = run(pytester, "-n", "2", "--slm-report=replayed.json")
        assert "INTERNALERROR" not in replayed.stdout.str()
        replayed.assert_outcomes(passed=len(QUESTIONS))
    outcomes = read_report(pytester.path / "replayed.json")["outcomes"]
    pairs = sorted(
        (o["calls"][p["call_index"]]["text"], p["reference_text"])
        for o in outcomes
        for p in o["pairs"]
    )
    assert pairs == sorted(
        (LONE.get(q, f"mini says: {q}"), LONE.get(q, f"GPT-4 says: {q}")) for q in QUESTIONS
    )
