"""pytest-slam's own hooks (run/inputs/hookspecs.py), implemented in a project's conftest.py: real runs.

The candidate and the GPT-4 reference are FakeOpenAI servers on loopback; each run records the
reference's answers as it goes (``--slm-record=new``), so every swapped call is paired and scored.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from slam_helpers import MINI_PYPROJECT, PRODUCT, REPORTED_TESTS

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

OTHER = """
[tool.slam.models.other]
base_url = "{candidate}"
model = "gpt-4o-mini"
"""


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpt4: Any) -> Any:
    with FakeOpenAI(lambda r: "GPT-4 says: " + r["messages"][-1]["content"]) as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        text = (MINI_PYPROJECT + OTHER).format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url
        )
        pytester.makefile(".toml", pyproject=text)
        yield pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new", *args)


def test_models_hook_edits_the_candidate_list(project: pytest.Pytester) -> None:
    project.makeconftest("""
def pytest_slam_models(config, models):
    models.append("other")
""")
    result = run(project, "-v")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*test_refund?mini? PASSED*", "*test_refund?other? PASSED*"])


def test_pair_scored_hook_sees_each_scored_pair(project: pytest.Pytester) -> None:
    project.makeconftest("""
import json

def pytest_slam_pair_scored(item, model, pair):
    with open("pairs.jsonl", "a") as fh:
        fh.write(json.dumps([item.nodeid, model, [s.scorer for s in pair.scores]]) + "\\n")
""")
    run(project).assert_outcomes(passed=2)
    lines = (project.path / "pairs.jsonl").read_text().splitlines()
    assert sorted(json.loads(line) for line in lines) == [
        ["test_product.py::test_password[mini]", "mini", ["fuzzy"]],
        ["test_product.py::test_refund[mini]", "mini", ["fuzzy"]],
    ]


def test_report_hook_adds_to_the_json_document(project: pytest.Pytester) -> None:
    project.makeconftest("""
def pytest_slam_report(document):
    document["build"] = {"id": "ci-1182", "models": [m["model"] for m in document["models"]]}
    document["outcomes"][0]["owner"] = "team-support"
    document["tests"][0]["owner"] = "team-support"
""")
    result = run(project, "--slm-report=slam.json")
    assert result.ret == 0
    document = json.loads((project.path / "slam.json").read_text())
    assert document["build"] == {"id": "ci-1182", "models": ["mini"]}
    # a key of the hook's own on an outcome or a row is written, though the fields at their
    # default are left out of both
    assert document["outcomes"][0]["owner"] == document["tests"][0]["owner"] == "team-support"
    assert "error" not in document["outcomes"][0]["calls"][0]


def test_gate_hook_fails_the_gate_with_a_project_rule(project: pytest.Pytester) -> None:
    project.makeconftest("""
def pytest_slam_gate(verdict, breaches):
    for row in verdict.models:
        if row.tests_run < 3:
            breaches.append(f"{row.model}: our rule wants 3 tests, {row.tests_run} ran")
""")
    result = run(project, "--slm-report=slam.json")
    result.assert_outcomes(passed=2)
    assert result.ret == EXIT_GATE_FAILED
    result.stdout.fnmatch_lines(["*mini: our rule wants 3 tests, 2 ran*", "*gate: FAIL*"])
    gate = json.loads((project.path / "slam.json").read_text())["gate"]
    assert gate["passed"] is False
    assert gate["session_breaches"] == ["mini: our rule wants 3 tests, 2 ran"]
