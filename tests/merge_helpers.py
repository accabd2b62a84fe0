"""A sharded product suite for the report-merge and CI-template tests: three modules, the
reference and two candidates by URL, a gate that "mini" fails and "twin" passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from slam_helpers import PRODUCT

from pytest_slam.testing import FakeOpenAI

MODULES = ("alpha", "beta", "gamma")
SUITE = """
import os, pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", range({cases}))
def test_case(n):
    if os.environ.get("SLAM_INTERRUPT_AT") == "{module}-" + str(n):
        raise KeyboardInterrupt  # Ctrl-C, as a CI job cancelled mid-shard
    assert product.ask("{module} question " + str(n))
"""
# The two figures the gate checks fail for "mini" (it answers in its own words), pass for "twin".
GATE = "[tool.slam.gate]\nmin_mean_equivalence = 0.9\n"
ROW_FIELDS = (
    "tests_passed", "tests_failed", "tests_errored", "tests_skipped", "pass_rate", "calls",
    "pairs", "missing_golden", "equivalence_mean", "equivalence_worst", "equivalence_mean_low",
    "equivalence_mean_high", "pass_rate_low", "pass_rate_high", "pairs_equivalent",
    "pairs_different", "pairs_undecided", "pairs_no_verdict", "gate",
)  # fmt: skip


def project(
    pytester: pytest.Pytester, reference: Any, cands: tuple[FakeOpenAI, ...], cases: int
) -> None:
    pytester.makepyfile(product=PRODUCT)
    for module in MODULES:
        pytester.makepyfile(**{f"test_{module}": SUITE.format(cases=cases, module=module)})
    names = ["mini", "twin"][: len(cands)]
    tables = "".join(
        f'[tool.slam.models.{n}]\nbase_url = "{c.base_url}"\nmodel = "{n}"\n'
        for n, c in zip(names, cands, strict=True)
    )
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = {names!r}
reference = "{reference.base_url}#gpt-4"

{GATE}
{tables}""")  # fmt: skip


def rows(path: Path) -> dict[str, dict[str, Any]]:
    report = json.loads(path.read_text(encoding="utf-8"))
    return {r["model"]: {k: r[k] for k in ROW_FIELDS} for r in report["models"]}
