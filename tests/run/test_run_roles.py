"""The session's role objects, without a pytest run: Selection, Accounting, Summary, and the end of
the run (run/end/finish.py: collect -> judge -> publish) from what the session hands it (``Ended``).

Real records, real pytest reports, a real golden store in a tmp folder and pytest-slam's real
hookspecs on a pluggy plugin manager; only the pytest session around them is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pluggy
import pytest
import report_helpers as synth
from golden_helpers import rec

from pytest_slam.golden.stale import stale_report_path
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import ModelSpec
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.collect import merged_lines
from pytest_slam.run.end.ended import Choices, Ended, Roles, SessionFacts, Setup, SwapTally
from pytest_slam.run.end.finish import finish
from pytest_slam.run.end.publish import drop_older_reports
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.end.unvisited import STALE_SHOWN
from pytest_slam.run.inputs import hookspecs
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.run.inputs.tables import Tables
from pytest_slam.run.test.selection import Selection, not_enabled_line
from pytest_slam.settings import Settings
from pytest_slam.swap.ahead import FetchTally

MODULE = "tests/test_support.py"


def report(
    nodeid: str, when: str, outcome: str, slam: dict[str, Any] | None = None
) -> pytest.TestReport:
    """A test phase's report as pytest builds it (xdist carries these home)."""
    extra = {"slam": slam} if slam is not None else {}
    return pytest.TestReport(nodeid, (MODULE, 1, nodeid), {}, outcome, None, when, **extra)


def selection(tmp_path: Path, *args: str) -> Selection:
    return Selection(True, "serial", ["mini"], tmp_path, list(args))


# -- Selection -----------------------------------------------------------------------------------


def test_selection_covers_modules_not_narrowed_or_deselected(tmp_path: Path) -> None:
    narrowed = selection(tmp_path, f"{tmp_path}/tests/test_other.py::test_one")
    narrowed.cover([f"{MODULE}::test_a[mini]", "tests/test_other.py::test_one[mini]"])
    assert narrowed.coverage == {MODULE}
    assert narrowed.node_ids == [f"{tmp_path}/tests/test_other.py::test_one"]
    narrowed.deselected([f"{MODULE}::test_b[mini]"])
    assert narrowed.covered() == [] and narrowed.deselected_count == 1


def test_not_enabled_line_names_the_first_test_and_counts_the_rest() -> None:
    assert not_enabled_line(["t.py::a"]).startswith("pytest-slam: t.py::a opts in")
    assert "t.py::a (and 2 more test(s)) opts in" in not_enabled_line(["t.py::a", "b", "c"])


# -- Accounting ----------------------------------------------------------------------------------


def test_accounting_keeps_one_final_outcome_and_knows_what_finished() -> None:
    acc = Accounting("serial")
    nodeid = f"{MODULE}::test_reply[mini]"
    passed = synth.outcome("mini", "test_reply", "passed", [], [])
    failed = synth.outcome("mini", "test_reply", "error", [], [])
    acc.logreport(report(nodeid, "call", "passed", passed))
    acc.logreport(report(nodeid, "teardown", "failed", failed))
    assert [o["outcome"] for o in acc.outcomes] == ["error"]  # the teardown error is worse
    assert acc.failed_tests == {nodeid} and acc.finished == {nodeid}
    worker = Accounting("worker")
    worker.logreport(report(nodeid, "call", "passed", passed))
    assert worker.outcomes == []  # a worker's outcomes travel on its reports


@pytest.mark.parametrize(
    ("status", "stopped", "collected", "why"),
    [
        (0, False, 1, None),
        (2, False, 1, "the run was interrupted"),
        (0, "exiting after 1 failure", 1, "the run stopped early (exiting after 1 failure)"),
        (0, False, 3, "2 of 3 collected tests did not finish"),
    ],
)
def test_partial_reason(
    tmp_path: Path, status: int, stopped: str | bool, collected: int, why: str | None
) -> None:
    acc = Accounting("serial", finished={"t::a"})
    assert acc.partial_reason(selection(tmp_path), {}, status, stopped, collected) == why


def test_partial_reason_counts_worker_deselections_and_names_engines(tmp_path: Path) -> None:
    acc = Accounting("controller", finished={"t::a"}, worker_payloads=[{"deselected": 2}])
    sel = selection(tmp_path)
    assert (
        acc.partial_reason(sel, {}, 0, False, 1)
        == "2 test(s) deselected (-k, -m, --deselect, --lf)"
    )
    assert (
        acc.partial_reason(sel, {"qwen": "no GPU"}, 0, False, 1)
        == "the engine of qwen did not start"
    )


