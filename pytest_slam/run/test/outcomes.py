"""One test's Outcome, built from what the swap recorded, and the one-line failure for a dead model.

The Outcome rides on the test report as plain data, because reports are what xdist carries from the
workers to the controller (stash data does not travel).

A candidate never passes on calls it did not answer. Every candidate call that did not come back
whole (an error status, a timeout, refused, cut off, or given up on by its caller) is a failed call
of the test's candidate, also when the product caught the error and its assertions passed: such a
test gets the slam outcome ``candidate_failed``, with a message naming the calls' error kinds; it
counts as a failed test in the pass rate, and the gate fails on it (report/gate.py). A test whose
assertions passed but that sent its candidate no call gets the outcome ``not_swapped`` (missing
evidence, its own outcome) when its calls went elsewhere (off the machine, to another route, into
a mock: ``went_elsewhere``), and ``no_calls`` when it made no model call at all (a plain
test in an opted-in folder): listed, but neither in the pass rate nor gated. The pytest outcome of
the test stays what its assertions decided; the slam outcome, the reports and the gate say
"candidate failed", "not swapped" or "no calls".
``@pytest.mark.slm(calls=0)`` marks a test that makes no model call on purpose: ``no_calls``. Under
``--slm-repeat`` each run is judged so already (run/start/repeat.py), and the pass fraction decides.

One final outcome per test per model: a rerun attempt (pytest-rerunfailures' ``rerun`` reports) is
dropped, a later attempt replaces an earlier one, and a teardown error replaces the passing call it
followed instead of counting the test twice.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import MutableSequence
from typing import TYPE_CHECKING, Any, Protocol

import pytest

from pytest_slam.metrics.metering import outcome_energy
from pytest_slam.records import JSON, Call, Outcome, to_us
from pytest_slam.report.aggregate import (
    CANDIDATE_FAILED,
    CAUSES,
    FIXES,
    NO_CALLS,
    NOT_SWAPPED,
    OUTCOME_SEVERITY,
)
from pytest_slam.report.packed import KeptOutcomes, unpack
from pytest_slam.run.score.scoring import plain_mark
from pytest_slam.run.test.optin import base_test_id

if TYPE_CHECKING:
    from pytest_slam.run.score.verdict import TestVerdict
    from pytest_slam.swap.router import TestContext

# ``Outcome.as_dict()``: what the test report carries to the controller
OutcomeDict = dict[str, JSON]


def _model(item: pytest.Item) -> str:
    callspec = getattr(item, "callspec", None)  # only parametrized Functions have one
    return str(callspec.params["slm_model"]) if callspec is not None else ""


def build_outcome(
    item: pytest.Item,
    report: pytest.TestReport,
    ctx: TestContext | None,
    verdict: TestVerdict | None,
    crash: str | None = None,
) -> OutcomeDict:
    """The test's Outcome as plain data: it rides on the report across xdist. ``crash``: the
    product's own exception as pytest words it (``ExceptionInfo.exconly``), when the report holds
    the one-line failure instead (``shortened``)."""
    from pytest_slam.swap.egress import seen_by

    model = _model(item)
    outcome = Outcome(
        nodeid=item.nodeid,
        test=base_test_id(item.nodeid, model),
        model=model,
        outcome=_status(report),
        duration_s=to_us(report.duration),
        egress=seen_by(item.nodeid),
        equivalence=plain_mark(item),
    )
    if ctx is not None:
        outcome.calls = list(ctx.calls)
        outcome.energy_j = outcome_energy(ctx.calls)
    if verdict is not None:
        _take_verdict(outcome, verdict)
    _judge_candidate_calls(outcome, item, ctx, verdict)
    crash = failure_line(report) if crash is None else _first_line(crash)
    if crash and crash not in (outcome.message or ""):
        _add_line(outcome, crash)
    cut = cut_message(ctx)
    if cut:
        _add_line(outcome, cut)
    return outcome.as_dict()


def _take_verdict(outcome: Outcome, verdict: TestVerdict) -> None:
    """The swap's checks on the test: its pairs, budget breaches, repeat summary and problems."""
    outcome.pairs = list(verdict.pairs)
    outcome.budget_breaches = list(verdict.breaches)
    outcome.repeat = dict(verdict.repeat) if verdict.repeat is not None else None
    if verdict.problems:
        outcome.message = "\n".join(verdict.problems)
        alone = not verdict.own_failure and verdict.repeat is None  # a repeat's runs vary
        outcome.checks_failed = outcome.outcome == "failed" and alone


