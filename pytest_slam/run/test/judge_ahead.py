"""A run's judge pairs asked ahead of their tests, so a judge with latency is not asked one pair at
a time after each test (issue 41).

When a candidate's answer has been fetched ahead (swap/ahead.py), the test's pair is known: its
scoring plan (run/score/plans.py, resolved in the planning thread), the golden record's answer and the
request's question. The check's own verdict policy (``policy.decide_pair``) is run on it with a
step function (``policy.steps``) driven up to where the policy would ask the judge, as
``slam calibrate --evaluate`` drives it for its pairs; the judge scorer of the plan then runs on a copy
whose ``complete`` asks the judge here, so the judge's messages are built by the very code the
test's check runs (compare/judge.py: grade or both pairwise orders, the reminder after an
unreadable answer). Each answer is kept under its exact request body; when the check asks
``JudgeModel.complete`` with that body, it takes the call (marked ``fetched_ahead``) and decides
and caches the verdict itself, as today. Anything else is asked live, and a request asked live is
never asked ahead after it: each judge request is asked at most once. A cached verdict (the golden
record's ``judge`` dict, the run's memory) is read first and never asked again. What no test takes
is counted unused and never reaches a golden file: the background only asks, it writes nothing.

Where the judge request cannot be known ahead with certainty, its test asks live: a scorer that is
not plain Python with no state (``semantic`` holds a model, a plugged scorer is someone else's
code), a judge scorer as ``by`` on an answer with tool calls, a stored review before the judge in
the cascade (read in the test's thread), a judge scorer that is not this package's.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pytest

from pytest_slam.compare.about import JUDGE, describe, stateless
from pytest_slam.compare.policy import Given, Need, Policy, steps
from pytest_slam.compare.scorer import ScorerError
from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, Call, GoldenRecord, ModelSpec, Pair
from pytest_slam.run.score.checks import (
    Checker,
    Choice,
    asks_a_model,
    choices_of,
    judged_texts,
    question_of,
)
from pytest_slam.run.score.judging import JudgeModel, judge_body, judge_target
from pytest_slam.run.score.scoring import ScoringPlan
from pytest_slam.run.test.optin import base_test_id, module_of
from pytest_slam.swap.broker import Job, Server, patience, waited
from pytest_slam.swap.chat import forward_chat
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.router import TestContext
from pytest_slam.util.textcodec import dumps

if TYPE_CHECKING:
    from pytest_slam.swap.ahead import Ahead, Planned


@dataclass(frozen=True)
class Wanted:
    """What the policy will ask the judge: this judge scorer, about these texts."""

    scorer: object
    candidate: str
    reference: str


class _Live(SlamError, kind="judge"):
    """This pair's judge request cannot be known for certain ahead: its test asks it live."""


@dataclass(frozen=True)
class PairPlan:
    """A test's pair as its check will see it: the plan, its context and the golden record."""

    plan: ScoringPlan
    ctx: TestContext
    rec: GoldenRecord


def _probe(
    checker: Checker,
    pair: PairPlan,
    call: Call,
    sides: tuple[Choice, Choice],
    policy: Policy,
    texts_only: bool,
) -> Wanted | None:
    """One choice decided as the check decides it (``policy.steps``, each need answered as
    ``checks._RunEvidence`` answers it), up to where the policy asks the judge: what it will ask,
    or None when the cheaper rungs decide it or the request cannot be known ahead for certain
    (its test asks live)."""
    from pytest_slam.review.pairs import answer_text

    plan, (cand, ref) = pair.plan, sides
    run = steps(policy, answer_text(*cand), answer_text(*ref), texts_only)
    given: Given = None
    try:
        while True:
            need = run.send(given)
            if need is Need.SCORE:
                if asks_a_model(plan):  # by = judge: scored from checks._score_text
                    if cand[1] or ref[1] or describe(plan.scorer).evidence != JUDGE:
                        return None  # with tool calls the check lowers it with the tool score
                    return Wanted(plan.scorer, cand[0], ref[0])
                if not stateless(plan.scorer):
                    return None  # a scorer that may keep state or a model: only its test scores
                given = checker.score_choice(plan, pair.ctx, call, pair.rec, cand, ref)
            elif need is Need.JUDGE:
                if plan.judge is None:
                    given = None
                    continue
                return Wanted(plan.judge, answer_text(*cand), answer_text(*ref))
            elif need is Need.REVIEW:
                return None  # a stored review before the judge: read in the test's thread
            else:
                given = None
    except StopIteration:
        return None  # decided before the judge


