"""The JSON report's schema: generated from the report's types, checked in, and true of real reports.

A real report is written by a real pytest run (pytester) of a small opted-in suite whose candidate
and reference are a FakeOpenAI server on loopback, then validated against the checked-in schema.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import report_helpers as synth
from report_helpers import read_report
from slam_helpers import PRODUCT, REPORTED_TESTS

from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import report_dict
from pytest_slam.report.schema import SCHEMA_PATH, schema_text

jsonschema = pytest.importorskip("jsonschema")

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "{url}#gpt-4"

[tool.slam.models.mini]
base_url = "{url}"
model = "gpt-4o-mini"
"""


def validator() -> Any:
    schema = read_report(SCHEMA_PATH)
    return jsonschema.Draft202012Validator(schema)


def test_checked_in_schema_is_the_generated_one() -> None:
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), (
        "pytest_slam/report/report.schema.json is out of date; regenerate it with "
        "`slam report schema > pytest_slam/report/report.schema.json`"
    )


def test_the_schema_is_a_valid_json_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(json.loads(schema_text()))


def test_a_real_report_validates(pytester: pytest.Pytester, fake_gpt4: Any) -> None:
    """Record the goldens, then a compared run writes the report the schema must describe."""
    pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
    pytester.makefile(".toml", pyproject=PYPROJECT.format(url=fake_gpt4.base_url))
    recorded = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new")
    assert recorded.ret == 0, recorded.stdout.str()
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=slam.json")
    assert result.ret == 0, result.stdout.str()
    report = read_report(pytester.path / "slam.json")
    assert report["outcomes"][0]["calls"] and report["outcomes"][0]["pairs"][0]["scores"]
    validator().validate(report)


@pytest.fixture
def synthetic() -> dict[str, Any]:
    """A report of the synthetic run (test_report_helpers): every kind of row and outcome."""
    outcomes = synth.outcomes()
    return report_dict(aggregate(outcomes, synth.run_info()), outcomes)


def test_the_synthetic_report_validates(synthetic: dict[str, Any]) -> None:
    validator().validate(json.loads(json.dumps(synthetic)))


@pytest.mark.parametrize(
    ("where", "wrong"),
    [
        (("models", 0, "tests_passed"), "three"),
        (("outcomes", "scored", "calls", 0, "ttft_ms"), "fast"),
        (("outcomes", "scored", "pairs", 0, "scores", 0, "value"), None),
        (("run",), []),
        (("outcomes", "scored", "calls", 0, "cut_by_cap"), "no"),  # a derived key is checked too
        (("run", "models", 0, "provider"), 3),
        (("models", 0, "distributions", "e2e_ms", "p95"), "slow"),
        (("models", 0, "comparisons", 0, "diff", "n"), "ten"),
        (("models", 0, "comparisons", 0, "text"), None),  # derived: describe()
        (("gate",), {"passed": "yes", "configured": True}),
        (("gate",), {"passed": False, "configured": True, "models": [{"model": "m"}]}),
    ],
)
def test_a_wrong_type_fails_validation(
    synthetic: dict[str, Any], where: tuple[str | int, ...], wrong: object
) -> None:
    broken = copy.deepcopy(synthetic)
    scored = next(i for i, o in enumerate(broken["outcomes"]) if o["pairs"] and o["calls"])
    node: Any = broken
    for step in (scored if step == "scored" else step for step in where[:-1]):
        node = node[step]
    node[where[-1]] = wrong
    with pytest.raises(jsonschema.ValidationError):
        validator().validate(broken)
