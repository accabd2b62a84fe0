"""The golden plugin tests' project: a three-question product suite, its pyproject with the
reference by endpoint spec and the candidate ``mini``, and readers of what a run leaves."""

from __future__ import annotations

import collections
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from report_helpers import read_report
from slam_helpers import PRODUCT

from pytest_slam.testing import FakeOpenAI

QUESTIONS = ("How do I get a refund?", "Reset my password", "Error 500 since 9am")
SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    assert product.ask(question)
"""
GOLDEN = Path("__slam__/gpt-4")  # endpoint spec '...#gpt-4': kept under the model's name


def write_project(
    pytester: pytest.Pytester,
    reference: FakeOpenAI,
    candidate: FakeOpenAI,
    extra: str = "",
    key_env: str | None = None,
    retries: int = 2,
) -> None:
    """pyproject.toml: the reference by its endpoint spec (or, when it needs a key, declared as
    the model ``gpt-4`` with ``api_key_env``, as for a hosted API), the candidate ``mini`` selected
    there too, as a team commits it (so a node id printed by a run works as is)."""
    spec, table = f"{reference.base_url}#gpt-4", ""
    if key_env:
        spec = "gpt-4"
        table = (
            f'[tool.slam.models.gpt-4]\nbase_url = "{reference.base_url}"\n'
            f'api_key_env = "{key_env}"\n'
        )
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "{spec}"
reference_retries = {retries}
{extra}
[tool.slam.models.mini]
base_url = "{candidate.base_url}"
model = "gpt-4o-mini"
{table}""")  # fmt: skip


def make_suite(
    pytester: pytest.Pytester, reference: FakeOpenAI, candidate: FakeOpenAI
) -> pytest.Pytester:
    """The product and its three-question suite, ready to record."""
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    write_project(pytester, reference, candidate)
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def slam(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    """The ``slam`` command, run in the project folder as a user runs it."""
    argv = [sys.executable, "-m", "pytest_slam.cli", *args]
    return subprocess.run(
        argv, cwd=pytester.path, capture_output=True, text=True, timeout=patient(120)
    )


def golden_files(root: Path) -> dict[str, bytes]:
    """Every file under the golden folder, by relative path (temp files and locks included)."""
    folder = root / "__slam__"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def entries(path: Path) -> dict[str, Any]:
    return read_report(path)["entries"]


def by_test(report: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """Each test's outcome and the golden answers (key, text) it was compared with."""
    outcomes = read_report(report)["outcomes"]
    return {
        o["nodeid"]: (o["outcome"], [(p["key"], p["reference_text"]) for p in o["pairs"]])
        for o in outcomes
    }


def sent_to(fake: FakeOpenAI) -> collections.Counter[str]:
    """Each chat request ``fake`` was sent, by its last message."""
    return collections.Counter(
        r.json["messages"][-1]["content"]
        for r in fake.requests
        if r.path.endswith("/chat/completions") and r.json
    )