def test_cap_lines_name_the_cut_tests() -> None:
    cut = synth.call(
        "mini",
        "an answer cut",
        1,
        2,
        3,
        4,
        0.0,
        key="k",
        capped=True,
        cap=4,
        finish_reason="length",
    )
    acc = Accounting("serial", outcomes=[synth.outcome("mini", "test_a", "passed", [cut], [])])
    (line,) = acc.cap_lines()
    assert line.startswith("generation cap: the answers of 1 test(s) were cut at the output limit")
    assert f"({MODULE}::test_a[mini])" in line
    assert Accounting("serial").cap_lines() == []


# -- Summary -------------------------------------------------------------------------------------


def test_summary_merges_worker_lines_once_and_shows_paths_from_the_root(tmp_path: Path) -> None:
    summary = Summary(tmp_path, ["golden answers written: a.json"])
    worker = {"summary": ["golden answers written: a.json", "golden answers written: b.json"]}
    summary.extend(merged_lines(summary.lines, [worker]))
    summary.lead(["table"])
    assert summary.lines == [
        "table",
        "golden answers written: a.json",
        "golden answers written: b.json",
    ]
    assert summary.shown(tmp_path / "x" / "y.json") == "x/y.json"
    assert summary.shown("/elsewhere/y.json") == "/elsewhere/y.json"


# -- the end: stale entries, the worker's payload, the report and the gate ------------------------


class Hooks:
    """A project's conftest.py hooks, as pluggy calls them."""

    def __init__(self) -> None:
        self.gates: list[str] = []

    @pytest.hookimpl
    def pytest_slam_report(self, document: dict[str, Any]) -> None:
        document["build"] = "ci-1182"

    @pytest.hookimpl
    def pytest_slam_gate(self, breaches: list[str]) -> None:
        breaches.extend(self.gates)


def hooks(plugin: object | None = None) -> Any:
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    if plugin is not None:
        manager.register(plugin)
    return manager.hook


def run_end(
    tmp_path: Path,
    settings: Settings,
    *,
    role: str = "serial",
    selection: Selection | None = None,
    accounting: Accounting | None = None,
    store: GoldenStore | None = None,
    hook: Any = None,
    session: SessionFacts | None = None,
    choices: Choices | None = None,
    swap: SwapTally | None = None,
    workeroutput: dict[str, object] | None = None,
) -> Ended:
    """What the session hands the end: the role objects, the setup (tables parsed as the session
    parses them), pytest's session facts, the command line's choices and the swap's tally."""
    specs = {"mini": ModelSpec("mini", "openai", "gpt-4o-mini")}
    sel = selection if selection is not None else Selection(True, "serial", ["mini"], tmp_path)
    acc = accounting if accounting is not None else Accounting("serial")
    return Ended(
        Roles(role, sel, acc, Summary(tmp_path), store),
        Setup(settings, specs, Tables.of(settings), hook if hook is not None else hooks()),
        session or SessionFacts(),
        choices or Choices(),
        swap or SwapTally(),
        workeroutput=workeroutput,
    )


def goldens(tmp_path: Path) -> GoldenStore:
    """Two recorded entries of MODULE; the store a new run opens, having visited neither."""
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    store.record(MODULE, rec("asked"), f"{MODULE}::test_a")
    store.record(MODULE, rec("no longer asked"), f"{MODULE}::test_gone")
    store.flush()
    return GoldenStore(tmp_path / "__slam__", "openai:gpt-4")


def complete_run(tmp_path: Path, store: GoldenStore, prune: bool = False) -> Ended:
    """The end of a run that collected and finished one test of MODULE, ``test_a[mini]``."""
    sel = selection(tmp_path)
    sel.cover([f"{MODULE}::test_a[mini]"])
    acc = Accounting("serial", finished={f"{MODULE}::test_a[mini]"})
    return run_end(
        tmp_path,
        Settings(),
        selection=sel,
        accounting=acc,
        store=store,
        session=SessionFacts(collected=1),
        choices=Choices(prune=prune),
    )


