"""The end of a run: write the golden files, find stale entries, write the reports, apply the gate.

A worker only flushes its goldens and publishes what it saw; the controller (or the serial process)
merges, reports and gates. The gate has its own exit status (``options.EXIT_GATE_FAILED``) so a CI
log tells a failed gate from failed tests.

``RunEnd`` is what the end reads, built by the session at ``pytest_sessionfinish``: the role objects
(``Selection``, ``Accounting``, ``Summary``), the run's models and a few facts of pytest's session.
Each step below reads the few of its fields it needs; none imports the session.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_slam import __version__
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.records import JSON, ModelSpec, Outcome, records, utc_now
from pytest_slam.run import options
from pytest_slam.run.accounting import Accounting
from pytest_slam.run.exitstatus import gate_failed_line, gated_exitstatus
from pytest_slam.run.selection import Selection
from pytest_slam.run.summary import Summary
from pytest_slam.settings import Settings
from pytest_slam.util.gcpause import gc_paused

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.aggregate import RunInfo, Verdict
    from pytest_slam.report.baseline import BaselineDiff
    from pytest_slam.report.gate_result import GateResult
    from pytest_slam.report.visits import Visits
    from pytest_slam.run.tables import Tables


@dataclass
class SessionFacts:
    """What the end reads of pytest's session (plain values: unit tests build them)."""

    status: int = 0  # session.exitstatus
    collected: int = 0  # session.testscollected
    stopped: str | bool = False  # session.shouldfail or session.shouldstop
    dist_stopped: bool = False  # xdist's controller stopped its workers (-x under -n)
    known: bool = True  # pytest's session is registered (it always is in a real run)


def _no_tables() -> Tables:
    """The defaults (no gate, baseline or budget table; the default prices): imported only when
    a RunEnd is built without the session's tables."""
    from pytest_slam.run.tables import Tables

    return Tables()


@dataclass
class RunEnd:
    """What the end of one run reads; ``hook`` is pytest's hook relay (hookspecs.py)."""

    settings: Settings
    role: str
    selection: Selection
    accounting: Accounting
    summary: Summary
    hook: Any
    specs: dict[str, ModelSpec]
    reference_spec: ModelSpec | None = None
    store: GoldenStore | None = None
    engine_errors: dict[str, str] = field(default_factory=dict)
    engine_outcomes: list[dict[str, Any]] = field(default_factory=list)  # cold first calls
    unswapped: int = 0  # requests that went to the original endpoint (the router's count)
    original_url: str = ""  # that endpoint
    started: str = ""
    gpu_line: str = ""
    session: SessionFacts = field(default_factory=SessionFacts)
    collectonly: bool = False
    prune: bool = False  # --slm-prune
    baseline: str | None = None  # --slm-baseline
    width: int = 100  # the terminal's
    workeroutput: dict[str, object] | None = None  # xdist's, on a worker
    shard_ids: dict[str, JSON] = field(default_factory=dict)  # collected/selected (shardvisits)
    tables: Tables = field(default_factory=_no_tables)  # [tool.slam]'s, parsed once

    @property
    def rootpath(self) -> Path:
        return self.selection.rootpath

    @property
    def armed(self) -> bool:
        return self.selection.armed

    @property
    def runs_tests(self) -> bool:
        return self.role != "controller"


def finish(slam: RunEnd, exitstatus: int) -> int:
    """The end of the run: golden files flushed, a worker's payload, or the verdict and its files.

    The collector is paused throughout: it builds records over every outcome, all of them live
    until the run ends, and a full collection walking the run's heap there cost 0.1-0.2 s a
    thousand tests (bench/README.md section 20).
    """
    if not slam.armed:
        return exitstatus
    with gc_paused():
        return _finish(slam, exitstatus)


def _finish(slam: RunEnd, exitstatus: int) -> int:
    if slam.runs_tests:
        _flush(slam)
    if slam.role == "worker":
        if slam.workeroutput is not None:  # set by xdist
            from pytest_slam.run.crossing import CARRIED, carried

            slam.workeroutput["slam"], slam.workeroutput[CARRIED] = carried(_payload(slam))
        return exitstatus
    for data in slam.accounting.worker_payloads:  # what each worker wrote (golden files) or not
        slam.summary.merge(data["summary"])
    if slam.settings.has_reference:
        _stale(slam)
    if slam.collectonly:
        return exitstatus
    line = nothing_opted_in(slam, exitstatus)
    if line:
        slam.summary.append(line)
    return _report(slam, exitstatus)


