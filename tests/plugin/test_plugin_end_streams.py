"""The end of a run reads its outcomes one at a time: no stage holds every outcome as a record.

At 5,000 tests the end of a run built every kept outcome as a record at once (2.7 KiB each) and
held them through the verdict, the scrub and the JSON report: the run's peak memory (issue 53).
Real pytest runs against a FakeOpenAI candidate; a conftest counts the live Outcome records when
the project's gate hook is called (the verdict is built, the scrub and the files are next), and
the report still holds every outcome.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, write_pyproject

from pytest_slam.testing import FakeOpenAI

CASES = 40
TESTS = f"""
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", range({CASES}))
def test_answers(n):
    assert product.ask(f"Question {{n}}: how do I reset my password?")
"""
CONFTEST = """
import gc, json
from pytest_slam.records import Outcome

def pytest_slam_gate(verdict, breaches):
    live = sum(1 for o in gc.get_objects() if type(o) is Outcome)
    with open("live.json", "w") as fh:
        json.dump({"live": live, "tests": sum(r.tests_run for r in verdict.models)}, fh)
"""


def test_the_end_of_a_run_holds_no_outcome_record_once_the_verdict_is_built(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(conftest=CONFTEST, product=PRODUCT, test_product=TESTS)
    with FakeOpenAI(answer="the candidate", model="gpt-4o-mini") as fake:
        write_pyproject(pytester, fake.base_url)
        pytester.runpytest("-p", "no:cacheprovider", "--slm-report=run.json").assert_outcomes(
            passed=CASES
        )
    seen = read_report(pytester.path / "live.json")
    assert seen["tests"] == CASES, seen  # the gate saw the whole run's verdict
    # the outcomes wait packed; the verdict's records were let go model by model
    assert seen["live"] == 0, seen
    report = read_report(pytester.path / "run.json")
    assert len(report["outcomes"]) == CASES
    assert {o["calls"][0]["text"] for o in report["outcomes"]} == {"the candidate"}
