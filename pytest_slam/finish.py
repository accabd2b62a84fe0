"""The end of a run: write the golden files, find stale entries, write the reports, apply the gate.

A worker only flushes its goldens and publishes what it saw; the controller (or the serial process)
merges, reports and gates. The gate has its own exit status (``options.EXIT_GATE_FAILED``) so a CI
log tells a failed gate from failed tests.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

import pytest

from . import __version__, options
from .golden.fileformat import GoldenError


def finish(slam: Any, session: pytest.Session, exitstatus: int) -> int:
    if not slam.armed:
        return exitstatus
    if slam.runs_tests:
        _flush(slam)
    if slam.role == "worker":
        slam.config.workeroutput["slam"] = _payload(slam)  # type: ignore[attr-defined]
        return exitstatus
    if slam.settings.has_reference:
        _stale(slam)
    if slam.config.option.collectonly:
        return exitstatus
    return _report(slam, exitstatus)


def _flush(slam: Any) -> None:
    if slam.store is None:
        return
    try:
        written = slam.store.flush()
    except GoldenError as exc:
        slam.summary.append(f"golden files not written: {exc}")
        return
    for path in written:
        slam.summary.append(f"golden answers written: {path}")


def _payload(slam: Any) -> dict[str, Any]:
    visited = slam.store.visited if slam.store is not None else {}
    return {
        "visited": {m: sorted(keys) for m, keys in visited.items()},
        "failed_tests": sorted(slam.failed_tests),
        "coverage": sorted(slam.coverage - slam.partial),
        "summary": list(slam.summary),
    }


def _merged(slam: Any) -> tuple[dict[str, set[str]], set[str], set[str]]:
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
    for data in slam.worker_payloads:
        slam.summary.extend(line for line in data["summary"] if line not in slam.summary)
    return visited, covered or set(), {_base(t) for t in failed}


def _base(nodeid: str) -> str:
    return nodeid.split("[", 1)[0]


def _stale(slam: Any) -> None:
    from .golden.store import GoldenStore

    store = slam.store or GoldenStore(Path(slam.config.rootpath) / slam.settings.golden_dir,
                                      slam.settings.reference)  # fmt: skip
    visited, covered, failed = _merged(slam)
    # A module with a failed test is not judged: its test may have stopped before asking.
    covered -= {t.split("::", 1)[0] for t in failed}
    stale = store.stale(visited, covered, failed)
    if not stale:
        return
    if slam.config.option.slm_prune:
        removed = store.prune(stale)
        slam.summary.append(f"pruned {removed} stale golden entr{'y' if removed == 1 else 'ies'}")
        return
    slam.summary.append(f"{len(stale)} stale golden entries (no test asked for them); "
                        "remove them with --slm-prune or `slam golden prune`:")  # fmt: skip
    slam.summary.extend(f"  {store.path_for(module)} {key}" for module, key in stale)


def run_info(slam: Any) -> Any:
    from .metrics.cost import SELF_HOSTED_ASSUMPTION
    from .report.aggregate import RunInfo

    return RunInfo(
        models=[s.as_dict() for s in slam.specs.values()],
        reference=slam.settings.reference if slam.settings.has_reference else "",
        settings=slam.settings.as_dict(),
        started=slam.started, finished=_now(),
        pytest_version=pytest.__version__, plugin_version=__version__,
        cost_assumption=SELF_HOSTED_ASSUMPTION, gpu_telemetry=slam.gpu_line,
    )  # fmt: skip


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _report(slam: Any, exitstatus: int) -> int:
    from .report.aggregate import aggregate
    from .report.terminal import gate_lines, render_table

    outcomes = [*slam.outcomes, *slam.engine_outcomes()]
    if not outcomes:
        return exitstatus
    verdict = aggregate(outcomes, run_info(slam))
    diff = _baseline(slam, verdict)
    result = _gate(slam, verdict, diff)
    _write(slam, verdict, outcomes)
    width = slam.terminal_width
    slam.summary[:0] = render_table(verdict, width)
    if diff is not None:
        from .report.baseline import format_diff

        slam.summary.extend(format_diff(diff))
    slam.summary.extend(gate_lines(verdict))
    _step_summary(verdict)
    if result is not None and not result.passed and exitstatus == pytest.ExitCode.OK:
        return options.EXIT_GATE_FAILED
    return exitstatus


def _baseline(slam: Any, verdict: Any) -> Any:
    path = slam.config.option.slm_baseline
    if not path:
        return None
    from .report.baseline import Tolerances, diff_baseline

    return diff_baseline(verdict, path, Tolerances.from_config(slam.settings.baseline))


def _gate(slam: Any, verdict: Any, diff: Any) -> Any:
    from .report.gate import Gate, apply_gate, evaluate

    breaches = slam.session_budget_breaches(verdict)
    gate = Gate.from_config(slam.settings.gate)
    if diff is not None and "no_regression" not in slam.settings.gate:
        gate.no_regression = True  # a baseline given on the command line is meant to be enforced
    result = evaluate(gate, verdict, diff, breaches)
    apply_gate(verdict, result)
    return result if result.configured else None


def _write(slam: Any, verdict: Any, outcomes: list[dict[str, Any]]) -> None:
    if slam.settings.report:
        from .report.jsonreport import write_json

        slam.summary.append(f"JSON report: {write_json(slam.settings.report, verdict, outcomes)}")
    if slam.settings.html:
        from .report.html import write_html

        slam.summary.append(f"HTML report: {write_html(slam.settings.html, verdict, outcomes)}")


def _step_summary(verdict: Any) -> None:
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    from .report.markdown import render_markdown

    with open(path, "a", encoding="utf-8") as fh:
        fh.write(render_markdown(verdict) + "\n")
