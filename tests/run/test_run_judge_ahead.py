"""What a run's judge is asked ahead of a test (run/test/judge_ahead.py ``wanted``): the check's own
policy probed up to the judge, with real built-in scorers and no socket. The judge's messages
themselves are built by the judge scorer's own code; the plugin runs (tests/plugin/
test_plugin_judge_ahead.py) show the judge's server sees each exactly once."""

from __future__ import annotations

from pytest_slam.compare.judge import JudgeScorer
from pytest_slam.golden.keys import request_key
from pytest_slam.metrics.cost import Prices
from pytest_slam.records import Call, GoldenAnswer, GoldenRecord, ModelSpec
from pytest_slam.run.score.checks import Checker
from pytest_slam.run.score.judging import JudgeModel
from pytest_slam.run.test.judge_ahead import PairPlan, wanted
from pytest_slam.swap.router import TestContext

REQUEST = {"model": "gpt-4", "messages": [{"role": "user", "content": "Capital of France?"}]}
REFERENCE = "The capital of France is Paris."
CASCADE = {"by": "fuzzy", "at_least": 0.99, "fail_below": 0.01, "then": ["judge"]}


def _asked(equivalence: dict[str, object], candidate: str, tool_calls: object = None) -> list:
    checker = Checker(
        None, equivalence, Prices(), judge=JudgeModel(ModelSpec("grader", "openai", "gpt-4o"))
    )
    plan = checker.plans.for_module("tests/test_a.py", None)
    spec = ModelSpec("mini", "openai", "gpt-4o-mini")
    ctx = TestContext("tests/test_a.py::test_a[mini]", "test_a", "tests/test_a.py", spec)
    rec = GoldenRecord(request_key(REQUEST), REQUEST, [GoldenAnswer(text=REFERENCE)])
    call = Call("mini", "candidate", REQUEST, text=candidate, tool_calls=tool_calls)  # type: ignore[arg-type]
    return list(wanted(checker, PairPlan(plan, ctx, rec), call))


def test_an_undecided_pair_is_wanted_by_the_cascade_s_judge_with_the_texts_the_check_gives() -> (
    None
):
    (want,) = _asked(CASCADE, "Paris, I believe.")
    assert isinstance(want.scorer, JudgeScorer) and want.scorer.mode == "grade"
    assert (want.candidate, want.reference) == ("Paris, I believe.", REFERENCE)


def test_pairs_the_policy_decides_before_the_judge_want_nothing() -> None:
    assert _asked(CASCADE, REFERENCE) == []  # identical: exact, certain
    assert _asked(CASCADE, "   ") == []  # empty: different, certain
    decided = {**CASCADE, "at_least": 0.1, "fail_below": 0.05}
    assert _asked(decided, "Paris, I believe.") == []  # the bands decide it


def test_the_judge_as_the_scorer_is_wanted_with_its_own_mode() -> None:
    (want,) = _asked({"by": "judge", "mode": "pairwise"}, "Paris.")
    assert isinstance(want.scorer, JudgeScorer) and want.scorer.mode == "pairwise"
    assert want.candidate == "Paris."


def test_what_cannot_be_known_off_the_test_s_thread_is_left_to_the_test() -> None:
    # a stored review before the judge is read by the test itself
    assert _asked({**CASCADE, "then": ["review", "judge"]}, "Paris.") == []
    # the judge as the scorer, on an answer with tool calls: the check lowers it with their score
    tool = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]
    assert _asked({"by": "judge"}, "Paris.", tool) == []


def test_a_judge_request_holding_a_lone_surrogate_has_its_key() -> None:
    """A candidate may send a lone surrogate; the judge request quoting it is keyed (``take`` in
    the test's thread) as the live call would send it, not a UnicodeEncodeError out of the check."""
    from pytest_slam.run.test.judge_ahead import request_key as judge_request_key

    body = {"model": "grader", "messages": [{"role": "user", "content": "answer: \ud800!"}]}
    key = judge_request_key(body)
    assert len(key) == 64 and key != judge_request_key({**body, "model": "other"})


def test_a_judge_request_a_check_has_taken_is_never_asked_ahead_again() -> None:
    """Two planned pairs with the same judge request (a repeated test, a shared golden entry):
    once a check has taken the answer asked ahead, the same request is not asked ahead again."""
    import pytest

    from pytest_slam.run.score.judging import judge_body
    from pytest_slam.run.test.judge_ahead import JudgeAhead, _Live
    from pytest_slam.swap.limits import Limiter
    from pytest_slam.testing import FakeOpenAI

    messages = [{"role": "user", "content": "Grade it: Paris."}]
    with FakeOpenAI("Grade: 9") as server:
        spec = ModelSpec("grader", "openai", "gpt-4o", base_urls=[server.base_url])
        judge = JudgeModel(spec)
        ahead = JudgeAhead(Checker(None, CASCADE, Prices(), judge=judge), judge, Limiter("g", 4))
        assert ahead._ask(0, messages) == "Grade: 9"
        taken = ahead.take(judge_body(spec, messages))
        assert taken is not None and taken.fetched_ahead
        with pytest.raises(_Live):  # left to the checks: a check took it already
            ahead._ask(0, messages)
        ahead.close()
        assert len(server.requests) == 1


class _Faulty(Checker):
    """A check whose scoring breaks with a fault of its own (not a scorer's error)."""

    def score_choice(self, *args: object, **kwargs: object) -> object:  # type: ignore[override]
        raise RuntimeError("the probe broke")


def test_a_pair_the_probe_cannot_work_out_is_left_to_its_test_and_said() -> None:
    """A fault while working a pair out ahead is no silent skip: counted, the first named in the
    summary, and the pair's test asks the judge itself."""
    from pytest_slam.run.test.judge_ahead import JudgeAhead
    from pytest_slam.swap.limits import Limiter

    judge = JudgeModel(ModelSpec("grader", "openai", "gpt-4o"))
    checker = _Faulty(None, CASCADE, Prices(), judge=judge)
    plan = checker.plans.for_module("tests/test_a.py", None)
    spec = ModelSpec("mini", "openai", "gpt-4o-mini")
    ctx = TestContext("tests/test_a.py::test_a[mini]", "test_a", "tests/test_a.py", spec)
    rec = GoldenRecord(request_key(REQUEST), REQUEST, [GoldenAnswer(text=REFERENCE)])
    faults: list[Exception] = []
    call = Call("mini", "candidate", REQUEST, text="Paris, I believe.")
    assert list(wanted(checker, PairPlan(plan, ctx, rec), call, faults)) == []
    assert [str(f) for f in faults] == ["the probe broke"]
    ahead = JudgeAhead(checker, judge, Limiter("grader", 4))
    ahead._fault(faults[0])
    assert ahead.lines() == [
        "judge grader: 1 pair(s) not worked out ahead (RuntimeError: the probe broke); "
        "their tests asked the judge themselves"
    ]
