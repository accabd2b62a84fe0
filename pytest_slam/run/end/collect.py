"""The end of a run, stage 1 of 3 (finish.py: collect -> judge -> publish): what the run left.

This process's golden answers flushed, the xdist workers' payloads merged (their summaries, the
entries they visited, the modules they ran whole), the stale entries found (or pruned), the run's
outcomes and its ``RunInfo``. One input, ``Ended`` (run/end/ended.py: what the session hands over);
one output, ``Collected``, which the judge reads and hands on to publish.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.records import JSON, Outcome, records
from pytest_slam.run.end.ended import Choices, Ended, Setup
from pytest_slam.run.end.exitstatus import Reached
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.end.unvisited import Merged, Stale, find_stale
from pytest_slam.util.files import WriteFailed
from pytest_slam.util.heaptrim import trim_heap

if TYPE_CHECKING:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.aggregate import RunInfo
    from pytest_slam.report.visits import Visits


@dataclass(frozen=True)
class Gathered:
    """What collect gathered for publish alone; the judge hands it on as it is."""

    summary: Summary  # where publish says it all
    lines: list[str] = field(default_factory=list)  # the swap's, the goldens', the workers'
    stale: Stale | None = None
    hint: str | None = None  # nothing was opted in
    payload: dict[str, JSON] | None = None  # a worker's, for the controller
    workeroutput: dict[str, object] | None = None  # xdist's, on a worker
    visits: Visits | None = None  # the JSON report's, when one is written
    # What the run could not write (a full disk, a read-only folder), one line each, this
    # process's and its workers', then publish's own: the run is incomplete (exitstatus.py)
    unwritten: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Collected:
    """Collect's one output: what the judge reads, and ``gathered`` for publish. ``setup``,
    ``choices`` and ``rootpath`` serve both."""

    reached: Reached
    status: int  # pytest's
    setup: Setup
    choices: Choices
    rootpath: Path  # pytest's rootdir: the goldens' and the saved runs' folders are under it
    gathered: Gathered
    # the tests' and the engines' starts, packed (report/packed.PackedRun): a record each is read
    outcomes: Sequence[Outcome] = ()
    info: RunInfo | None = None
    test_outcomes: Sequence[dict[str, Any]] = ()  # the tests' (budgets), packed: read once each
    stopped: str | bool = False  # pytest's word, when its session is known
    workers_lost: int = 0


def collect(ended: Ended) -> Collected:
    """This process's goldens flushed, then a worker's payload, or the merged run and its stale."""
    roles = ended.roles
    lines, unwritten = [*ended.swap.said], list[str]()
    if roles.role != "controller":
        lines.extend(flush(roles.store, roles.summary, unwritten))
    own = payload(ended, [*roles.summary.lines, *lines], unwritten)
    if roles.store is not None:  # the tests' reads are over: the report's peak is next
        roles.store.release()
    trim_heap()  # what the tests freed, not kept resident under the report's records
    if roles.role == "worker":
        gathered = Gathered(roles.summary, lines, payload=own, workeroutput=ended.workeroutput)
        return _collected(ended, "worker", gathered)
    payloads = [own, *roles.accounting.worker_payloads]
    lines.extend(merged_lines([*roles.summary.lines, *lines], payloads[1:]))
    lines.extend(fetched_ahead_lines(payloads[1:], ended.choices.width))
    lines.extend(paid_reused_lines(payloads[1:]))
    lines.extend(cache_lines(payloads[1:], ended.choices.width))
    unwritten = merged_lines([], [{"summary": p.get("unwritten") or []} for p in payloads])
    if ended.choices.collectonly:
        return _collected(
            ended, "collect-only", Gathered(roles.summary, lines, unwritten=unwritten)
        )
    return _merged_run(ended, lines, payloads, unwritten)


def _collected(ended: Ended, reached: Reached, gathered: Gathered, **more: Any) -> Collected:
    status, rootpath = ended.facts.status, ended.roles.selection.rootpath
    return Collected(reached, status, ended.setup, ended.choices, rootpath, gathered, **more)


def _merged_run(
    ended: Ended, lines: list[str], payloads: list[dict[str, Any]], unwritten: list[str]
) -> Collected:
    """The run as one, workers merged: its outcomes, stale entries, visits and run info."""
    roles, facts, settings = ended.roles, ended.facts, ended.setup.settings
    merged = Merged.of(roles.role, payloads)
    stale = find_stale(ended, merged) if settings.has_reference else None
    # packed, read one at a time by each reader: never every outcome as a record at once
    outcomes = roles.accounting.outcomes.run(records(Outcome, ended.swap.engine_outcomes))
    gathered = Gathered(
        roles.summary,
        lines,
        stale=stale,
        hint=nothing_opted_in(ended, payloads),
        visits=visits(ended, merged, payloads) if outcomes and settings.report else None,
        unwritten=unwritten,
    )
    return _collected(
        ended,
        "reported" if outcomes else "nothing reported",
        gathered,
        outcomes=outcomes,
        info=run_info(ended.setup) if outcomes else None,
        test_outcomes=roles.accounting.outcomes,
        stopped=facts.stopped if facts.known else False,
        workers_lost=roles.accounting.workers_lost,
    )


def flush(store: GoldenStore | None, summary: Summary, unwritten: list[str]) -> list[str]:
    """Write this process's recorded answers (each file once, under its lock, atomically); a file
    that could not be written is one line in ``unwritten`` (the run is incomplete)."""
    if store is None:
        return []
    lines: list[str] = []
    try:
        written = store.flush()
    except GoldenError as exc:
        lines.append(f"golden files not written: {exc}")
        written = []
    except WriteFailed as exc:  # the store lock itself could not be made
        store.unwritten.append(exc)
        written = []
    unwritten.extend(f"golden answers not written: {exc}" for exc in store.unwritten)
    # a killed promote or prune found and recovered by this run's writes: say so
    said = [*store.recovered, *store.notes]
    lines.extend(line.removeprefix("slam golden: ") for line in said)
    lines.extend(f"golden answers written: {summary.shown(path)}" for path in written)
    return lines


def payload(ended: Ended, lines: list[str], unwritten: list[str]) -> dict[str, JSON]:
    """What this process saw, as a worker hands it to the controller (``lines``: its summary;
    ``unwritten``: the files it could not write)."""
    store, roles = ended.roles.store, ended.roles
    visited = store.visited if store is not None else {}
    return {
        "visited": {m: sorted(keys) for m, keys in visited.items()},
        "failed_tests": sorted(roles.accounting.failed_tests),
        "coverage": roles.selection.covered(),
        "deselected": roles.selection.deselected_count,  # a worker's -k/-m: the run is partial
        "summary": list(lines),
        "unwritten": list(unwritten),
        "unswapped": ended.swap.unswapped,
        "fetched_ahead": list(ended.swap.fetched_ahead),  # the controller adds them up
        "paid_reused": list(ended.swap.paid_reused),
        "cache": dict(ended.swap.cache),
        **ended.shard_ids,  # this process's collected and selected ids (run/workers/shardvisits.py)
    }


def merged_lines(before: list[str], payloads: list[dict[str, Any]]) -> list[str]:
    """The workers' lines, each once: workers often say the same thing (a file written)."""
    seen, out = set(before), []
    for data in payloads:
        for line in data["summary"]:
            if line not in seen:
                seen.add(line)
                out.append(line)
    return out