OPT_IN = (
    "opt tests in with the slm_model fixture, @pytest.mark.slm on a test, class or module, "
    'slm_opt_in = True in a conftest.py, [tool.slam] paths = ["tests/llm"], or from the command '
    "line -o slm_paths=tests/llm"
)


def nothing_opted_in(slam: RunEnd, exitstatus: int) -> str | None:
    """The one line a first run gets when tests ran but none was opted in: nothing was swapped,
    how many requests went to the original endpoint instead, and how to opt in."""
    collected = slam.session.collected
    if slam.accounting.outcomes or not collected or exitstatus == pytest.ExitCode.INTERRUPTED:
        return None
    payloads = [_payload(slam), *slam.accounting.worker_payloads]
    sent = sum(int(str(p.get("unswapped") or 0)) for p in payloads)
    models = ", ".join(slam.specs)
    where = slam.original_url
    went = (
        f"{sent} model request(s) went unswapped to the original endpoint {where} (an error such "
        "as \"502 ... unreachable\" there is that endpoint's, not a candidate's)"
        if sent
        else "no model request went through the swap"
    )
    return f"nothing was opted in, so no test ran on {models}: {went}; {OPT_IN}"


def _flush(slam: RunEnd) -> None:
    """Write this process's recorded answers (each file once, under its lock, atomically)."""
    if slam.store is None:
        return
    try:
        written = slam.store.flush()
    except GoldenError as exc:
        slam.summary.append(f"golden files not written: {exc}")
        return
    finally:  # a killed promote or prune found and recovered by this run's writes: say so
        said = [*slam.store.recovered, *slam.store.notes]
        slam.summary.extend(line.removeprefix("slam golden: ") for line in said)
    for path in written:
        slam.summary.append(f"golden answers written: {_shown(slam, path)}")


def _shown(slam: RunEnd, path: Path) -> str:
    """A path as the user reads it: relative to the rootdir when it is inside it."""
    return slam.summary.shown(path)


def _payload(slam: RunEnd) -> dict[str, JSON]:
    visited = slam.store.visited if slam.store is not None else {}
    return {
        "visited": {m: sorted(keys) for m, keys in visited.items()},
        "failed_tests": sorted(slam.accounting.failed_tests),
        "coverage": slam.selection.covered(),
        "deselected": slam.selection.deselected_count,  # a worker's -k/-m: the run is partial
        "summary": list(slam.summary.lines),
        "unswapped": slam.unswapped,
        **slam.shard_ids,  # this process's collected and selected ids (run/shardvisits.py)
    }


def _merged(slam: RunEnd) -> tuple[dict[str, set[str]], set[str], set[str]]:
    payloads = [_payload(slam), *slam.accounting.worker_payloads]
    visited: dict[str, set[str]] = {}
    failed: set[str] = set()
    covered: set[str] | None = None
    for data in payloads:
        for module, keys in data["visited"].items():
            visited.setdefault(module, set()).update(keys)
        failed.update(data["failed_tests"])
        if slam.role == "controller" and data is payloads[0]:
            continue  # the controller collects nothing; workers say what they covered
        mods = set(data["coverage"])
        covered = mods if covered is None else covered & mods
    return visited, covered or set(), {_base(t) for t in failed}


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def _stale(slam: RunEnd) -> None:
    """Report (or prune) the entries no test asked for; leave the report `slam golden prune` reads.

    Judged only after a complete run (``RunEnd.partial_reason``): after Ctrl-C, a crash, -x,
    -k, node ids, a collection error, an engine that did not start or a lost worker, an unvisited
    entry may just belong to a test that never ran. A partial run says why in the report, so prune
    refuses it. Modules with a failed or skipped test are not judged either (see ``_merged``).
    """
    visited, covered, failed = _merged(slam)
    if slam.collectonly:
        return
    store = _store(slam)
    why_not = _unjudged(slam)
    covered -= {t.split("::", 1)[0] for t in failed}
    try:
        if why_not:
            lines = [f"stale golden entries not checked: {why_not}"]
            if slam.prune:
                lines = [f"--slm-prune removed nothing: this run was partial ({why_not})"]
            stale = []
        else:
            stale = store.stale(visited, covered, failed)
            lines = _stale_lines(slam, store, stale)
            if stale and slam.prune:
                lines = _prune(slam, store, stale)
                stale = []
        _write_stale_report(store, stale, why_not)
    except (GoldenError, OSError) as exc:
        slam.summary.append(f"stale golden entries not checked: {exc}")
        return
    slam.summary.extend(lines)


