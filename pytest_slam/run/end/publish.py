"""The end of a run, stage 3 of 3 (finish.py: collect -> judge -> publish): files and summary.

One input, ``Judged``; one output, the ``Exit`` the judge decided (run/end/exitstatus.py). What the
end publishes is a table, ``WRITERS``, as the report's columns are (report/columns.py): each entry
says whether this run has it and writes it, returning its summary lines; a new output is one
entry. The summary is
then composed: the collected lines, the writers' lines, the committed human review, the verdict
table leading, and the tail (baseline diff, the saved run, the gate, why the status changed).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_slam.records import JSON, Outcome
from pytest_slam.run.end.exitstatus import Exit, unwritten_exit
from pytest_slam.run.end.judge_stage import Judged
from pytest_slam.run.end.unvisited import write_report
from pytest_slam.settings import Settings
from pytest_slam.util.files import append_text, writing

if TYPE_CHECKING:
    from pytest_slam.report.aggregate import Verdict
    from pytest_slam.report.visits import Visits


@dataclass(frozen=True)
class Writer:
    """One thing the end publishes. ``wanted``: whether this run has it; ``write``: does it and
    returns its summary lines; ``tail``: those lines close the summary, after the baseline diff."""

    name: str
    wanted: Callable[[Judged], bool]
    write: Callable[[Judged], list[str]]
    tail: bool = False


def publish(judged: Judged) -> Exit:
    """Every wanted writer, in the table's order; then the summary; the exit status as judged,
    or incomplete when a file could not be written (``WriteFailed``, caught here for every
    writer: its one line names the file, the error and the fix; a shard key that cannot be read,
    ``ShardKeyError``, leaves the JSON report unwritten the same way)."""
    body: list[str] = []
    tail: list[str] = []
    unwritten = judged.collected.gathered.unwritten
    for writer in WRITERS:
        if writer.wanted(judged):
            try:
                (tail if writer.tail else body).extend(writer.write(judged))
            except OSError as exc:  # WriteFailed (its file, error, fix), or a shard key unread
                unwritten.append(f"{writer.name} not written: {exc}")
    summary = judged.collected.gathered.summary
    summary.extend(judged.collected.gathered.lines)
    summary.extend(body)
    exit_ = unwritten_exit(judged.exit, unwritten)
    summary.extend(unwritten)
    if judged.verdict is not None:
        _verdict_lines(judged, judged.verdict, tail, exit_)
    elif exit_.line and exit_ is not judged.exit:
        summary.extend([exit_.line])
    return exit_


def _verdict_lines(judged: Judged, verdict: Verdict, tail: list[str], exit_: Exit) -> None:
    """The verdict table leads the summary; the diff, the saved run and the gate close it."""
    from pytest_slam.report.baseline import format_diff
    from pytest_slam.report.terminal import final_line, fit_lines, gate_lines, render_table

    summary, width = judged.collected.gathered.summary, judged.collected.choices.width
    closing = [
        *(format_diff(judged.diff) if judged.diff is not None else []),
        *tail,
        *gate_lines(verdict),
        *([exit_.line] if exit_.line else []),
    ]
    summary.extend(fit_lines(judged.human, width))
    summary.lead(render_table(verdict, width))
    summary.extend(fit_lines(closing, width))
    summary.last_line = final_line(verdict, width)


# -- the writers -------------------------------------------------------------------------------


def _hand_payload(judged: Judged) -> list[str]:
    """A worker hands what it saw to its controller, through xdist's ``workeroutput``."""
    from pytest_slam.run.workers.crossing import CARRIED, carried

    gathered = judged.collected.gathered
    assert gathered.workeroutput is not None and gathered.payload is not None  # wanted
    gathered.workeroutput["slam"], gathered.workeroutput[CARRIED] = carried(gathered.payload)
    return []


def _stale_report(judged: Judged) -> list[str]:
    """The stale report `slam golden prune` reads (run/end/unvisited.py), and its lines."""
    assert judged.collected.gathered.stale is not None  # wanted
    return write_report(judged.collected.gathered.stale)


def _hint(judged: Judged) -> list[str]:
    """Nothing was opted in: what went where, and how to opt in (collect.nothing_opted_in)."""
    hint = judged.collected.gathered.hint
    return [hint] if hint else []


def _interrupted_unreported(judged: Judged) -> bool:
    collected = judged.collected
    return collected.reached == "nothing reported" and (
        collected.status == pytest.ExitCode.INTERRUPTED
    )


def _older_reports(judged: Judged) -> list[str]:
    return drop_older_reports(judged.collected.setup.settings)


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


def _report_file(kind: str, write: Callable[[], object]) -> list[str]:
    """A report file's line; a write that fails now (disk full, folder removed) raises
    ``WriteFailed``, said by ``publish``, not a traceback."""
    return [f"{kind} report: {write()}"]


