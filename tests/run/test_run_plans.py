"""Each test's scoring plan (run/score/plans.py), built from real built-in scorers without a socket: one
plan per distinct configuration, the scopes narrowest first, and a plan that cannot score saying
why (the checks make that the test's problem)."""

from __future__ import annotations

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.run.score.judging import JudgeModel
from pytest_slam.run.score.plans import NO_CASCADE_JUDGE, NO_JUDGE, Plans

JUDGE = JudgeModel(ModelSpec("grader", "openai", "gpt-4o"))  # never asked: plans only build


def test_tests_asking_for_the_same_configuration_share_one_plan_and_scorer() -> None:
    plans = Plans({"by": "fuzzy", "at_least": 0.8})
    first = plans.for_module("tests/test_a.py", None)
    second = plans.for_module("tests/test_b.py", {"at_least": 0.8})  # the same, said again
    other = plans.for_module("tests/test_a.py", {"at_least": 0.9})
    assert first is second and first.scorer is not None and first.error is None
    assert other is not first and (first.at_least, other.at_least) == (0.8, 0.9)
    assert len(plans.built) == 2


def test_a_module_s_unmarked_tests_find_their_plan_once_and_a_mark_still_counts() -> None:
    plans = Plans({"by": "fuzzy", "modules": {"tests/test_b.py": {"at_least": 0.9}}})
    a = plans.for_module("tests/test_a.py", None)
    assert plans.for_module("tests/test_a.py", None) is a and plans.unmarked == {
        "tests/test_a.py": a
    }
    b = plans.for_module("tests/test_b.py", None)  # its module's own table, not test_a's plan
    assert b is not a and b.at_least == 0.9
    marked = plans.for_module("tests/test_a.py", {"at_least": 0.5})
    assert marked is not a and marked.at_least == 0.5
    assert plans.for_module("tests/test_a.py", None) is a


def test_no_scorer_named_is_the_default_one_with_the_structural_scorer_for_json() -> None:
    plan = Plans({}).for_module("tests/test_a.py", None)
    assert (plan.by, plan.auto, plan.error) == ("fuzzy", True, None)
    assert plan.json is not None and plan.tools is not None
    named = Plans({"by": " Fuzzy "}).for_module("tests/test_a.py", None)
    assert (named.by, named.auto, named.json) == ("fuzzy", False, None)  # spelled as registered


def test_the_module_table_and_the_mark_scope_narrowest_first() -> None:
    equivalence = {
        "by": "fuzzy",
        "at_least": 0.5,
        "modules": {"tests/test_a.py": {"at_least": 0.7}},
    }
    plans = Plans(equivalence)
    assert plans.for_module("tests/test_a.py", None).at_least == 0.7
    assert plans.for_module("tests/test_b.py", None).at_least == 0.5
    assert plans.for_module("tests/test_a.py", {"at_least": 0.95}).at_least == 0.95


@pytest.mark.parametrize(
    ("config", "error"),
    [
        ({"by": "judge"}, NO_JUDGE.format(by="judge")),
        ({"by": "fuzzy", "at_least": 0.8, "then": ["judge"]}, NO_CASCADE_JUDGE),
        (
            {"by": "fuzzy", "at_least": 0.8, "then": ["oracle"]},
            'then = [\'oracle\'] must list "judge" and/or "review", cheapest first',
        ),
    ],
)
def test_a_plan_that_cannot_score_says_why(config: dict[str, object], error: str) -> None:
    plan = Plans(config).for_module("tests/test_a.py", None)
    assert (plan.error, plan.scorer) == (error, None)


def test_an_unknown_scorer_and_bad_bands_are_errors_of_the_plan() -> None:
    unknown = Plans({"by": "no-such-scorer"}).for_module("tests/test_a.py", None)
    assert unknown.scorer is None and "no-such-scorer" in str(unknown.error)
    crossed = Plans({"by": "fuzzy", "at_least": 0.5, "fail_below": 0.9})
    plan = crossed.for_module("tests/test_a.py", None)
    assert plan.scorer is None and plan.error is not None


def test_with_a_judge_model_the_judge_scorer_and_the_cascade_are_built() -> None:
    judged = Plans({"by": "judge"}, judge=JUDGE).for_module("tests/test_a.py", None)
    assert judged.error is None and judged.scorer is not None
    cascade = Plans({"by": "fuzzy", "at_least": 0.8, "then": ["judge", "review"]}, judge=JUDGE)
    plan = cascade.for_module("tests/test_a.py", None)
    assert plan.error is None and plan.then == ["judge", "review"] and plan.judge is not None