def _prune(slam: RunEnd, store: GoldenStore, stale: list[tuple[str, str]]) -> list[str]:
    """``--slm-prune``: remove the stale entries, each kept in a trash file first; say how to undo."""
    from pytest_slam.golden.trash import Trash

    listed = _stale_lines(slam, store, stale, more="the trash file holds them all")[1:]
    trash = Trash(store.root, store.reference)
    removed = store.prune(stale, trash.add)
    undo = f"; undo with `slam golden restore {_shown(slam, trash.path)}`" if trash.path else ""
    return [f"pruned {removed} stale golden entr{'y' if removed == 1 else 'ies'}{undo}:", *listed]


def _store(slam: RunEnd) -> GoldenStore:
    from pytest_slam.golden.store import GoldenStore

    if slam.store is not None:
        return slam.store
    root = slam.rootpath / slam.settings.golden_dir
    return GoldenStore(root, slam.settings.reference)


def _unjudged(slam: RunEnd) -> str | None:
    """Why this run cannot tell a stale entry from one whose test never ran (None: it can)."""
    if not slam.session.known:
        return "pytest's session is unknown"
    return partial_reason(slam, slam.session.status)


def partial_reason(slam: RunEnd, status: int, own_selection: bool = False) -> str | None:
    """Why this run cannot tell a stale entry from one whose test never ran (Accounting's).

    ``own_selection``: whether the run's own selection (-k, node ids: a shard) ran to its end.
    """
    stopped = slam.session.stopped or slam.session.dist_stopped
    return slam.accounting.partial_reason(
        slam.selection, slam.engine_errors, status, stopped, slam.session.collected, own_selection
    )


def _visits(slam: RunEnd, exitstatus: int) -> Visits:
    """The report's ``visits``: what shards need to be merged and judged for staleness."""
    from pytest_slam.run.shardvisits import shard_visits

    visited, covered, _ = _merged(slam)
    partial = (
        partial_reason(slam, slam.session.status, own_selection=True)
        if slam.session.known
        else "pytest's session is unknown"
    )
    payloads = [_payload(slam), *slam.accounting.worker_payloads]
    return shard_visits(payloads, visited, covered, partial, slam.selection.node_ids, exitstatus)


STALE_SHOWN = 20  # stale entries named in the summary; the rest are counted


def _stale_lines(
    slam: RunEnd,
    store: GoldenStore,
    stale: list[tuple[str, str]],
    more: str = "`slam golden prune --dry-run` lists them all",
) -> list[str]:
    """The summary's stale entries: the first ``STALE_SHOWN`` by name, with the tests they were
    recorded for (each read from its file), then how many more and where to see them."""
    if not stale:
        return []
    one = len(stale) == 1
    lines = [
        f"{len(stale)} stale golden entr{'y' if one else 'ies'} (no test asked for "
        f"{'it' if one else 'them'}); remove with --slm-prune or `slam golden prune`:"
    ]
    for module, key in stale[:STALE_SHOWN]:
        rec = store.lookup(module, key)
        was = f" (recorded for {', '.join(rec.tests)})" if rec is not None and rec.tests else ""
        lines.append(f"  {_shown(slam, store.path_for(module))} {key}{was}")
    if len(stale) > STALE_SHOWN:
        lines.append(f"  ... and {len(stale) - STALE_SHOWN} more ({more})")
    return lines


def _write_stale_report(
    store: GoldenStore, stale: list[tuple[str, str]], partial: str | None
) -> None:
    """This run's findings for `slam golden prune`, or why it was partial (prune then refuses).

    Written where there are goldens or an old report: an old report is always replaced.
    """
    from pytest_slam.golden.stale import stale_report_path, write_stale_report

    path = stale_report_path(store.root)
    if stale or path.exists() or store.dir.is_dir():
        write_stale_report(path, store.reference, stale, partial)