def wanted(
    checker: Checker, pair: PairPlan, call: Call, faults: list[Exception] | None = None
) -> Iterator[Wanted]:
    """What the judge will be asked about this answer: each choice decided as the check decides it
    (``Checker._score_pair``), up to where the policy asks the judge. A choice that raised is left
    to its test; an exception other than a scorer's error goes on ``faults``."""

    rec, plan = pair.rec, pair.plan
    if plan.error is not None or plan.scorer is None or plan.tools is None or not rec.answers:
        return
    ans = rec.answers[0]
    side = Pair(0, rec.key, "", ans.text, reference_tool_calls=ans.tool_calls)
    cands, refs = choices_of(call, side, rec)
    policy = checker.policy_of(plan, pair.ctx.module)
    for cand, ref in itertools.zip_longest(cands, refs):
        if cand is None or ref is None:
            continue
        texts_only = not (cand[1] or ref[1])
        try:
            want = _probe(checker, pair, call, (cand, ref), policy, texts_only)
        except ScorerError:  # left to the test, which meets a scorer's error itself
            continue
        except Exception as exc:  # a fault of the probe's: its test is judged as before
            if faults is not None:
                faults.append(exc)
            continue
        if want is not None:
            yield want


class _Asked(Future[Call | None]):
    """One judge request asked ahead, under its exact body: its call (None: stopped before it
    was sent), which its test's check waits for as any claim of the broker's (``waited``)."""

    def __init__(self, order: int) -> None:
        super().__init__()
        self.set_running_or_notify_cancel()  # asked from here on: never cancelled
        self.order = order  # its test's place in the run
        self.in_flight = 0
        self.let_go = False  # its test passed before taking it: unused


class _ReadOnly:
    """The pair's verdict cache as the check reads it (``GoldenJudgeCache.get``); a verdict is
    written only by the test's own check."""

    def __init__(self, rec: GoldenRecord, checker: Checker) -> None:
        self.rec, self.checker = rec, checker

    def get(self, key: str) -> dict[str, JSON] | None:
        memory = self.checker.judge_memory
        return self.rec.judge.get(key) or (memory.get(key) if memory is not None else None)

    def put(self, key: str, verdict: dict[str, JSON]) -> None:
        return None


def request_key(body: dict[str, JSON]) -> str:
    """The exact judge request, as the digest of its one canonical text."""
    text = dumps(body, sort_keys=True, hidden=False)  # a lone surrogate a model sent encodes too
    return hashlib.sha256(text.encode()).hexdigest()