def _judge_candidate_calls(
    outcome: Outcome, item: pytest.Item, ctx: TestContext | None, verdict: TestVerdict | None
) -> None:
    """A candidate never passes on calls it did not answer, nor on calls it never got: the slam
    outcome becomes ``candidate_failed``, ``no_calls`` or ``not_swapped`` (the module's docstring)."""
    candidate = _candidate_calls(ctx)
    failed = [c for c in candidate if not c.ok]
    repeated = verdict is not None and verdict.repeat is not None  # the pass fraction decides
    if failed and not repeated:
        _fail_on_calls(outcome, candidate, failed)
    elif outcome.outcome == "passed" and not candidate:
        _not_answered(outcome, item, ctx)


def _candidate_calls(ctx: TestContext | None) -> list[Call]:
    return [c for c in ctx.calls if c.role == "candidate"] if ctx is not None else []


def _fail_on_calls(outcome: Outcome, candidate: list[Call], failed: list[Call]) -> None:
    if outcome.outcome == "passed" or outcome.message is None:
        outcome.message = failed_calls_message(outcome.nodeid, outcome.model, candidate, failed)
    if outcome.outcome == "passed":
        outcome.outcome = CANDIDATE_FAILED


def _not_answered(outcome: Outcome, item: pytest.Item, ctx: TestContext | None) -> None:
    """A passed test that sent its candidate no call: no evidence either way."""
    elsewhere = went_elsewhere(item, ctx, outcome.egress)
    if elsewhere is None or declares_no_calls(item):
        outcome.outcome, outcome.message = NO_CALLS, no_calls_message(outcome.nodeid, outcome.model)
    else:
        outcome.outcome = NOT_SWAPPED
        outcome.message = not_swapped_message(
            outcome.nodeid, outcome.model, outcome.egress, elsewhere
        )


def _add_line(outcome: Outcome, line: str) -> None:
    outcome.message = f"{outcome.message}\n{line}" if outcome.message else line


def failure_line(report: pytest.TestReport) -> str | None:
    """The product's own failure as pytest's short summary says it: the first line of the crash
    message (``AssertionError: assert 'low' == 'high'``), of a ``pytest.fail`` text, or a skip's
    reason. None when the test did not fail or skip, and for pytest-slam's own failures (their
    lines are in the message already)."""
    longrepr = report.longrepr
    if report.passed or longrepr is None:
        return None
    if isinstance(longrepr, tuple):  # a skip: (path, line, "Skipped: reason")
        text = str(longrepr[2])
    else:
        crash = getattr(longrepr, "reprcrash", None)
        text = str(crash.message) if crash is not None else str(longrepr)
    return _first_line(text)


_SAID_BY = re.compile(r"\(pytest-slam, [^()]*\)$")  # said_by's mark at the end of its line


def _first_line(text: str) -> str | None:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if not line or line.startswith(("pytest-slam", "Failed: pytest-slam")) or _ours(line):
        return None
    return line


def _ours(line: str) -> bool:
    """A line pytest-slam said (``said_by``: its first fact first, who said it at its end)."""
    return _SAID_BY.search(line) is not None


def _status(report: pytest.TestReport) -> str:
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def went_elsewhere(item: pytest.Item, ctx: TestContext | None, egress: list[str]) -> str | None:
    """Where a test that sent its candidate no call sent one instead (None: it made no call at all):
    off the machine, to the reference or another model's route, or into a mock (run/test/mocks.py)."""
    from pytest_slam.run.test.mocks import patches

    if egress:
        return "off the machine"
    if ctx is not None and (ctx.reference_calls or ctx.elsewhere):
        return "to another route than its candidate's"
    patched = patches(item)
    return f"into a mock ({', '.join(patched)} replaced)" if patched else None


def no_calls_message(nodeid: str, model: str) -> str:
    """One line: the test made no model call, so it is counted apart, neither pass nor fail."""
    return (
        f"pytest-slam: {nodeid} made no model call, so it says nothing about {model}: counted "
        "apart (no_calls), not in the pass rate and not gated; keep it on the original endpoint, "
        "run once, with @pytest.mark.slm(swap=False)"
    )