def test_a_complete_run_names_the_entry_no_test_asked_for(tmp_path: Path) -> None:
    store = goldens(tmp_path)
    store.mark_used(MODULE, rec("asked").key, f"{MODULE}::test_a[mini]")
    end = complete_run(tmp_path, store)
    assert finish(end).status == 0
    assert end.roles.summary.lines[0].startswith("1 stale golden entry (no test asked for it)")
    gone = rec("no longer asked").key
    assert end.roles.summary.lines[1] == (
        f"  __slam__/openai-gpt-4/{MODULE.removesuffix('.py')}.json {gone} "
        f"(recorded for {MODULE}::test_gone)"
    )
    written = json.loads(stale_report_path(store.root).read_text())
    assert written["entries"] == [[MODULE, gone]]


def test_many_stale_entries_are_counted_past_the_first_twenty_and_all_are_kept(
    tmp_path: Path,
) -> None:
    """The summary names the first STALE_SHOWN stale entries (each read from its file) and counts
    the rest; the stale report `slam golden prune` reads still holds every one."""
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    for n in range(25):
        store.record(MODULE, rec(f"question {n}"), f"{MODULE}::test_gone_{n}")
    store.flush()
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    end = complete_run(tmp_path, store)
    assert finish(end).status == 0
    lines = end.roles.summary.lines
    assert lines[0].startswith("25 stale golden entries (no test asked for them)")
    named = lines[1 : 1 + STALE_SHOWN]
    assert all(f"(recorded for {MODULE}::test_gone_" in line for line in named)
    assert lines[1 + STALE_SHOWN] == (
        "  ... and 5 more (`slam golden prune --dry-run` lists them all)"
    )
    written = json.loads(stale_report_path(store.root).read_text())
    assert len(written["entries"]) == 25


def test_prune_removes_the_stale_entry_and_says_how_to_undo(tmp_path: Path) -> None:
    store = goldens(tmp_path)
    store.mark_used(MODULE, rec("asked").key, f"{MODULE}::test_a[mini]")
    end = complete_run(tmp_path, store, prune=True)
    finish(end)
    assert end.roles.summary.lines[0].startswith(
        "pruned 1 stale golden entry; undo with `slam golden restore"
    )
    again = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    assert again.lookup(MODULE, rec("no longer asked").key) is None
    assert again.lookup(MODULE, rec("asked").key) is not None


def test_a_partial_run_judges_nothing_stale(tmp_path: Path) -> None:
    store = goldens(tmp_path)
    sel = selection(tmp_path)
    sel.cover([f"{MODULE}::test_a[mini]"])
    sel.deselected([f"{MODULE}::test_gone[mini]"])
    acc = Accounting("serial", finished={f"{MODULE}::test_a[mini]"})
    end = run_end(
        tmp_path,
        Settings(),
        selection=sel,
        accounting=acc,
        store=store,
        session=SessionFacts(collected=1),
        choices=Choices(prune=True),
    )
    finish(end)
    assert end.roles.summary.lines[:1] == [
        "--slm-prune removed nothing: this run was partial (1 test(s) deselected (-k, -m, "
        "--deselect, --lf))"
    ]
    written = json.loads(stale_report_path(store.root).read_text())
    assert written["partial"].startswith("1 test(s) deselected") and written["entries"] == []


def test_a_worker_publishes_its_visits_coverage_and_lines(tmp_path: Path) -> None:
    store = goldens(tmp_path)
    store.mark_used(MODULE, "k1", f"{MODULE}::test_a[mini]")
    sel = Selection(True, "worker", ["mini"], tmp_path)
    sel.cover([f"{MODULE}::test_a[mini]"])
    output: dict[str, object] = {}
    acc = Accounting("worker", failed_tests={"t::b"})
    ahead = FetchTally("mini", 3, 2, 2, 16).as_dict()
    cache: dict[str, str | int] = {"hits": 1, "kept": 2, "damaged": 0, "unwritable": ""}
    end = run_end(
        tmp_path,
        Settings(),
        role="worker",
        selection=sel,
        accounting=acc,
        store=store,
        workeroutput=output,
        swap=SwapTally(unswapped=3, fetched_ahead=[ahead], paid_reused=[2, 1.5e9], cache=cache),
        session=SessionFacts(status=1),
    )
    assert finish(end).status == 1
    assert output["slam"] == {
        "visited": {MODULE: ["k1"]},
        "failed_tests": ["t::b"],
        "coverage": [MODULE],
        "deselected": 0,
        "summary": [],
        "unwritten": [],  # the files it could not write: none here
        "unswapped": 3,
        # its counts, which the controller adds up into one line each (issue 52)
        "fetched_ahead": [ahead],
        "paid_reused": [2, 1.5e9],
        "cache": cache,
    }


