"""``slam rescore REPORT``: every pair's scores and verdicts again, from a run's stored answers.

The JSON report keeps each candidate call (request, text, tool calls, other choices), each pair's
reference answer and each test's ``slm_equivalence`` mark; the golden files keep the judge's cached
verdicts and ``slam review``'s. With the current ``[tool.slam]`` configuration (scorers, bands, the
cascade) the run's own checks score every pair again, calling no model: the judge answers from its
cache only, and a pair it never saw stays undecided and is counted. The per-model summary and the
gate follow, with the run's exit status for the gate; ``-o`` and ``--html`` write the new reports.
For iterating on scorers and bands in seconds. A test's own assertions are not run again, but
its outcome follows the new verdicts as a run's would: a test whose assertions passed fails when a
pair turns different, and passes again when none is (``Outcome.checks_failed``); the pass rate, the
gate and the exit status (1 for failed tests, else 6 for a failed gate) follow.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.records import ModelSpec, Outcome
from pytest_slam.settings import Settings

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.aggregate import Verdict
    from pytest_slam.run.score.checks import Checker


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("report", help="JSON report written by --slm-report")
    parser.add_argument("-o", "--output", default=None, help="Write the rescored JSON report here")
    parser.add_argument("--html", default=None, help="Write the rescored HTML report here")
    return parser


def cmd_rescore(args: argparse.Namespace) -> int:
    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.jsonreport import load_report
    from pytest_slam.report.terminal import gate_lines, render_table

    report = load_report(args.report)  # a ReportError: `slam` says it in one line, exit 2
    check_pairs(args.report, report.outcomes)
    settings: Settings = args.settings
    reference = str(report.verdict.run.settings.get("reference") or settings.reference)
    checker = checker_for(settings, _store(Path(settings.golden_dir), reference))
    outcomes = [rescore_outcome(checker, o) for o in report.outcomes]
    verdict = aggregate(outcomes, report.verdict.run)
    failed = _gate(settings, verdict, report.verdict)
    tests_failed = any(r.tests_failed or r.tests_errored for r in verdict.models)
    width = shutil.get_terminal_size((100, 24)).columns
    lines = render_table(verdict, width)
    if checker.not_cached:
        lines.append(
            f"{checker.not_cached} pair(s) the judge has not seen stay undecided: rescore calls "
            "no model; cache their verdicts with a run (pytest --slm-record=new)"
        )
    lines.extend(checker.summary)
    lines.extend(gate_lines(verdict))
    lines.extend(_write(args, verdict, outcomes))
    print("\n".join(lines))
    return _exit_status(failed, tests_failed)


def check_pairs(path: str, outcomes: list[Outcome]) -> None:
    """Each pair points at one candidate call of its own test, or the report was edited: a
    ``call_index`` out of range would be a traceback, and -1 would score another call's answer."""
    from pytest_slam.report.jsonreport import ReportError

    for outcome in outcomes:
        seen: set[int] = set()
        for number, pair in enumerate(outcome.pairs, 1):
            if (
                pair.missing
            ):  # no golden answer (a replay miss is refused unasked): nothing to score
                continue
            index, calls = pair.call_index, outcome.calls
            problem = None
            if not 0 <= index < len(calls):
                problem = f"is not one of its {len(calls)} call(s)"
            elif calls[index].role != "candidate":
                problem = f"is a {calls[index].role} call, not a candidate's"
            elif index in seen:
                problem = "is another pair's call too"
            if problem:
                raise ReportError(
                    f"{path}: {outcome.nodeid}: pair {number}'s call_index {index} {problem}; "
                    "the report was edited or cut: rescore the file --slm-report wrote"
                )
            seen.add(index)


def checker_for(settings: Settings, store: GoldenStore) -> Checker:
    """The run's checker over the golden files, with a judge that answers from its cache only."""
    from pytest_slam.metrics.cost import Prices
    from pytest_slam.run.score.checks import Checker
    from pytest_slam.run.score.judging import JudgeModel
    from pytest_slam.swap.models import resolve

    judge = None
    if settings.judge:
        judge = JudgeModel(resolve(settings.judge, settings.model_table), offline=True)
    return Checker(
        None,
        dict(settings.equivalence),
        Prices.from_config(settings.prices),
        judge=judge,
        golden_store=store,
        scorer_timeout_s=settings.scorer_timeout_s,
        accept_uncertified_judge=settings.accept_uncertified_judge,
    )


