"""The end of a run: write the golden files, find stale entries, write the reports, apply the gate.

A worker only flushes its goldens and publishes what it saw; the controller (or the serial process)
merges, reports and gates. The gate has its own exit status (``options.EXIT_GATE_FAILED``) so a CI
log tells a failed gate from failed tests.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_slam import __version__
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.records import JSON, Outcome, records, utc_now
from pytest_slam.run import options
from pytest_slam.run.exitstatus import gate_failed, gate_failed_line
from pytest_slam.run.shardvisits import shard_ids

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.aggregate import RunInfo, Verdict
    from pytest_slam.report.baseline import BaselineDiff
    from pytest_slam.report.gate_result import GateResult
    from pytest_slam.run.session import SlamSession


def finish(slam: SlamSession, session: pytest.Session, exitstatus: int) -> int:
    if not slam.armed:
        return exitstatus
    if slam.runs_tests:
        _flush(slam)
    if slam.role == "worker":
        workeroutput: dict[str, object] = vars(slam.config)["workeroutput"]  # set by xdist
        workeroutput["slam"] = _payload(slam)
        return exitstatus
    for data in slam.worker_payloads:  # what each worker wrote (golden files) or could not
        slam.summary.extend(line for line in data["summary"] if line not in slam.summary)
    if slam.settings.has_reference:
        _stale(slam)
    if slam.config.option.collectonly:
        return exitstatus
    line = nothing_opted_in(slam, session, exitstatus)
    if line:
        slam.summary.append(line)
    return _report(slam, exitstatus)


OPT_IN = (
    "opt tests in with the slm_model fixture, @pytest.mark.slm on a test, class or module, "
    'slm_opt_in = True in a conftest.py, or [tool.slam] paths = ["tests/llm"]'
)


def nothing_opted_in(slam: SlamSession, session: pytest.Session, exitstatus: int) -> str | None:
    """The one line a first run gets when tests ran but none was opted in: nothing was swapped,
    how many requests went to the original endpoint instead, and how to opt in."""
    if slam.outcomes or not session.testscollected or exitstatus == pytest.ExitCode.INTERRUPTED:
        return None
    sent = sum(int(str(p.get("unswapped") or 0)) for p in [_payload(slam), *slam.worker_payloads])
    from pytest_slam.swap.router import Upstream

    models = ", ".join(slam.specs)
    where = (slam.router.original if slam.router else Upstream.from_env(dict(os.environ))).base_url
    went = (
        f"{sent} model request(s) went unswapped to the original endpoint {where} (an error such "
        "as \"502 ... unreachable\" there is that endpoint's, not a candidate's)"
        if sent
        else "no model request went through the swap"
    )
    return f"nothing was opted in, so no test ran on {models}: {went}; {OPT_IN}"


def _flush(slam: SlamSession) -> None:
    """Write this process's recorded answers (each file once, under its lock, atomically)."""
    if slam.store is None:
        return
    try:
        written = slam.store.flush()
    except GoldenError as exc:
        slam.summary.append(f"golden files not written: {exc}")
        return
    for path in written:
        slam.summary.append(f"golden answers written: {_shown(slam, path)}")


def _shown(slam: SlamSession, path: Path) -> str:
    """A path as the user reads it: relative to the rootdir when it is inside it."""
    try:
        return str(Path(path).relative_to(slam.config.rootpath))
    except ValueError:
        return str(path)


def _payload(slam: SlamSession) -> dict[str, JSON]:
    visited = slam.store.visited if slam.store is not None else {}
    return {
        "visited": {m: sorted(keys) for m, keys in visited.items()},
        "failed_tests": sorted(slam.failed_tests),
        "coverage": sorted(slam.coverage - slam.partial),
        "deselected": slam.deselected_count,  # a worker's -k/-m: the whole run is partial
        "summary": list(slam.summary),
        "unswapped": slam.router.unswapped if slam.router is not None else 0,
        **shard_ids(slam.config),  # for the report's visits (run/shardvisits.py)
    }


def _merged(slam: SlamSession) -> tuple[dict[str, set[str]], set[str], set[str]]:
    payloads = [_payload(slam), *slam.worker_payloads]
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


def _stale(slam: SlamSession) -> None:
    """Report (or prune) the entries no test asked for; leave the report `slam golden prune` reads.

    Judged only after a complete run (``SlamSession.partial_reason``): after Ctrl-C, a crash, -x,
    -k, node ids, a collection error, an engine that did not start or a lost worker, an unvisited
    entry may just belong to a test that never ran. A partial run says why in the report, so prune
    refuses it. Modules with a failed or skipped test are not judged either (see ``_merged``).
    """
    visited, covered, failed = _merged(slam)
    if slam.config.option.collectonly:
        return
    store = _store(slam)
    why_not = _unjudged(slam)
    covered -= {t.split("::", 1)[0] for t in failed}
    try:
        if why_not:
            lines = [f"stale golden entries not checked: {why_not}"]
            if slam.config.option.slm_prune:
                lines = [f"--slm-prune removed nothing: this run was partial ({why_not})"]
            stale = []
        else:
            stale = store.stale(visited, covered, failed)
            lines = _stale_lines(slam, store, stale)
            if stale and slam.config.option.slm_prune:
                lines = _prune(slam, store, stale)
                stale = []
        _write_stale_report(store, stale, why_not)
    except (GoldenError, OSError) as exc:
        slam.summary.append(f"stale golden entries not checked: {exc}")
        return
    slam.summary.extend(lines)