def run_info(slam: RunEnd) -> RunInfo:
    from pytest_slam.report.aggregate import RunInfo
    from pytest_slam.report.runinfo import cost_assumption, reference_name

    reference = slam.settings.reference if slam.settings.has_reference else ""
    return RunInfo(
        models=list(slam.specs.values()),
        reference=reference_name(reference, slam.reference_spec if reference else None),
        settings=slam.settings.as_dict(),
        started=slam.started,
        finished=utc_now(),
        pytest_version=pytest.__version__,
        plugin_version=__version__,
        cost_assumption=cost_assumption(
            slam.specs.values(), slam.reference_spec, slam.tables.prices
        ),
        gpu_telemetry=slam.gpu_line,
    )


def _report(slam: RunEnd, exitstatus: int) -> int:
    """Verdict, baseline, gate, files; the table leads the summary and the gate closes it."""
    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.baseline import format_diff
    from pytest_slam.report.terminal import (
        final_line,
        fit_lines,
        gate_lines,
        render_table,
    )

    outcomes = records(Outcome, [*slam.accounting.outcomes, *slam.engine_outcomes])
    if not outcomes:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            slam.summary.extend(drop_older_reports(slam.settings))
        return exitstatus
    verdict = aggregate(outcomes, run_info(slam))
    diff = _baseline(slam, verdict)
    result = _gate(slam, verdict, diff, exitstatus)
    clean = _write(slam, verdict, outcomes, exitstatus)
    _step_summary(slam, verdict, diff)
    width = slam.width
    status = gated_exitstatus(result, exitstatus)
    tail = [
        *(format_diff(diff) if diff is not None else []),
        *_autosave(slam, verdict, clean, diff),
        *gate_lines(verdict),
    ]
    if status != exitstatus and result is not None:
        tail.append(gate_failed_line(result))
    slam.summary.extend(fit_lines(_human_review(slam, verdict), width))
    slam.summary.lead(render_table(verdict, width))
    slam.summary.extend(fit_lines(tail, width))
    slam.summary.last_line = final_line(verdict, width)
    return status


def drop_older_reports(settings: Settings) -> list[str]:
    """A run interrupted before any test reported (Ctrl-C while an engine warms up) writes no
    report; one an older run left at its path would read as this run's, so it is removed. What
    was removed, one line each."""
    lines = []
    for path, kind in ((settings.report, "JSON"), (settings.html, "HTML")):
        if not path or not os.path.lexists(path):
            continue
        try:
            os.unlink(path)
        except OSError as exc:
            lines.append(
                f"{kind} report: the older {path} is not this run's and could not be "
                f"removed ({exc.strerror or exc}); delete it"
            )
            continue
        lines.append(
            f"{kind} report: none, the run was interrupted before any test reported; "
            f"the older {path} was removed"
        )
    return lines


def _human_review(slam: RunEnd, verdict: Verdict) -> list[str]:
    """The committed blind-review verdicts for this run's candidates, in one line (or none)."""
    if not slam.settings.has_reference:
        return []
    from pytest_slam.review.human_lines import human_review_lines

    root = slam.rootpath / slam.settings.golden_dir
    models = [row.model for row in verdict.models]
    return human_review_lines(root, slam.settings.reference, models)


def _baseline(slam: RunEnd, verdict: Verdict) -> BaselineDiff | None:
    path = slam.baseline
    if not path:
        return None
    from pytest_slam.report.autosave import AUTO, last_run, runs_dir
    from pytest_slam.report.baseline import diff_baseline

    tol = slam.tables.tolerances
    if path != AUTO:
        return diff_baseline(verdict, path, tol)
    last = last_run(runs_dir(slam.rootpath))
    if last is None:
        return None  # the first run: _autosave says so
    diff = diff_baseline(verdict, last, tol)
    diff.baseline = _shown(slam, last)
    return diff


def _autosave(
    slam: RunEnd, verdict: Verdict, outcomes: list[Outcome], diff: BaselineDiff | None
) -> list[str]:
    """``--slm-baseline=auto``: save this run's JSON report for the next run to compare with."""
    from pytest_slam.report.autosave import AUTO, claim_next, runs_dir

    if slam.baseline != AUTO:
        return []
    folder = runs_dir(slam.rootpath)
    first = "no earlier run to compare with; " if diff is None else ""
    try:
        path = claim_next(folder)
        try:
            _write_json(slam, path, verdict, outcomes)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    except OSError as exc:
        return [
            f"baseline auto: {first}this run not saved in {_shown(slam, folder)} "
            f"({exc.strerror or exc}); make that folder writable"
        ]
    return [f"baseline auto: {first}this run saved as {_shown(slam, path)}"]


