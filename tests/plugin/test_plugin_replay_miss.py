"""A replay miss is found before the candidate is asked (issue 29): the golden lookup needs only the
request, so a call with no golden answer is refused at once with the command that records it, and
the candidate's server never hears of it.

Real pytest runs (pytester); the candidate is a loopback FakeOpenAI whose request log is read.
"""

from __future__ import annotations

import pytest
from report_helpers import read_report
from slam_helpers import MINI_PYPROJECT, SLAM

from pytest_slam.testing import FakeOpenAI

ASKS = """
import openai, pytest

pytestmark = pytest.mark.slm

def test_refund():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "How do I get a refund?"}])
    assert r.choices[0].message.content
"""
SWALLOWS = """
import openai, pytest

pytestmark = pytest.mark.slm

def test_refund_with_a_fallback():
    try:
        openai.OpenAI().chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "How do I get a refund?"}])
    except openai.APIError:
        pass  # the product falls back on a canned answer
"""


@pytest.mark.parametrize("suite", [ASKS, SWALLOWS], ids=["raises", "swallowed"])
def test_a_replay_miss_fails_with_the_record_command_and_the_candidate_is_never_asked(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, suite: str
) -> None:
    pytester.makepyfile(test_refund=suite)
    with FakeOpenAI("mini's answer") as mini:
        pytester.makefile(
            ".toml",
            pyproject=MINI_PYPROJECT.format(reference=fake_gpt4.base_url, candidate=mini.base_url),
        )
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
        asked = len(mini.requests)
    result.assert_outcomes(failed=1)
    assert asked == 0  # found before the candidate's call
    assert fake_gpt4.requests == []  # replay never asks the real reference
    hint = "Record it from the real reference with: pytest --slm-record=new"
    result.stdout.fnmatch_lines([f"*pytest-slam: call 1: no golden answer of reference*{hint}*"])
    (outcome,) = read_report(pytester.path / "r.json")["outcomes"]
    assert hint in outcome["message"] and outcome["calls"] == []
    assert outcome["pairs"][0]["missing"]
    assert "call(s) to mini failed" not in outcome["message"]  # no fault of the candidate's
    # a refused call has no answer: its pair points at no call, and rescore takes the report as is
    rescored = pytester.run(*SLAM, "rescore", "r.json", "-o", "again.json")
    assert rescored.ret == 1, rescored.stderr.str()  # the test still fails there, as in the run
    (again,) = read_report(pytester.path / "again.json")["outcomes"]
    assert again["outcome"] == "failed" and again["pairs"][0]["missing"]


def test_a_test_without_golden_pairing_is_not_refused(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """``@pytest.mark.slm(reference=False)`` pairs nothing: its calls go to the candidate."""
    pytester.makepyfile(
        test_refund=ASKS.replace("pytest.mark.slm\n", "pytest.mark.slm(reference=False)\n")
    )
    with FakeOpenAI("mini's answer") as mini:
        pytester.makefile(
            ".toml",
            pyproject=MINI_PYPROJECT.format(reference=fake_gpt4.base_url, candidate=mini.base_url),
        )
        result = pytester.runpytest("-p", "no:cacheprovider")
        asked = len(mini.requests)
    result.assert_outcomes(passed=1)
    assert asked == 1


PDB_SEES = """
import json


def pytest_exception_interact(node, call, report):
    # What --pdb would debug, and what the report says: written for the test to read.
    with open("interact.json", "w") as fh:
        json.dump({"exception": type(call.excinfo.value).__name__,
                   "longrepr": str(report.longrepr)}, fh)
"""


def test_a_miss_is_reported_in_its_one_line_and_debuggers_still_get_the_products_exception(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """The one-line failure is what pytest reports, built without formatting the product's
    traceback through the SDK (outcomes.shortened); the product's own exception is put back for
    the hooks that come after the report (``--pdb``), and its line stays in the outcome."""
    pytester.makepyfile(test_refund=ASKS)
    pytester.makeconftest(PDB_SEES)
    with FakeOpenAI("mini's answer") as mini:
        pytester.makefile(
            ".toml",
            pyproject=MINI_PYPROJECT.format(reference=fake_gpt4.base_url, candidate=mini.base_url),
        )
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-report=r.json")
    result.assert_outcomes(failed=1)
    seen = read_report(pytester.path / "interact.json")
    assert seen["exception"] == "NotFoundError"  # the product's, not the one-line stand-in
    assert seen["longrepr"].startswith("pytest-slam: call 1: no golden answer of reference")
    assert "\n" not in seen["longrepr"]
    assert "completions.py" not in result.stdout.str()  # no SDK frame was shown
    (outcome,) = read_report(pytester.path / "r.json")["outcomes"]
    assert "openai.NotFoundError: Error code: 404" in outcome["message"]


# The same product, which calls pytest.xfail itself after the miss instead of falling back.
XFAILS = SWALLOWS.replace("test_refund_with_a_fallback", "test_refund_known_to_fail").replace(
    "pass  # the product falls back on a canned answer",
    'pytest.xfail("the refund flow is known broken")',
)


def test_a_test_that_xfails_itself_after_a_miss_stays_xfailed(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """Only the product's own exception gives way to the one-line failure: pytest's outcome
    exceptions (an imperative xfail, a skip) keep deciding the test's outcome."""
    pytester.makepyfile(test_refund=XFAILS)
    with FakeOpenAI("mini's answer") as mini:
        pytester.makefile(
            ".toml",
            pyproject=MINI_PYPROJECT.format(reference=fake_gpt4.base_url, candidate=mini.base_url),
        )
        result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(xfailed=1)


def test_a_run_with_no_goldens_at_all_hints_at_running_without_a_reference(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI
) -> None:
    """A project with no golden file yet: besides the record command, the miss names
    --slm-reference=none, which runs the suite for latency and cost with nothing recorded."""
    pytester.makepyfile(test_refund=ASKS)
    with FakeOpenAI("mini's answer") as mini:
        pytester.makefile(
            ".toml",
            pyproject=MINI_PYPROJECT.format(reference=fake_gpt4.base_url, candidate=mini.base_url),
        )
        result = pytester.runpytest("-p", "no:cacheprovider")
        result.assert_outcomes(failed=1)
        out = " ".join(result.stdout.str().split())
        assert "No golden answer is recorded in this project yet" in out
        assert "--slm-reference=none" in out
        recorded = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new")
        recorded.assert_outcomes(passed=1)
        pytester.makepyfile(test_other=ASKS.replace("How do I get a refund?", "Other?"))
        again = pytester.runpytest("-p", "no:cacheprovider", "test_other.py")
    again.assert_outcomes(failed=1)  # a miss in a project that has goldens: no such hint
    assert "--slm-reference=none" not in again.stdout.str()
