"""The end of a run, stage 2 of 3 (finish.py: collect -> judge -> publish): the verdict and gate.

One input, ``Collected``; one output, ``Judged``: the per-model verdict, its diff with a baseline,
the budgets and the project's gate hook, the gate applied to the verdict, the committed human
review, the outcomes scrubbed of secrets for the files, and the exit status (run/end/exitstatus.py's
rule). A run with no outcome has no verdict: its exit status is still decided here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pytest_slam.records import JSON, Outcome
from pytest_slam.run.end.collect import Collected
from pytest_slam.run.end.exitstatus import Exit, run_exit
from pytest_slam.run.end.summary import shown

if TYPE_CHECKING:
    from pytest_slam.report.aggregate import Verdict
    from pytest_slam.report.baseline import BaselineDiff
    from pytest_slam.report.gate_result import GateResult


@dataclass(frozen=True)
class Judged:
    """The judge's one output; ``collected`` is handed on to publish as it came (its
    ``gathered`` the judge never reads)."""

    collected: Collected
    exit: Exit
    verdict: Verdict | None = None
    diff: BaselineDiff | None = None
    outcomes: Sequence[Outcome] = ()  # as the files hold them: scrubbed (packed, as collected)
    # the same, as plain data, when the run made them (None: each is made as it is written)
    rows: list[dict[str, JSON]] | None = None
    human: list[str] = field(default_factory=list)  # the blind-review verdicts, the audit sample


def judge(collected: Collected) -> Judged:
    """Verdict, baseline, gate, exit status; the gate is applied to the verdict the files hold."""
    from pytest_slam.report.aggregate import aggregate

    if collected.reached != "reported" or collected.info is None:
        return Judged(collected, run_exit(collected.status, collected.reached))
    verdict = aggregate(collected.outcomes, collected.info)
    diff = baseline(collected, verdict)
    result = gate(collected, verdict, diff)
    clean, rows = scrubbed(collected.outcomes)
    exit_ = run_exit(collected.status, "reported", result)
    human = [*human_review(collected, verdict), *audit_lines(collected, verdict, clean)]
    return Judged(collected, exit_, verdict, diff, clean, rows, human)


def baseline(collected: Collected, verdict: Verdict) -> BaselineDiff | None:
    """``--slm-baseline``: this verdict against a saved report, or the last saved run (auto)."""
    path = collected.choices.baseline
    if not path:
        return None
    from pytest_slam.report.autosave import AUTO, last_run, runs_dir
    from pytest_slam.report.baseline import diff_baseline

    tol = collected.setup.tables.tolerances
    if path != AUTO:
        return diff_baseline(verdict, path, tol)
    last = last_run(runs_dir(collected.rootpath))
    if last is None:
        return None  # the first run: publish's autosave says so
    diff = diff_baseline(verdict, last, tol)
    diff.baseline = shown(last, collected.rootpath)
    return diff


def gate(collected: Collected, verdict: Verdict, diff: BaselineDiff | None) -> GateResult | None:
    """The gate's result, or None when no rule applied; a partial run is never passed."""
    from pytest_slam.report.gate import apply_gate, evaluate, incomplete_reason

    setup = collected.setup
    breaches = budget_breaches(collected, verdict)
    setup.hook.pytest_slam_gate(verdict=verdict, breaches=breaches)
    # A not-swapped test ran (it has no evidence, which fails the gate on its own): not incomplete;
    # so did a test that made no model call.
    tests_run = sum(
        row.tests_run + row.tests_not_swapped + row.tests_no_calls for row in verdict.models
    )
    why = incomplete_reason(collected.status, collected.stopped, tests_run, collected.workers_lost)
    result = evaluate(setup.tables.gate, verdict, diff, breaches, incomplete=why)
    apply_gate(verdict, result)
    return result if result.configured else None


def budget_breaches(collected: Collected, verdict: Verdict) -> list[str]:
    """``[tool.slam.budget]`` checked against each model's flat aggregate of its calls."""
    from pytest_slam.report.budgets import session_budget_breaches

    setup = collected.setup
    models = list(setup.specs)
    return session_budget_breaches(setup.tables.budget, models, collected.test_outcomes, verdict)


def scrubbed(outcomes: Sequence[Outcome]) -> tuple[Sequence[Outcome], None]:
    """The outcomes as the files hold them: a key quoted in a prompt or an answer never reaches a
    report. Scrubbed once, for every file, one outcome at a time: a record is rebuilt only when a
    secret was found in it (scrub hands back what it was given). No plain copy of the whole run
    is kept: at 5,000 tests it was most of the end's peak memory (issue 53); the writers make
    each outcome's dict as they write it. A packed run stays packed: the few rebuilt outcomes are
    packed again in their places, the rest shared."""
    from pytest_slam.golden.redact import scrub
    from pytest_slam.report.packed import PackedRun

    changes: dict[int, Outcome] = {}
    for index, outcome in enumerate(outcomes):
        plain = outcome.as_dict()
        found = scrub(plain)
        if found is not plain:
            changes[index] = Outcome.from_dict(found)
    if isinstance(outcomes, PackedRun):
        return outcomes.replaced(changes), None
    return [changes.get(i, o) for i, o in enumerate(outcomes)], None


def human_review(collected: Collected, verdict: Verdict) -> list[str]:
    """The committed blind-review verdicts for this run's candidates, in one line (or none)."""
    settings = collected.setup.settings
    if not settings.has_reference:
        return []
    from pytest_slam.review.human_lines import human_review_lines

    root = collected.rootpath / settings.golden_dir
    return human_review_lines(root, settings.reference, [row.model for row in verdict.models])


def audit_lines(collected: Collected, verdict: Verdict, outcomes: Sequence[Outcome]) -> list[str]:
    """``[tool.slam] audit_per_feature``: the pairs this run set aside for `slam review --audit`,
    drawn from the outcomes as the report holds them (the command draws them again from it)."""
    per = collected.setup.settings.audit_per_feature
    if per <= 0 or not collected.setup.settings.has_reference:
        return []
    from pytest_slam.review.audits import set_aside_line

    line = set_aside_line(outcomes, per, verdict.run.started)
    return [line] if line else []
