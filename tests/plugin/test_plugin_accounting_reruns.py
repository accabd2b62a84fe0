"""One final outcome per test per model: reruns and teardown errors never count a test twice.

Real pytest runs (pytester) with pytest-rerunfailures' ``--reruns``; the candidate is a FakeOpenAI
server on loopback whose answer makes one test fail every time (a deterministic failure).
"""

from __future__ import annotations

from typing import Any

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.testing import FakeOpenAI

pytest.importorskip(
    "pytest_rerunfailures", reason="pip install -e '.[test]' (pytest-rerunfailures)"
)

TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_passes():
    assert product.ask("Say hello")

def test_fails_every_time():
    assert product.ask("Say goodbye") == "goodbye"

@pytest.fixture
def leaky():
    yield
    raise RuntimeError("mocked but not requested")  # as pytest-httpx says in its teardown

def test_teardown_error(leaky):
    assert product.ask("Say hi")
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Any:
    with FakeOpenAI(answer="hello", model="gpt-4o-mini") as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=TESTS)
        write_pyproject(pytester, candidate.base_url)
        yield pytester


def report_of(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, Any]]:
    path = pytester.path / "r.json"
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "rerunfailures", f"--slm-report={path}", *args
    )  # rerunfailures: the suite's conftest leaves it out of inner runs (it leaks a socket)
    return result, read_report(path)


def counts(report: dict[str, Any]) -> tuple[Any, ...]:
    row = report["models"][0]
    return row["tests_passed"], row["tests_failed"], row["tests_errored"], row["pass_rate"]


def test_reruns_give_the_pass_rate_of_a_run_without_them(project: pytest.Pytester) -> None:
    plain, once = report_of(project)
    plain.assert_outcomes(passed=2, failed=1, errors=1)
    rerun, again = report_of(project, "--reruns", "2")
    # pytest's own line counts the teardown test's passing call once per attempt: "4 passed"
    assert rerun.parseoutcomes() == {"passed": 4, "failed": 1, "errors": 1, "rerun": 4}
    assert counts(again) == counts(once) == (1, 1, 1, pytest.approx(1 / 3))
    assert [o["nodeid"] for o in again["outcomes"]] == [o["nodeid"] for o in once["outcomes"]]
    assert [t["runs"] for t in again["tests"]] == [1, 1, 1]


def test_a_teardown_error_after_a_passing_call_lists_the_test_once(
    project: pytest.Pytester,
) -> None:
    result, report = report_of(project, "-n", "2")
    result.assert_outcomes(passed=2, failed=1, errors=1)
    outcomes = [o for o in report["outcomes"] if "teardown" in o["nodeid"]]
    assert [o["outcome"] for o in outcomes] == ["error"]
    row = next(t for t in report["tests"] if "teardown" in t["test"])
    assert (row["outcome"], row["runs"], row["calls"]) == ("error", 1, 1)