def _prune(slam: SlamSession, store: GoldenStore, stale: list[tuple[str, str]]) -> list[str]:
    """``--slm-prune``: remove the stale entries, each kept in a trash file first; say how to undo."""
    from pytest_slam.golden.trash import Trash

    listed = _stale_lines(slam, store, stale)[1:]
    trash = Trash(store.root, store.reference)
    removed = store.prune(stale, trash.add)
    undo = f"; undo with `slam golden restore {_shown(slam, trash.path)}`" if trash.path else ""
    return [f"pruned {removed} stale golden entr{'y' if removed == 1 else 'ies'}{undo}:", *listed]


def _store(slam: SlamSession) -> GoldenStore:
    from pytest_slam.golden.store import GoldenStore

    if slam.store is not None:
        return slam.store
    root = Path(slam.config.rootpath) / slam.settings.golden_dir
    return GoldenStore(root, slam.settings.reference)


def _unjudged(slam: SlamSession) -> str | None:
    """Why this run cannot tell a stale entry from one whose test never ran (None: it can)."""
    session = slam.config.pluginmanager.get_plugin("session")
    if session is None:
        return "pytest's session is unknown"
    deselected = sum(data.get("deselected", 0) for data in slam.worker_payloads)
    return slam.partial_reason(session, deselected)


def _stale_lines(slam: SlamSession, store: GoldenStore, stale: list[tuple[str, str]]) -> list[str]:
    if not stale:
        return []
    one = len(stale) == 1
    lines = [
        f"{len(stale)} stale golden entr{'y' if one else 'ies'} (no test asked for "
        f"{'it' if one else 'them'}); remove with --slm-prune or `slam golden prune`:"
    ]
    for module, key in stale:
        rec = store.lookup(module, key)
        was = f" (recorded for {', '.join(rec.tests)})" if rec is not None and rec.tests else ""
        lines.append(f"  {_shown(slam, store.path_for(module))} {key}{was}")
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


def run_info(slam: SlamSession) -> RunInfo:
    from pytest_slam.report.aggregate import RunInfo
    from pytest_slam.report.runinfo import cost_assumption, reference_name

    reference = slam.settings.reference if slam.settings.has_reference else ""
    return RunInfo(
        models=list(slam.specs.values()),
        reference=reference_name(reference, slam.reference_spec if reference else None),
        settings=slam.settings.as_dict(),
        started=slam.started, finished=utc_now(),
        pytest_version=pytest.__version__, plugin_version=__version__,
        cost_assumption=cost_assumption(slam.specs.values(), slam.reference_spec,
                                        slam.settings.prices),
        gpu_telemetry=slam.gpu_line,
    )  # fmt: skip


def _report(slam: SlamSession, exitstatus: int) -> int:
    """Verdict, baseline, gate, files; the table leads the summary and the gate closes it."""
    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.baseline import format_diff
    from pytest_slam.report.terminal import (
        final_line,
        fit_lines,
        gate_lines,
        render_table,
        terminal_width,
    )

    outcomes = records(Outcome, [*slam.outcomes, *slam.engine_outcomes()])  # from the reports
    if not outcomes:
        if exitstatus == pytest.ExitCode.INTERRUPTED:
            slam.summary.extend(drop_older_reports(slam))
        return exitstatus
    verdict = aggregate(outcomes, run_info(slam))
    diff = _baseline(slam, verdict)
    result = _gate(slam, verdict, diff, exitstatus)
    clean = _write(slam, verdict, outcomes, exitstatus)
    _step_summary(slam, verdict, diff)
    width = terminal_width(slam.config)
    failed = gate_failed(result, exitstatus)
    tail = [*(format_diff(diff) if diff is not None else []), *_autosave(slam, verdict, clean, diff),
            *gate_lines(verdict)]  # fmt: skip
    if failed and result is not None:
        tail.append(gate_failed_line(result))
    slam.summary.extend(fit_lines(_human_review(slam, verdict), width))
    slam.summary[:0] = render_table(verdict, width)
    slam.summary.extend(fit_lines(tail, width))
    slam.last_line = final_line(verdict, width)
    return options.EXIT_GATE_FAILED if failed else exitstatus


def drop_older_reports(slam: SlamSession) -> list[str]:
    """A run interrupted before any test reported (Ctrl-C while an engine warms up) writes no
    report; one an older run left at its path would read as this run's, so it is removed. What
    was removed, one line each."""
    lines = []
    for path, kind in ((slam.settings.report, "JSON"), (slam.settings.html, "HTML")):
        if not path or not os.path.lexists(path):
            continue
        try:
            os.unlink(path)
        except OSError as exc:
            lines.append(f"{kind} report: the older {path} is not this run's and could not be "
                         f"removed ({exc.strerror or exc}); delete it")  # fmt: skip
            continue
        lines.append(f"{kind} report: none, the run was interrupted before any test reported; "
                     f"the older {path} was removed")  # fmt: skip
    return lines