def declares_no_calls(item: pytest.Item) -> bool:
    """``@pytest.mark.slm(calls=0)``: the test makes no model call on purpose."""
    mark = item.get_closest_marker("slm")
    return mark is not None and mark.kwargs.get("calls", None) == 0


def not_swapped_message(
    nodeid: str, model: str, egress: list[str], elsewhere: str | None = None
) -> str:
    """One line: what happened, the likely causes and the fix."""
    left = f"; it connected off the machine to {', '.join(dict.fromkeys(egress))}" if egress else ""
    if elsewhere and not egress:
        left = f"; its calls went {elsewhere}"
    return (
        f"pytest-slam: {nodeid} passed but is not swapped: no call reached {model}{left}, so it "
        f"is no evidence for {model}; {CAUSES}; {FIXES}"
    )


CAP_OPTION = "max_tokens_cap (--slm-max-tokens-cap=N, [tool.slam] max_tokens_cap = N)"


def cut_message(ctx: TestContext | None) -> str | None:
    """One line when the generation cap (chat.generation_cap) cut any of the test's candidate
    answers: the product set no max_tokens, so the cut is pytest-slam's, and the test is told so."""
    cut = [c for c in ctx.calls if c.role == "candidate" and c.cut_by_cap and c.ok] if ctx else []
    if ctx is None or not cut:
        return None
    caps = ", ".join(str(c) for c in sorted({c.cap for c in cut if c.cap is not None}))
    return (
        f"pytest-slam: {ctx.nodeid}: the generation cap cut {len(cut)} answer(s) of "
        f'{ctx.model.name} at {caps} token(s) (finish_reason "length"; the request set no '
        f"max_tokens): set max_tokens in the request, or raise [tool.slam] cap_factor / cap_margin "
        f"or {CAP_OPTION}"
    )


def failed_calls_message(nodeid: str, model: str, calls: list[Call], failed: list[Call]) -> str:
    """One line: the first failed call's reason first (a report's row shows a message's start:
    a runaway's reason was past its cut), then how many of the test's calls the candidate failed,
    of which kinds, and who says so."""
    kinds = Counter(c.error_kind or "error" for c in failed)
    shown = ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items()))
    return (
        f"{failed[0].error}; {len(failed)} of {len(calls)} call(s) to {model} failed "
        f"({shown}), so the test counts as failed for {model}, also when the product caught "
        f"the error (pytest-slam, {nodeid})"
    )


class Phase(Protocol):
    """What ``keep_final`` reads of a test report; ``rerun`` is pytest-rerunfailures' outcome,
    which pytest's own type does not list."""

    @property
    def outcome(self) -> str: ...
    @property
    def when(self) -> str | None: ...


class _Positions:
    """Where each nodeid sits in the one list ``keep_final`` fills, so a new test is not a scan.

    One slot: a run has one list of outcomes. The map is trusted only for that very list at the
    length it left it; another list, or one grown or shrunk by someone else, rebuilds it. An entry
    replaced in place by another writer under a different nodeid is not seen (the session's list
    has no other writer).
    """

    def __init__(self) -> None:
        self.outcomes: MutableSequence[OutcomeDict] | None = None
        self.length = 0
        self.index: dict[JSON, int] = {}

    def of(self, outcomes: MutableSequence[OutcomeDict]) -> dict[JSON, int]:
        if self.outcomes is not outcomes or self.length != len(outcomes):
            self.outcomes, self.length = outcomes, len(outcomes)
            self.index = {o["nodeid"]: i for i, o in enumerate(outcomes)}  # the last one wins
        return self.index


_POSITIONS = _Positions()


def keep_final(
    outcomes: MutableSequence[OutcomeDict], payload: OutcomeDict | str, report: Phase
) -> None:
    """Add one test phase's Outcome to ``outcomes``, keeping one final Outcome per nodeid.
    ``payload``: its dict, or packed as the report carries it (report/packed.py), kept so."""
    if report.outcome == "rerun":
        return  # pytest-rerunfailures runs it again; the last attempt decides
    head: OutcomeDict = json.loads(payload) if isinstance(payload, str) else payload
    kept: Any = payload if isinstance(outcomes, KeptOutcomes) else unpack(payload).as_dict()
    nodeid = head["nodeid"]
    index = _POSITIONS.of(outcomes)
    at = index.get(nodeid)
    if at is not None and outcomes[at]["nodeid"] != nodeid:  # changed behind our back
        _POSITIONS.outcomes = None
        index = _POSITIONS.of(outcomes)
        at = index.get(nodeid)
    if at is not None:
        if report.when != "teardown" or _worse(head, outcomes[at]):
            outcomes[at] = kept
        return
    index[nodeid] = len(outcomes)
    outcomes.append(kept)
    _POSITIONS.length = len(outcomes)


