"""Telling candidates apart in a real run: paired bootstrap intervals in the JSON report and table.

Four FakeOpenAI candidates answer the same 30 requests (the reference is a FakeOpenAI too):
``good`` repeats the reference's answer on even requests and half of it on odd ones; ``twin``
does the opposite (same quality, different requests); ``copy`` answers exactly as ``good``;
``poor`` answers something unrelated. ``good`` must come out better than ``poor``, and ``good``
must be "cannot tell apart" from both ``twin`` and ``copy``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest

from pytest_slam.testing import FakeOpenAI

QUESTIONS = 30
TESTS = f"""
import pytest

@pytest.mark.slm
@pytest.mark.parametrize("n", range({QUESTIONS}))
def test_answer(slm_model, n):
    slm_model.chat(f"Describe item number {{n}} of the catalogue.")
"""


def reference_text(request: dict[str, Any]) -> str:
    question = request["messages"][-1]["content"]
    return f"The catalogue entry: {question} It is sturdy, blue, cheap and ships in two days."


def number(request: dict[str, Any]) -> int:
    return int(request["messages"][-1]["content"].split("number ")[1].split()[0])


def halved(request: dict[str, Any], full_when_even: bool) -> str:
    text = reference_text(request)
    return text if (number(request) % 2 == 0) == full_when_even else text[: len(text) // 2]


ANSWERS: dict[str, Callable[[dict[str, Any]], str]] = {
    "good": lambda r: halved(r, True),
    "twin": lambda r: halved(r, False),
    "copy": lambda r: halved(r, True),
    "poor": lambda r: "I am sorry, I cannot help with that request today.",
}


@pytest.fixture
def servers() -> Iterator[dict[str, FakeOpenAI]]:
    with ExitStack() as stack:
        made = {"reference": FakeOpenAI(answer=reference_text, model="gpt-4")}
        made |= {name: FakeOpenAI(answer=fn, model=name) for name, fn in ANSWERS.items()}
        yield {name: stack.enter_context(server) for name, server in made.items()}


def _project(pytester: pytest.Pytester, servers: dict[str, FakeOpenAI]) -> None:
    models = "\n".join(
        f"[tool.slam.models.{name}]\nprovider = 'openai'\nmodel = '{name}'\n"
        f"base_url = '{servers[name].base_url}'\n"
        for name in ANSWERS
    )
    ref = servers["reference"].base_url
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{ref}#gpt-4'\n\n{models}")
    pytester.makepyfile(test_catalogue=TESTS)


def _comparison(row: dict[str, Any], other: str) -> dict[str, Any]:
    return next(c for c in row["comparisons"] if c["b"] == other and c["metric"] == "equivalence")


def test_known_better_is_told_apart_and_equals_are_not(
    pytester: pytest.Pytester, servers: dict[str, FakeOpenAI]
) -> None:
    _project(pytester, servers)
    result = pytester.runpytest(f"--slm-models={','.join(ANSWERS)}", "--slm-record=new",
                                "--slm-report=report.json", "-p", "no:randomly")  # fmt: skip
    result.assert_outcomes(passed=QUESTIONS * len(ANSWERS))
    rows = {
        r["model"]: r for r in json.loads((pytester.path / "report.json").read_text())["models"]
    }
    good = rows["good"]
    assert good["equivalence_mean_low"] < good["equivalence_mean"] < good["equivalence_mean_high"]
    assert _comparison(good, "poor")["outcome"] == "better"
    assert _comparison(good, "poor")["diff"]["low"] > 0.3
    assert _comparison(good, "twin")["outcome"] == "cannot tell apart"
    assert _comparison(good, "copy")["outcome"] == "cannot tell apart"
    assert _comparison(good, "copy")["diff"]["mean"] == 0
    assert _comparison(rows["poor"], "good")["outcome"] == "worse"
    text = _flat(result.stdout.str())  # the table's notes wrap at the terminal width
    assert re.search(r"equivalence 95% interval \(over requests\): good 0\.\d\d-0\.\d\d;", text)
    assert re.search(
        r"paired: good better than poor on equivalence \(\+0\.\d{3} \[.* over 30 shared\)", text
    )
    assert "paired: good and twin: cannot tell apart on equivalence at this sample size" in text


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_gate_decides_on_the_lower_bound(
    pytester: pytest.Pytester, servers: dict[str, FakeOpenAI]
) -> None:
    _project(pytester, servers)
    gate = "\n[tool.slam.gate]\nmin_equivalence_lower = 0.5\n"
    toml = pytester.path / "pyproject.toml"
    toml.write_text(toml.read_text() + gate)
    result = pytester.runpytest("--slm-models=good,poor", "--slm-record=new")
    assert result.ret == 6  # tests passed, the gate failed
    text = _flat(result.stdout.str())
    assert re.search(r"poor: min_equivalence_lower: 0\.\d{3} is below the minimum 0\.500", text)
    assert "good: min_equivalence_lower" not in text