def _json(judged: Judged) -> list[str]:
    """The JSON report, with the run's visits (what a shard merge needs)."""
    path, collected = judged.collected.setup.settings.report or "", judged.collected
    assert judged.verdict is not None  # wanted
    verdict, visits, rows = judged.verdict, collected.gathered.visits, judged.rows
    hook = collected.setup.hook
    write = partial(write_json, hook, path, verdict, judged.outcomes, visits, rows)
    return _report_file("JSON", write)


def _html(judged: Judged) -> list[str]:
    """The HTML report, with the saved runs' trend under --slm-baseline=auto."""
    from pytest_slam.report.autosave import AUTO, history, runs_dir
    from pytest_slam.report.html import write_html

    collected, path = judged.collected, judged.collected.setup.settings.html or ""
    assert judged.verdict is not None  # wanted
    verdict, outcomes = judged.verdict, _records(judged.outcomes)
    auto = collected.choices.baseline == AUTO
    trend = history(runs_dir(collected.rootpath)) if auto else None
    write = partial(write_html, path, verdict, outcomes, history=trend)
    return _report_file("HTML", write)


def _records(outcomes: Sequence[Outcome]) -> Sequence[Outcome]:
    """Every outcome as a record at once, their strings shared, for a writer that holds them all
    (the HTML report's page)."""
    from pytest_slam.report.packed import PackedRun

    return outcomes.shared() if isinstance(outcomes, PackedRun) else outcomes


def _step_summary(judged: Judged) -> list[str]:
    """On GitHub Actions the verdict also lands on the run's page, as a Markdown table."""
    from pytest_slam.report.markdown import render_markdown

    path = os.environ["GITHUB_STEP_SUMMARY"]
    assert judged.verdict is not None  # wanted
    append_text(path, render_markdown(judged.verdict, judged.diff) + "\n")  # GitHub's file
    return []


def _autosave(judged: Judged) -> list[str]:
    """``--slm-baseline=auto``: save this run's JSON report for the next run to compare with."""
    from pytest_slam.report.autosave import claim_next, runs_dir

    collected = judged.collected
    assert judged.verdict is not None  # wanted
    folder = runs_dir(collected.rootpath)
    first = "no earlier run to compare with; " if judged.diff is None else ""
    shown = collected.gathered.summary.shown
    with writing(folder):
        path = claim_next(folder)
    try:
        write_json(collected.setup.hook, path, judged.verdict, judged.outcomes)
    except BaseException:
        path.unlink(missing_ok=True)  # no empty run left for the next to compare with
        raise
    return [f"baseline auto: {first}this run saved as {shown(path)}"]


def write_json(
    hook: Any,
    path: str | Path,
    verdict: Verdict,
    outcomes: Sequence[Outcome],
    visits: Visits | None = None,
    rows: list[dict[str, JSON]] | None = None,
) -> Path:
    """The JSON report, after ``pytest_slam_report`` (hookspecs.py) had its say on the document.
    ``rows``: the outcomes as plain data already, in their order (``report_dict``)."""
    from pytest_slam.report import jsonreport
    from pytest_slam.report.jsonreport import report_dict, report_text
    from pytest_slam.util.files import atomic_write

    if rows is None and not hook.pytest_slam_report.get_hookimpls():
        # nobody edits the document: streamed, one outcome at a time (the same bytes)
        return jsonreport.write_json(path, verdict, outcomes, visits)
    document = report_dict(verdict, outcomes, visits, rows)
    hook.pytest_slam_report(document=document)
    return atomic_write(path, report_text(document))


def _reported(judged: Judged) -> bool:
    return judged.verdict is not None


def _auto(judged: Judged) -> bool:
    from pytest_slam.report.autosave import AUTO

    return _reported(judged) and judged.collected.choices.baseline == AUTO


# What the end publishes, in order; a writer's lines go to the summary in the same order.
WRITERS: tuple[Writer, ...] = (
    Writer("xdist payload", lambda j: j.collected.gathered.workeroutput is not None, _hand_payload),
    Writer("stale report", lambda j: j.collected.gathered.stale is not None, _stale_report),
    Writer("nothing opted in", lambda j: j.collected.gathered.hint is not None, _hint),
    Writer("older reports removed", _interrupted_unreported, _older_reports),
    Writer(
        "JSON report", lambda j: _reported(j) and bool(j.collected.setup.settings.report), _json
    ),
    Writer("HTML report", lambda j: _reported(j) and bool(j.collected.setup.settings.html), _html),
    Writer(
        "GitHub step summary",
        lambda j: _reported(j) and bool(os.environ.get("GITHUB_STEP_SUMMARY")),
        _step_summary,
    ),
    Writer("baseline auto", _auto, _autosave, tail=True),
)