def _gate(
    slam: RunEnd, verdict: Verdict, diff: BaselineDiff | None, exitstatus: int
) -> GateResult | None:
    """The gate's result, or None when no rule applied; a partial run is never passed."""
    from pytest_slam.report.gate import apply_gate, evaluate, incomplete_reason

    breaches = _budget_breaches(slam, verdict)
    slam.hook.pytest_slam_gate(verdict=verdict, breaches=breaches)
    gate = slam.tables.gate  # no_regression unset: on with a baseline
    stopped = slam.session.stopped if slam.session.known else False
    # A not-swapped test ran (it has no evidence, which fails the gate on its own): not incomplete;
    # so did a test that made no model call.
    tests_run = sum(
        row.tests_run + row.tests_not_swapped + row.tests_no_calls for row in verdict.models
    )
    why = incomplete_reason(exitstatus, stopped, tests_run, slam.accounting.workers_lost)
    result = evaluate(gate, verdict, diff, breaches, incomplete=why)
    apply_gate(verdict, result)
    return result if result.configured else None


def _budget_breaches(slam: RunEnd, verdict: Verdict) -> list[str]:
    """``[tool.slam.budget]`` checked against each model's flat aggregate of its calls."""
    from pytest_slam.report.budgets import session_budget_breaches

    return session_budget_breaches(
        slam.tables.budget, list(slam.specs), slam.accounting.outcomes, verdict
    )


def _write(
    slam: RunEnd, verdict: Verdict, outcomes: list[Outcome], exitstatus: int
) -> list[Outcome]:
    """Both files; a write that fails now (disk full, folder removed) is said, not a traceback.
    Returns the outcomes as written: scrubbed of secrets."""
    from pytest_slam.golden.redact import scrub
    from pytest_slam.report.html import write_html

    # A key quoted in a prompt or an answer never reaches a report: scrubbed once, for both files
    # (the records are rebuilt only when a secret was found: scrub hands back what it was given).
    plain: JSON = [o.as_dict() for o in outcomes]
    scrubbed = scrub(plain)
    clean = outcomes if scrubbed is plain else records(Outcome, scrubbed)
    visits = _visits(slam, exitstatus) if slam.settings.report else None
    json_writer = partial(_write_json, slam, visits=visits, rows=scrubbed)
    writers = (
        (slam.settings.report, "JSON", options.REPORT, json_writer),
        (slam.settings.html, "HTML", options.HTML, partial(write_html, history=_history(slam))),
    )
    for path, kind, flag, write in writers:
        if not path:
            continue
        try:
            slam.summary.append(f"{kind} report: {write(path, verdict, clean)}")
        except OSError as exc:
            slam.summary.append(
                f"{kind} report not written to {path} ({exc.strerror or exc}); "
                f"give {flag} a writable path"
            )
    return clean


def _history(slam: RunEnd) -> list[tuple[str, dict[str, float]]] | None:
    """``--slm-baseline=auto``: the saved runs' means, for the HTML report's trend chart."""
    from pytest_slam.report.autosave import AUTO, history, runs_dir

    return history(runs_dir(slam.rootpath)) if slam.baseline == AUTO else None


def _write_json(
    slam: RunEnd,
    path: str | Path,
    verdict: Verdict,
    outcomes: list[Outcome],
    visits: Visits | None = None,
    rows: list[dict[str, JSON]] | None = None,
) -> Path:
    """The JSON report, after ``pytest_slam_report`` (hookspecs.py) had its say on the document.
    ``rows``: the outcomes as plain data already, in their order (``report_dict``)."""
    from pytest_slam.report.jsonreport import report_dict, report_text
    from pytest_slam.util.files import atomic_write

    document = report_dict(verdict, outcomes, visits, rows)
    slam.hook.pytest_slam_report(document=document)
    return atomic_write(path, report_text(document))


def _step_summary(slam: RunEnd, verdict: Verdict, diff: BaselineDiff | None) -> None:
    """On GitHub Actions the verdict also lands on the run's page, as a Markdown table."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from pytest_slam.report.markdown import render_markdown

    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(render_markdown(verdict, diff) + "\n")
    except OSError as exc:
        slam.summary.append(f"GITHUB_STEP_SUMMARY={path} not written ({exc.strerror or exc})")