class JudgeAhead:
    """The judge's requests asked ahead on the judge's broker (swap/broker.py: ``limiter.ceiling``
    workers, pairs in test order), kept by exact body until their test's check takes them
    (``JudgeModel.ahead``)."""

    def __init__(self, checker: Checker, judge: JudgeModel, limiter: Limiter) -> None:
        self.checker, self.judge, self.limiter = checker, judge, limiter
        self.asked = self.used = self.unused = self.faults = 0
        self.first_fault = ""
        self._index: dict[str, _Asked] = {}  # asked ahead, not yet taken or let go
        self._live: set[str] = set()  # asked by a check (taken or live): never asked ahead after
        self._order = -1  # the test running now
        self._lock = threading.Lock()
        self.server = Server(f"judge-{judge.spec.name}", limiter.ceiling)
        self._stop = self.server.stop

    # -- the planning thread ---------------------------------------------------------------------

    def context(self, item: pytest.Item, rec: GoldenRecord, spec: ModelSpec) -> PairPlan | None:
        """The test's pair for a judge thread (its plan resolved here, never there); None when
        its plan never asks the judge."""
        plan = self.checker.plans.for_item(item)
        if plan.error is not None or "judge" not in (*plan.then, plan.by):
            return None
        test = base_test_id(item.nodeid, spec.name)
        return PairPlan(plan, TestContext(item.nodeid, test, module_of(item.nodeid), spec), rec)

    # -- the fetching threads --------------------------------------------------------------------

    def fetched(self, planned: Planned) -> None:
        if isinstance(planned.context, PairPlan):
            self.server.submit(planned.order, functools.partial(self._work, planned))

    # -- the judge's workers ---------------------------------------------------------------------

    def _work(self, planned: Planned, job: Job[None]) -> None:
        result = planned.result
        if planned.order < self._order or result is None:
            return  # its test has run
        try:
            self._judge_pair(planned, result.call)
        except Exception as exc:  # a fault here is no verdict: its test asks live
            self._fault(exc)

    def _fault(self, exc: Exception) -> None:
        """A pair whose judge request could not be worked out ahead: counted, the first named."""
        with self._lock:
            self.faults += 1
            self.first_fault = self.first_fault or f"{type(exc).__name__}: {exc}"

    def _judge_pair(self, planned: Planned, call: Call) -> None:
        from pytest_slam.compare.judge import asking_through

        pair = planned.context
        assert isinstance(pair, PairPlan)
        question = question_of(call.request)
        cache = _ReadOnly(pair.rec, self.checker)
        faults: list[Exception] = []
        for want in wanted(self.checker, pair, call, faults):
            twin = asking_through(want.scorer, functools.partial(self._ask, planned.order))
            if twin is None:
                continue  # another scorer that asks a model: asked by its test
            try:  # the check's own code: its messages, its cache read; the verdict is dropped
                texts = judged_texts(want.candidate, want.reference, question)  # as the check
                twin.score(texts[0], texts[1], question=texts[2], cache=cache)
            except Exception:  # _Live, unreadable, failed: its test asks live
                continue
        for exc in faults:
            self._fault(exc)

    def _ask(self, order: int, messages: list[dict[str, str]]) -> str:
        """One judge request, asked here unless its test asked it (or is past it) already."""
        body = judge_body(self.judge.spec, messages)
        key = request_key(body)
        with self._lock:
            if self._stop.is_set() or order < self._order or key in self._live:
                raise _Live
            if key in self._index:
                raise _Live  # asked ahead for an earlier pair: its test takes that one
            asked = self._index[key] = _Asked(order)
        result = None
        try:
            target = judge_target(self.judge.spec)
            timeout = self.judge.timeout()
            result, asked.in_flight = self.limiter.send(
                lambda: forward_chat(target, body, timeout=timeout), self._stop
            )
        finally:
            call = result.call if result is not None else None
            with self._lock:
                if call is not None:
                    self.asked += 1
                    if asked.let_go:
                        self.unused += 1
                asked.set_result(call)
        if call is None or not call.ok:
            raise _Live  # its test meets the failure when it takes it
        return call.text

    # -- the test's thread -----------------------------------------------------------------------

    def take(self, body: dict[str, JSON]) -> Call | None:
        """``JudgeModel.complete``'s request: the call asked ahead with this body, or None (and
        it is never asked ahead after this)."""
        key = request_key(body)
        with self._lock:
            self._live.add(key)  # asked by a check now, this way or live: never asked ahead again
            asked = self._index.pop(key, None)
            if asked is None:
                return None
        if not waited(asked, None, patience(self.judge.timeout())):
            return None  # never answered: asked live
        call = asked.result()
        if call is None:  # stopped before it was sent
            return None
        with self._lock:
            self.used += 1
        call.fetched_ahead, call.in_flight = True, asked.in_flight
        return call

    def passed(self, order: int) -> None:
        """The run moved to the test at ``order``: what earlier tests never took is unused."""
        with self._lock:
            self._order = order
            self._let_go(lambda asked: asked.order < order)

    def _let_go(self, which: Callable[[_Asked], bool]) -> None:
        for key, asked in list(self._index.items()):
            if which(asked):
                del self._index[key]
                asked.let_go = True
                if asked.done() and asked.result() is not None:
                    self.unused += 1

    def close(self) -> None:
        """The end of the run (or an interrupt): nothing more is asked; untaken calls unused."""
        if self._stop.is_set():
            return
        self.server.close()
        with self._lock:
            self._let_go(lambda asked: True)

    def lines(self) -> list[str]:
        """The summary's lines: what was asked ahead, and the pairs that could not be."""
        name, out = self.judge.spec.name, []
        if self.asked:
            unused = (
                f"; {self.unused} judge verdict call(s) asked ahead, unused" if self.unused else ""
            )
            out.append(
                f"judge {name}: {self.asked} call(s) asked ahead, {self.used} used{unused} (up "
                f"to {self.limiter.peak} at once, concurrency {self.limiter.ceiling})"
            )
        if self.faults:
            out.append(
                f"judge {name}: {self.faults} pair(s) not worked out ahead ({self.first_fault}); "
                "their tests asked the judge themselves"
            )
        return out


def follow(
    ahead: Ahead, checker: Checker | None
) -> Callable[[pytest.Item, GoldenRecord, ModelSpec], PairPlan | None] | None:
    """Ask the run's judge ahead, when there is one to ask and answers are fetched ahead: returns
    what the planner calls for each planned request (its test's pair), else None."""
    judge = checker.judge if checker is not None else None
    if checker is None or judge is None or judge.offline:
        return None
    if all(limiter.ceiling <= 1 for limiter in ahead.limiters.values()):
        return None  # no candidate answer is fetched ahead: nothing to judge ahead of its test
    ceiling = judge.spec.concurrency or 1  # resolved with the run's models (run/start/startup.py)
    if ceiling <= 1:  # one judge call at a time: asked by each test, as before
        return None
    follower = JudgeAhead(checker, judge, Limiter(judge.spec.name, ceiling))
    judge.ahead = follower
    ahead.follow(follower)
    return follower.context