def _worse(new: OutcomeDict, old: OutcomeDict) -> bool:
    worst = len(OUTCOME_SEVERITY)
    # a packed outcome leaves out its default, "passed" (report/packed.py)
    return OUTCOME_SEVERITY.get(str(new.get("outcome", "passed")), worst) > OUTCOME_SEVERITY.get(
        str(old.get("outcome", "passed")), worst
    )


_FIXES = {
    "unreachable": "Start the server or fix the model's base_url.",
    "timeout": "Raise the model's timeout_s, or check that the server is not stuck.",
    "fault": "The server broke the OpenAI protocol: check its version and log.",
    "runaway": (
        "Its structured answer ran past the longest the reference's answer allows: set max_tokens "
        "in the request, or raise [tool.slam] cap_factor / cap_margin or max_tokens_cap."
    ),
}
# the product's own client (or its framework: the agents SDK, LiteLLM) ended the call, not ours
CALLER_TIMEOUT_FIX = (
    "The product's own client timeout ended it, not the model's timeout_s: raise the timeout the "
    "product (or its framework) sets, or choose a faster candidate."
)


def failure_fix(call: Call) -> str | None:
    """The fix a failed call's one line ends with; None for a failure that is the product's."""
    from pytest_slam.swap.chat import left_by_caller

    return CALLER_TIMEOUT_FIX if left_by_caller(call) else _FIXES.get(call.error_kind or "")


def shortened(
    item: pytest.Item,
    ctx: TestContext | None,
    call: pytest.CallInfo[None],
    verdict: TestVerdict | None = None,
) -> pytest.ExceptionInfo[BaseException] | None:
    """Before pytest builds a failed call's report: when the failure is one ``one_line_failure``
    words, ``call.excinfo`` becomes that line as a ``pytest.fail`` without a traceback, and the
    product's own exception is returned, for the caller to put back once the report is built.

    The report shows that line anyway; building it from the product's exception first meant
    formatting a traceback through the OpenAI SDK (parsing its source, about 0.15 s a test), for a
    run of 2,000 missing golden answers minutes. Only the product's own exception (an
    ``Exception``) gives way: pytest's outcomes (skip, an imperative xfail, fail, a group of
    skips) are ``BaseException`` and keep deciding the test's outcome; an xfail mark keeps its
    exception too (``raises=``).
    """
    excinfo = call.excinfo
    if call.when != "call" or excinfo is None or not isinstance(excinfo.value, Exception):
        return None
    if item.get_closest_marker("xfail") is not None:
        return None
    line = one_line_failure(ctx, failed=True, verdict=verdict)
    if line is None:
        return None
    try:
        raise pytest.fail.Exception(line, pytrace=False)
    except pytest.fail.Exception:
        call.excinfo = pytest.ExceptionInfo.from_current()
    return excinfo


def one_line_failure(
    ctx: TestContext | None, failed: bool, verdict: TestVerdict | None = None
) -> str | None:
    """A candidate that could not answer fails its tests with one readable line, not a traceback.

    Only server-side failures (``Call.error_kind``) are shortened: an HTTP error status is the
    product's to handle, so the test's own traceback says what the product did with it.
    """
    if ctx is None or not failed:
        return None
    if ctx.engine_error:  # its first call started the engines, and this model's did not start
        return ctx.engine_error
    if ctx.misses:  # refused before the candidate was asked: the record command is the fix
        turn, _key, message = ctx.misses[0]
        return f"pytest-slam: call {turn}: {message}" + _retried(message, turn, verdict)
    for call in ctx.calls:
        fix = failure_fix(call)
        if fix:
            return f"pytest-slam: {call.error}. {fix}"
    return None


def _retried(message: str, turn: int, verdict: TestVerdict | None) -> str:
    """After a framework's retry miss (golden/reference.retry_message), the verdict of the call
    it retried, which the terminal printed nowhere: ``; call 1: candidate called no tool ...``."""
    from pytest_slam.golden.reference import RETRY_MARK

    if RETRY_MARK not in message or verdict is None:
        return ""
    earlier = [p for p in verdict.problems if p.startswith("call ") and not _at(p, turn)]
    return f"; {earlier[0]}" if earlier else ""