def rescore_outcome(checker: Checker, outcome: Outcome) -> Outcome:
    """The outcome with its pairs scored again (the judge's calls of the run are dropped: a
    rescore makes none, and the run's were for verdicts that may no longer be asked)."""
    from pytest_slam.golden.fileformat import GoldenError
    from pytest_slam.run.score.verdict import TestVerdict
    from pytest_slam.run.test.optin import module_of
    from pytest_slam.swap.router import TestContext

    if not outcome.pairs:
        return outcome
    module = module_of(outcome.test or outcome.nodeid)
    spec = ModelSpec(outcome.model, "", outcome.model)
    ctx = TestContext(outcome.nodeid, outcome.test, module, spec, calls=list(outcome.calls))
    verdict = TestVerdict(pairs=outcome.pairs)
    for pair in outcome.pairs:
        pair.scores = []
        store = checker.store
        try:
            rec = store.lookup(module, pair.key) if store is not None and not pair.missing else None
        except (GoldenError, ValueError):
            rec = None
        if rec is not None:
            verdict.records[pair.call_index] = rec
    checker.score_pairs(checker.plans.for_module(module, outcome.equivalence), ctx, verdict)
    outcome.calls = [c for c in outcome.calls if c.role != "judge"]
    _decide_outcome(outcome, verdict.problems)
    return outcome


def _decide_outcome(outcome: Outcome, problems: list[str]) -> None:
    """The test's outcome as a run with this configuration gives it: a test whose own assertions
    passed (it passed, or only the swap's checks failed it) fails on a pair now called different,
    a breached budget or a missing golden answer, and passes without one. A test its own code
    failed, a repeated one, or one from a report older than ``checks_failed`` keeps its outcome."""
    if outcome.repeat is not None or outcome.outcome not in ("passed", "failed"):
        return
    if outcome.outcome == "failed" and not outcome.checks_failed:
        return
    found = [
        *(f"call {p.call_index + 1}: no golden answer" for p in outcome.pairs if p.missing),
        *problems,
        *(f"budget breached: {b}" for b in outcome.budget_breaches),
    ]
    if found:
        outcome.outcome, outcome.checks_failed = "failed", True
        outcome.message = "\n".join(found)
    elif outcome.outcome == "failed":
        outcome.outcome, outcome.checks_failed, outcome.message = "passed", False, None


def _store(root: Path, reference: str) -> GoldenStore:
    from pytest_slam.golden.store import GoldenStore

    return GoldenStore(root, reference)


def _gate(settings: Settings, verdict: Verdict, before: Verdict) -> bool:
    """Apply the configured gate; True when it failed (an incomplete run never passes)."""
    from pytest_slam.report.gate import Gate, apply_gate, evaluate

    gate = Gate.from_config(settings.gate)  # a ConfigError: one line, exit 2
    incomplete = before.gate.incomplete if before.gate is not None else None
    result = evaluate(gate, verdict, None, None, incomplete=incomplete)
    apply_gate(verdict, result)
    return result.configured and not result.passed


def _write(args: argparse.Namespace, verdict: Verdict, outcomes: list[Outcome]) -> list[str]:
    from pytest_slam.report.html import write_html
    from pytest_slam.report.jsonreport import ReportError, write_json

    said = []
    for path, kind, write in ((args.output, "JSON", write_json), (args.html, "HTML", write_html)):
        if path:
            try:
                said.append(f"{kind} report: {write(path, verdict, outcomes)}")
            except OSError as exc:
                raise ReportError(
                    f"{path} not written ({exc.strerror or exc}); give a writable path"
                ) from None
    return said


def _exit_status(gate_failed: bool, tests_failed: bool) -> int:
    """A run's exit status by the one rule (run/end/exitstatus.py): failed tests keep pytest's (1)."""
    from pytest_slam.cli.exits import FINDING, OK
    from pytest_slam.run.end.exitstatus import exit_status

    return exit_status(FINDING if tests_failed else OK, not gate_failed)