def _human_review(slam: SlamSession, verdict: Verdict) -> list[str]:
    """The committed blind-review verdicts for this run's candidates, in one line (or none)."""
    if not slam.settings.has_reference:
        return []
    from pytest_slam.review.summary import human_review_lines

    root = Path(slam.config.rootpath) / slam.settings.golden_dir
    models = [row.model for row in verdict.models]
    return human_review_lines(root, slam.settings.reference, models)


def _baseline(slam: SlamSession, verdict: Verdict) -> BaselineDiff | None:
    path = slam.config.option.slm_baseline
    if not path:
        return None
    from pytest_slam.report.autosave import AUTO, last_run, runs_dir
    from pytest_slam.report.baseline import Tolerances, diff_baseline

    tol = Tolerances.from_config(slam.settings.baseline)
    if path != AUTO:
        return diff_baseline(verdict, path, tol)
    last = last_run(runs_dir(slam.config.rootpath))
    if last is None:
        return None  # the first run: _autosave says so
    diff = diff_baseline(verdict, last, tol)
    diff.baseline = _shown(slam, last)
    return diff


def _autosave(
    slam: SlamSession, verdict: Verdict, outcomes: list[Outcome], diff: BaselineDiff | None
) -> list[str]:
    """``--slm-baseline=auto``: save this run's JSON report for the next run to compare with."""
    from pytest_slam.report.autosave import AUTO, claim_next, runs_dir
    from pytest_slam.report.jsonreport import write_json

    if slam.config.option.slm_baseline != AUTO:
        return []
    folder = runs_dir(slam.config.rootpath)
    first = "no earlier run to compare with; " if diff is None else ""
    try:
        path = claim_next(folder)
        try:
            write_json(path, verdict, outcomes)
        except BaseException:
            path.unlink(missing_ok=True)
            raise
    except OSError as exc:
        return [f"baseline auto: {first}this run not saved in {_shown(slam, folder)} "
                f"({exc.strerror or exc}); make that folder writable"]  # fmt: skip
    return [f"baseline auto: {first}this run saved as {_shown(slam, path)}"]


def _gate(
    slam: SlamSession, verdict: Verdict, diff: BaselineDiff | None, exitstatus: int
) -> GateResult | None:
    """The gate's result, or None when no rule applied; a partial run is never passed."""
    from pytest_slam.report.gate import Gate, apply_gate, evaluate, incomplete_reason

    breaches = slam.session_budget_breaches(verdict)
    gate = Gate.from_config(slam.settings.gate)
    if diff is not None and "no_regression" not in slam.settings.gate:
        gate.no_regression = True  # a baseline given on the command line is meant to be enforced
    session = slam.config.pluginmanager.get_plugin("session")
    stopped = session is not None and (session.shouldfail or session.shouldstop)
    # A not-swapped test ran (it has no evidence, which fails the gate on its own): not incomplete;
    # so did a test that made no model call.
    tests_run = sum(
        row.tests_run + row.tests_not_swapped + row.tests_no_calls for row in verdict.models
    )
    why = incomplete_reason(exitstatus, stopped, tests_run, getattr(slam, "workers_lost", 0))
    result = evaluate(gate, verdict, diff, breaches, incomplete=why)
    apply_gate(verdict, result)
    return result if result.configured else None


def _write(
    slam: SlamSession, verdict: Verdict, outcomes: list[Outcome], exitstatus: int
) -> list[Outcome]:
    """Both files; a write that fails now (disk full, folder removed) is said, not a traceback.
    Returns the outcomes as written: scrubbed of secrets."""
    from pytest_slam.golden.redact import scrub
    from pytest_slam.report.html import write_html
    from pytest_slam.report.jsonreport import write_json
    from pytest_slam.run.shardvisits import shard_visits

    # A key quoted in a prompt or an answer never reaches a report: scrubbed once, for both files
    # (the records are rebuilt only when a secret was found: scrub hands back what it was given).
    plain: JSON = [o.as_dict() for o in outcomes]
    scrubbed = scrub(plain)
    clean = outcomes if scrubbed is plain else records(Outcome, scrubbed)
    visits = shard_visits(slam, exitstatus) if slam.settings.report else None
    json_report = functools.partial(write_json, visits=visits)
    for path, kind, flag, write in ((slam.settings.report, "JSON", options.REPORT, json_report),
                                    (slam.settings.html, "HTML", options.HTML, write_html)):  # fmt: skip
        if not path:
            continue
        try:
            slam.summary.append(f"{kind} report: {write(path, verdict, clean)}")
        except OSError as exc:
            slam.summary.append(f"{kind} report not written to {path} ({exc.strerror or exc}); "
                                f"give {flag} a writable path")  # fmt: skip
    return clean


def _step_summary(slam: SlamSession, verdict: Verdict, diff: BaselineDiff | None) -> None:
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
