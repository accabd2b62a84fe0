"""A finished test keeps one copy of its calls: its outcome on the report, not its context too.

The run's records stay alive until its end, and every full collection of the garbage collector
walks them: a test's context (its calls, locks, flights) and its verdict (pairs, scores) leave its
item once its teardown is reported. Real pytest runs against a FakeOpenAI candidate; a conftest
looks at each item after its last report, and at the outcomes the run reported.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.testing import FakeOpenAI

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.fixture
def breaks_at_teardown():
    yield
    raise RuntimeError("teardown broke")

def test_answers():
    assert product.ask("How do I reset my password?")

def test_teardown_fails(breaks_at_teardown):
    assert product.ask("How do I change my email?")
"""
CONFTEST = """
import json, pytest
from pytest_slam.run.start.session import VERDICT
from pytest_slam.run.score.verdict import CTX

SEEN = {}

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    yield
    SEEN[item.nodeid] = [CTX in item.stash, VERDICT in item.stash]

def pytest_sessionfinish(session):
    with open("kept.json", "w") as fh:
        json.dump(SEEN, fh)
"""


def test_a_finished_test_keeps_its_outcome_and_leaves_no_context(
    pytester: pytest.Pytester,
) -> None:
    with FakeOpenAI(answer="the candidate", model="gpt-4o-mini") as fake:
        write_pyproject(pytester, fake.base_url)
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        pytester.makeconftest(CONFTEST)
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=run.json")
    result.assert_outcomes(passed=2, errors=1)
    kept = read_report(pytester.path / "kept.json")
    assert kept and all(v == [False, False] for v in kept.values()), kept
    report = read_report(pytester.path / "run.json")
    outcomes = {o["nodeid"].split("::")[1]: o for o in report["outcomes"]}
    assert outcomes["test_answers[mini]"]["outcome"] == "passed"
    assert outcomes["test_answers[mini]"]["calls"][0]["text"] == "the candidate"
    # the failed teardown's outcome was built before its context left: its call is there
    broke = outcomes["test_teardown_fails[mini]"]
    assert broke["outcome"] == "error", broke
    assert [c["text"] for c in broke["calls"]] == ["the candidate"]