def fetched_ahead_lines(payloads: list[dict[str, Any]], width: int) -> list[str]:
    """One line per model for the answers the workers fetched ahead, added up: each worker
    printed its own, with no worker named (issue 52)."""
    from pytest_slam.report.terminal import fit_lines
    from pytest_slam.swap.ahead import merged

    tallies = merged(t for p in payloads for t in p.get("fetched_ahead") or ())
    return fit_lines([t.line() for t in tallies], width)


def cache_lines(payloads: list[dict[str, Any]], width: int) -> list[str]:
    """One line for the answer cache of every worker, its counts added up."""
    from pytest_slam.report.terminal import fit_lines
    from pytest_slam.swap.cache import merged_line

    line = merged_line([p["cache"] for p in payloads if isinstance(p.get("cache"), dict)])
    return fit_lines([line], width) if line else []


def paid_reused_lines(payloads: list[dict[str, Any]]) -> list[str]:
    """One line for the reference answers the workers reused from an earlier refresh."""
    from pytest_slam.golden.paid import reused_line

    counts = [p["paid_reused"] for p in payloads if len(p.get("paid_reused") or ()) == 2]
    if not counts:
        return []
    return [reused_line(int(sum(c[0] for c in counts)), min(float(c[1]) for c in counts))]


def visits(ended: Ended, merged: Merged, payloads: list[dict[str, Any]]) -> Visits:
    """The report's ``visits``: what shards need to be merged and judged for staleness."""
    from pytest_slam.run.workers.runid import run_identity
    from pytest_slam.run.workers.shardvisits import shard_visits

    partial = ended.partial_reason(own_selection=True)
    node_ids = ended.roles.selection.node_ids
    status = ended.facts.status
    run = run_identity(ended.roles.selection.rootpath)
    return shard_visits(payloads, merged.visited, merged.covered, partial, node_ids, status, run)


OPT_IN = (
    "opt tests in with the slm_model fixture, @pytest.mark.slm on a test, class or module, "
    'slm_opt_in = True in a conftest.py, [tool.slam] paths = ["tests/llm"], or from the command '
    "line -o slm_paths=tests/llm"
)


def nothing_opted_in(ended: Ended, payloads: list[dict[str, Any]]) -> str | None:
    """The one line a first run gets when tests ran but none was opted in: nothing was swapped,
    how many requests went to the original endpoint instead, and how to opt in."""
    facts = ended.facts
    if ended.roles.accounting.outcomes or not facts.collected:
        return None
    if facts.status == pytest.ExitCode.INTERRUPTED:
        return None
    sent = sum(int(str(p.get("unswapped") or 0)) for p in payloads)
    models = ", ".join(ended.setup.specs)
    went = (
        f"{sent} model request(s) went unswapped to the original endpoint "
        f'{ended.swap.original_url} (an error such as "502 ... unreachable" there is that '
        "endpoint's, not a candidate's)"
        if sent
        else "no model request went through the swap"
    )
    return f"nothing was opted in, so no test ran on {models}: {went}; {OPT_IN}"


def run_info(setup: Setup) -> RunInfo:
    """The run as the report states it: models, reference, settings, versions, prices, GPU."""
    from pytest_slam import __version__
    from pytest_slam.records import utc_now
    from pytest_slam.report.aggregate import RunInfo
    from pytest_slam.report.runinfo import cost_assumption, reference_name

    settings = setup.settings
    reference = settings.reference if settings.has_reference else ""
    prices = setup.tables.prices
    return RunInfo(
        models=list(setup.specs.values()),
        reference=reference_name(reference, setup.reference_spec if reference else None),
        settings=settings.as_dict(),
        started=setup.started,
        finished=utc_now(),
        pytest_version=pytest.__version__,
        plugin_version=__version__,
        cost_assumption=cost_assumption(setup.specs.values(), setup.reference_spec, prices),
        gpu_telemetry=setup.gpu_line,
    )
