"""The swap verdict end to end: real pytest runs (pytester) write the table, the JSON, the gate.

The candidate and the GPT-4 reference are FakeOpenAI servers on loopback, so each inner run takes
about a second and its answers are ours to change: a run that regresses is made by changing what
the candidate answers, never by editing a report.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_slam.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

PRODUCT = """
from openai import OpenAI

client = OpenAI()  # built at import time, as product code does

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content
"""
TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_refund():
    assert product.ask("How do I get a refund for order 1182?")

def test_password():
    assert product.ask("How do I reset my password?")

def test_outage():
    assert product.ask("The app shows error 500 since 9am, we are blocked")
"""
GOOD = "GPT-4 says: "  # the reference's answer: the fake GPT-4 echoes the question after this
BAD = "Sorry, I am unable to help with this request today."


class Candidate:
    """A cheaper model whose answers the test changes between runs (``answer`` is read per call)."""

    def __init__(self) -> None:
        self.prefix: str | None = GOOD  # None: answer BAD

    def __call__(self, request: dict[str, Any]) -> str:
        question = request["messages"][-1]["content"]
        return BAD if self.prefix is None else self.prefix + question


@pytest.fixture
def candidate() -> Any:
    answers = Candidate()
    with FakeOpenAI(answers, model="gpt-4o-mini-2024-07-18") as fake:
        fake.answers = answers  # type: ignore[attr-defined]
        yield fake


@pytest.fixture
def project(pytester: pytest.Pytester, candidate: Any, fake_gpt4: Any) -> pytest.Pytester:
    """A product suite opted in to pytest-slam, its goldens recorded from the fake GPT-4."""
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    pytester.makefile(".toml", pyproject=f"""
        [tool.pytest.ini_options]
        pythonpath = ["."]

        [tool.slam]
        reference = "{fake_gpt4.base_url}#gpt-4"

        [tool.slam.models.mini]
        base_url = "{candidate.base_url}"
        model = "gpt-4o-mini"
        """)  # fmt: skip
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--slm-models=mini", *args)


def record(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    result = run(project, "--slm-record=new", *args)
    assert result.ret == 0, result.stdout.str()
    return result


def slam_section(result: pytest.RunResult) -> list[str]:
    lines = result.stdout.lines
    start = next(i for i, line in enumerate(lines) if "pytest-slam" in line and "===" in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("===")), len(lines))
    return lines[start + 1 : end]


def load(path: Any) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def test_regression_against_a_baseline_fails_the_gate(project, candidate) -> None:
    record(project, "--slm-report=base.json")
    base = load(project.path / "base.json")
    assert base["models"][0]["equivalence_mean"] == 1.0 and base["gate"] is None
    candidate.answers.prefix = None  # the same suite, now with answers unlike the reference's
    result = run(project, "--slm-baseline=base.json", "--slm-report=new.json")
    result.assert_outcomes(passed=3)
    assert result.ret == EXIT_GATE_FAILED
    section = slam_section(result)
    assert "regressions: 4" in section
    assert "  - mini: equivalence_mean 1.00 -> 0.13" in section
    assert "gate: FAIL" in section
    new = load(project.path / "new.json")
    assert new["gate"]["passed"] is False and new["models"][0]["gate"] == "FAIL"
    (breach,) = new["gate"]["models"][0]["breaches"]
    assert breach["rule"] == "no_regression" and breach["measured"] == 4
    without = run(project)
    without.assert_outcomes(passed=3)
    assert without.ret == 0 and "gate" not in "\n".join(slam_section(without))
