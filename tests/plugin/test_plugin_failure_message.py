"""A test that fails on the product's own assertion carries pytest's crash line as its message.

Real pytest runs (pytester) of a product whose candidate (a FakeOpenAI on loopback) answers what
the product's assertion rejects: the JSON report's row and outcome say ``AssertionError: ...``,
serially and under xdist (the message is built on the worker and rides on the test report).
"""

from __future__ import annotations

import json

import pytest
from html_helpers import report_data
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.testing import FakeOpenAI

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm


def test_priority():
    answer = product.ask("What priority is a refund?")
    assert answer == "Priority: high", "the triage said " + answer


def test_refused():
    pytest.skip("no refund desk today")
"""


@pytest.mark.parametrize("dist", [[], ["-p", "xdist", "-n", "1"]], ids=["serial", "xdist"])
def test_the_products_assertion_text_is_in_the_failed_row(
    pytester: pytest.Pytester, dist: list[str]
) -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    with FakeOpenAI("Priority: low") as fake:
        write_pyproject(pytester, fake.base_url)
        result = pytester.runpytest_subprocess("--slm-report=report.json", "--slm-html=report.html",
                                               "-p", "no:cacheprovider", *dist)  # fmt: skip
    assert result.ret == 1, result.stdout.str()
    report = json.loads((pytester.path / "report.json").read_text())
    failed = [t for t in report["tests"] if t["outcome"] == "failed"]
    assert [t["test"] for t in failed] == ["test_product.py::test_priority"]
    message = failed[0]["message"]
    assert message.startswith("AssertionError: the triage said Priority: low"), message
    assert "\n" not in message  # the crash line, not the traceback
    (outcome,) = [o for o in report["outcomes"] if o["outcome"] == "failed"]
    assert outcome["message"] == message
    rows, _ = report_data((pytester.path / "report.html").read_text())
    assert [r[4] for r in rows["rows"] if r[2] == "failed"] == [message]  # the page's row too
    skipped = [t for t in report["tests"] if t["outcome"] == "skipped"]
    assert [t["message"] for t in skipped] == ["Skipped: no refund desk today"]
