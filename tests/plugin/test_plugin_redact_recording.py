"""A key in the reference's answer, in a recording run: redacted before it is scored or shown.

The recording run scores, compares and prints the answer as its golden file keeps it, so the key
reaches no junit file, terminal, report or golden file, and a replay gives the same scores.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_golden_helpers import run, write_project
from report_helpers import read_report

from pytest_slam.golden.redact import REDACTED
from pytest_slam.testing import FakeOpenAI

KEY = "sk-live9Xq2Lm7Pw4Rt8Zv1"
SETUP = "Put {key} in OPENAI_API_KEY, then restart the billing service."
TESTS = """
import pytest
from pytest_slam.compare import assert_equivalent

pytestmark = pytest.mark.slm

def test_setup(slm_model, gpt4_reference):
    call = slm_model.chat("How do I set up billing?")
    assert_equivalent(call, gpt4_reference.answer_for(call), at_least=0.99)

def test_unsure(slm_model, gpt4_reference):
    call = slm_model.chat("Which key does billing use?")
    assert_equivalent(call, gpt4_reference.text_for(call), at_least=0.9)
"""


def _candidate(req: dict) -> str:
    """It repeats the reference's setup line as a golden file shows it; the other it dodges."""
    if "set up" in req["messages"][-1]["content"]:
        return SETUP.format(key=REDACTED)
    return "I am not sure, ask your administrator."


def _scores(report: Path) -> dict[str, list[float]]:
    outcomes = read_report(report)["outcomes"]
    return {o["nodeid"]: [s["value"] for p in o["pairs"] for s in p["scores"]] for o in outcomes}


def _files_holding(root: Path, secret: str) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*"))
            if p.is_file() and secret.encode() in p.read_bytes()]  # fmt: skip


def test_a_key_in_the_reference_answer_reaches_no_file_or_log_and_replay_scores_the_same(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_product=TESTS)
    reference = FakeOpenAI(lambda req: SETUP.format(key=KEY), model="gpt-4-0613")
    mini = FakeOpenAI(_candidate, model="gpt-4o-mini")
    with reference, mini:
        write_project(pytester, reference, mini)
        reports = ["--slm-report=r.json", "--slm-html=r.html", "--junitxml=j.xml", "-rA", "-vv"]
        recorded = run(pytester, "--slm-record=new", *reports)
        assert reference.hits == 2
        reference.stop()  # the replay reads the goldens only
        replayed = run(pytester, "--slm-report=replayed.json")
    recorded.assert_outcomes(passed=1, failed=1)
    recorded.stdout.fnmatch_lines([
        "E*EquivalenceError: candidate is not equivalent to the reference by fuzzy: *",
        "E*Put [[]redacted] in OPENAI_API_KEY, then restart *",  # as the golden has it
    ])  # fmt: skip
    output = recorded.stdout.str() + recorded.stderr.str()
    assert KEY not in output and "sk-live" not in output
    assert _files_holding(pytester.path, KEY) == []  # no golden, report, junit or obtained answer
    junit = (pytester.path / "j.xml").read_text(encoding="utf-8")
    assert "EquivalenceError" in junit and f"Put {REDACTED} in" in junit
    first = _scores(pytester.path / "r.json")

    replayed.assert_outcomes(passed=1, failed=1)
    assert _scores(pytester.path / "replayed.json") == first
    (setup,) = [v for node, v in first.items() if "test_setup" in node]
    assert setup == [1.0]  # the candidate said what the golden file says