def test_the_report_hook_adds_to_the_json_and_the_gate_hook_fails_the_gate(tmp_path: Path) -> None:
    plugin = Hooks()
    plugin.gates.append("mini: answers in the wrong language")
    settings = Settings(reference="none", report=str(tmp_path / "slam.json"))
    acc = Accounting("serial", outcomes=synth.mini_outcomes())
    end = run_end(
        tmp_path, settings, accounting=acc, hook=hooks(plugin), session=SessionFacts(collected=4)
    )
    assert finish(end).status == EXIT_GATE_FAILED
    document = json.loads((tmp_path / "slam.json").read_text())
    assert document["build"] == "ci-1182"
    assert document["gate"]["session_breaches"] == ["mini: answers in the wrong language"]
    assert end.roles.summary.last_line.startswith("pytest-slam gate: FAIL")
    assert "exit status 6: the tests passed, the gate did not pass" in end.roles.summary.lines
    plugin.gates.clear()
    again = run_end(
        tmp_path, settings, accounting=acc, hook=hooks(plugin), session=SessionFacts(collected=4)
    )
    assert finish(again).status == 0
    assert "JSON report: " + str(tmp_path / "slam.json") in again.roles.summary.lines


def test_an_interrupted_run_with_no_outcome_removes_an_older_report(tmp_path: Path) -> None:
    older = tmp_path / "slam.json"
    older.write_text("{}")
    settings = Settings(reference="none", report=str(older))
    assert drop_older_reports(settings) == [
        f"JSON report: none, the run was interrupted before any test reported; the older {older} "
        "was removed"
    ]
    assert not older.exists() and drop_older_reports(settings) == []
    end = run_end(tmp_path, Settings(reference="none"), session=SessionFacts(2, collected=2))
    assert finish(end).status == 2 and end.roles.summary.lines == []


def test_a_run_stopped_early_gets_an_incomplete_gate_naming_why(tmp_path: Path) -> None:
    settings = Settings(reference="none", gate={"min_pass_rate": 0.5})
    acc = Accounting("serial", outcomes=synth.mini_outcomes())
    facts = SessionFacts(1, collected=4, stopped="stopping after 1 failures")
    end = run_end(tmp_path, settings, accounting=acc, session=facts)
    finish(end)
    assert (
        "gate: INCOMPLETE (the run stopped early: stopping after 1 failures)"
        in end.roles.summary.lines
    )


def test_the_controller_says_one_line_each_for_its_workers_counts() -> None:
    """Each worker printed its own fetched-ahead and cache lines, naming none (issue 52): the
    controller adds the workers' counts up into one line each, and says the answers they reused
    from an earlier refresh once, with the earliest time they were paid."""
    from pytest_slam.run.end.collect import cache_lines, fetched_ahead_lines, paid_reused_lines

    payloads: list[dict[str, Any]] = [
        {
            "fetched_ahead": [FetchTally("mini", 9, 9, 1, 16).as_dict()],
            "paid_reused": [2, 1.7e9],
            "cache": {"hits": 3, "kept": 9, "damaged": 0, "unwritable": ""},
        },
        {
            "fetched_ahead": [FetchTally("mini", 1, 1, 1, 10).as_dict()],
            "paid_reused": [1, 1.6e9],
            "cache": {"hits": 1, "kept": 1, "damaged": 1, "unwritable": ""},
        },
        {"deselected": 0},  # a worker of an older payload: nothing to add
    ]
    assert fetched_ahead_lines(payloads, 200) == [
        "mini: 10 call(s) fetched ahead, 10 used (up to 1 at once, concurrency 16 on each of 2 "
        "workers)"
    ]
    [reused] = paid_reused_lines(payloads)
    assert reused.startswith("reference answers: 3 answers reused, paid by an earlier refresh ")
    assert "(2020-09-13 12:26 UTC)" in reused  # the earlier of the two
    assert cache_lines(payloads, 200) == [
        "answer cache: 4 answers served from it (their latency as first measured), 10 answers "
        "kept, 1 damaged entry ignored (`slam cache clear` empties it)"
    ]