def _at(problem: str, turn: int) -> bool:
    return problem.startswith(f"call {turn}: ")


def problems_message(model: str, problems: list[str]) -> str:
    """The failure of a test whose own assertions passed and whose swap checks did not: the first
    reason on the first line, its first fact first (pytest's short summary shows only that line,
    cut at the terminal's width after the node id: ``pytest-slam (near): cal…`` showed none),
    who said it after it, the rest under it."""
    return said_by(model, "\n  ".join(problems))


def said_by(model: str, text: str) -> str:
    """``text`` with who said it after its first line: ``(pytest-slam, MODEL)``."""
    first, newline, rest = text.partition("\n")
    return f"{first} (pytest-slam, {model}){newline}{rest}"


class OneFailure:
    """A failed test's report text (``TestReport.longrepr``) whose short-summary message is its
    first line. pytest shows a string longrepr whole in the short summary on CI (``CI=true``), so
    a near miss's table was printed twice, under the failure and again in the summary; this is
    printed whole under the failure only (pytest calls ``toterminal``; JUnit and xdist ``str``)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.reprcrash = _Crash(text.split("\n", 1)[0])

    def toterminal(self, tw: object) -> None:
        tw.line(self.text)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return self.text


class _Crash:
    """What pytest reads of a longrepr's crash: ``message`` (the short summary), ``str`` of it
    (``--tb=line``)."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __str__(self) -> str:
        return self.message


def one_line_in_summary(report: pytest.TestReport) -> None:
    """A swapped test's failure text of several lines (``report.slam`` set: its outcome, on the
    report as xdist ships it) keeps only its first line for pytest's short summary."""
    text = report.longrepr
    if report.failed and isinstance(text, str) and "\n" in text and hasattr(report, "slam"):
        report.longrepr = OneFailure(text)  # type: ignore[assignment]


def verdict_failure(ctx: TestContext | None, verdict: TestVerdict | None) -> str | None:
    """The report's failure text when the swap's checks failed the test (``problems_message``,
    without pytest's "Failed:" before it); None when the test's own code failed, or nothing did."""
    if ctx is None or verdict is None or verdict.own_failure or not verdict.problems:
        return None
    return problems_message(ctx.model.name, verdict.problems)


ACCOUNT_TEXT = 70  # characters of an answer's text shown in the account of the calls


def calls_account(ctx: TestContext | None, verdict: TestVerdict | None) -> str | None:
    """When the product (or its framework: instructor after three prose answers) raised, what
    the candidate did, shown after the framework's exception: each call's answer in a line (its
    tool calls, else the start of its text, its finish reason or error), then the swap's own
    problems with them (``candidate called no tool``)."""
    if ctx is None or verdict is None or not verdict.own_failure:
        return None
    calls = _candidate_calls(ctx)
    if not calls:
        return None
    lines = [
        f"the test raised; the candidate {ctx.model.name} made {len(calls)} call(s) "
        "(pytest-slam's account):"
    ]
    for number, call in enumerate(calls, 1):
        lines.append(f"  call {number}: {_answered(call)}")
    lines += [f"  {p}" for p in verdict.problems]
    return "\n".join(lines)


def _answered(call: Call) -> str:
    """One call in a few words: its error, its tool calls, or the start of its text."""
    from pytest_slam.util.textcodec import visible

    if call.error is not None:
        return f"failed ({call.error_kind or 'error'}): {call.error}"
    finish = f" (finish_reason {call.finish_reason})" if call.finish_reason else ""
    if call.tool_calls:
        names = ", ".join(
            str(
                (tc.get("function") or {}).get("name")
                if isinstance(tc.get("function"), dict)
                else tc.get("name")
            )
            for tc in call.tool_calls
        )
        return f"called {names}{finish}"
    text = " ".join(visible(call.text).split())
    if not text:
        return f"answered nothing{finish}"
    shown = text if len(text) <= ACCOUNT_TEXT else text[: ACCOUNT_TEXT - 3] + "..."
    # "no tool call" only where one was offered: a json_schema request answers in text by design
    offered = bool(call.request.get("tools") or call.request.get("functions"))
    return f"answered text{', no tool call' if offered else ''}: {shown!r}{finish}"
