"""The one exit-status rule a pytest run, a shard merge and ``slam rescore`` end with, and every
path of a pytest run's end (run/end/finish.py) going through it (``run_exit``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pluggy
import pytest
import report_helpers as synth

from pytest_slam.cli import rescore
from pytest_slam.records import ModelSpec
from pytest_slam.report.gate_result import GateResult
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.end.ended import Choices, Ended, Roles, SessionFacts, Setup
from pytest_slam.run.end.exitstatus import EXIT_OK, Exit, Reached, exit_status, run_exit
from pytest_slam.run.end.finish import finish
from pytest_slam.run.end.summary import Summary
from pytest_slam.run.inputs import hookspecs
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.run.inputs.tables import Tables
from pytest_slam.run.test.selection import Selection
from pytest_slam.settings import Settings


@pytest.mark.parametrize(
    ("tests_status", "gate_passed", "expected"),
    [
        (EXIT_OK, None, EXIT_OK),  # no gate configured
        (EXIT_OK, True, EXIT_OK),
        (EXIT_OK, False, EXIT_GATE_FAILED),
        (1, False, 1),  # failed tests keep pytest's status, whatever the gate says
        (1, True, 1),
        (2, None, 2),  # interrupted
        (5, False, 5),  # nothing collected is not a gate failure
    ],
)
def test_failed_tests_keep_their_status_and_only_then_the_gate_speaks(
    tests_status: int, gate_passed: bool | None, expected: int
) -> None:
    assert exit_status(tests_status, gate_passed) == expected


@pytest.mark.parametrize(
    ("gate_failed", "tests_failed", "expected"),
    [(False, False, EXIT_OK), (True, False, EXIT_GATE_FAILED), (False, True, 1), (True, True, 1)],
)
def test_rescore_exits_as_the_rerun_would(
    gate_failed: bool, tests_failed: bool, expected: int
) -> None:
    assert rescore._exit_status(gate_failed, tests_failed) == expected


# -- the run's rule (run_exit) and every path of the end through it --------------------------------

PASSED = GateResult(True, True, status="passed")
FAILED = GateResult(False, True, status="failed")
INCOMPLETE = GateResult(False, True, status="incomplete", incomplete="the run was interrupted")
FAILED_LINE = f"exit status {EXIT_GATE_FAILED}: the tests passed, the gate did not pass"
INCOMPLETE_LINE = f"exit status {EXIT_GATE_FAILED}: the tests passed, the gate is incomplete"


@pytest.mark.parametrize(
    ("tests_status", "reached", "gate", "expected"),
    [
        (EXIT_OK, "off", None, Exit(EXIT_OK, "off")),  # nothing armed: pytest's status
        (1, "worker", None, Exit(1, "worker")),  # a worker: its controller decides for the run
        (EXIT_OK, "worker", FAILED, Exit(EXIT_OK, "worker")),  # no verdict here: no gate either
        (EXIT_OK, "collect-only", None, Exit(EXIT_OK, "collect-only")),
        (2, "nothing reported", None, Exit(2, "nothing reported")),  # interrupted, no outcome
        (EXIT_OK, "reported", None, Exit(EXIT_OK, "reported")),  # no gate configured
        (EXIT_OK, "reported", PASSED, Exit(EXIT_OK, "reported")),
        (EXIT_OK, "reported", FAILED, Exit(EXIT_GATE_FAILED, "reported", FAILED_LINE)),
        (EXIT_OK, "reported", INCOMPLETE, Exit(EXIT_GATE_FAILED, "reported", INCOMPLETE_LINE)),
        (1, "reported", FAILED, Exit(1, "reported")),  # failed tests keep their status
        (2, "reported", INCOMPLETE, Exit(2, "reported")),  # so does an interrupt
        (5, "reported", FAILED, Exit(5, "reported")),
    ],
)
def test_the_run_exit_rule(
    tests_status: int, reached: Reached, gate: GateResult | None, expected: Exit
) -> None:
    assert run_exit(tests_status, reached, gate) == expected


def hooks(*breaches: str) -> Any:
    """pytest-slam's real hookspecs on a pluggy manager; a project's gate hook adds ``breaches``."""

    class Project:
        @pytest.hookimpl
        def pytest_slam_gate(self, breaches: list[str]) -> None:
            breaches.extend(added)

    added = list(breaches)
    manager = pluggy.PluginManager("pytest")
    manager.add_hookspecs(hookspecs)
    manager.register(Project())
    return manager.hook


def ended(
    tmp_path: Path,
    status: int = EXIT_OK,
    *,
    role: str = "serial",
    armed: bool = True,
    outcomes: bool = True,
    gate: dict[str, Any] | None = None,
    breaches: tuple[str, ...] = (),
    collectonly: bool = False,
    stopped: str | bool = False,
) -> Ended:
    """The end of a one-candidate run of four tests (report_helpers' gpt-4o-mini outcomes)."""
    settings = Settings(reference="none", gate=gate or {})
    accounting = Accounting(role, outcomes=synth.mini_outcomes() if outcomes else [])
    roles = Roles(
        role,
        Selection(armed, role, [synth.MINI], tmp_path),
        accounting,
        Summary(tmp_path),
    )
    spec = {synth.MINI: ModelSpec(synth.MINI, "openai", synth.MINI)}
    return Ended(
        roles,
        Setup(settings, spec, Tables.of(settings), hooks(*breaches)),
        SessionFacts(status, collected=4, stopped=stopped),
        Choices(collectonly=collectonly),
        workeroutput={} if role == "worker" else None,
    )


@pytest.mark.parametrize(
    ("case", "kwargs", "expected"),
    [
        ("swap not armed", {"armed": False}, Exit(EXIT_OK, "off")),
        ("not armed, failed", {"armed": False, "status": 1}, Exit(1, "off")),
        ("a worker", {"role": "worker", "status": 1, "breaches": ("x",)}, Exit(1, "worker")),
        ("collect-only", {"collectonly": True, "breaches": ("x",)}, Exit(EXIT_OK, "collect-only")),
        ("no outcome", {"outcomes": False}, Exit(EXIT_OK, "nothing reported")),
        ("interrupted", {"outcomes": False, "status": 2}, Exit(2, "nothing reported")),
        ("no gate", {}, Exit(EXIT_OK, "reported")),
        ("gate passed", {"gate": {"min_pass_rate": 0.5}}, Exit(EXIT_OK, "reported")),
        (
            "gate failed",
            {"breaches": ("mini: x",)},
            Exit(EXIT_GATE_FAILED, "reported", FAILED_LINE),
        ),
        ("tests and gate failed", {"status": 1, "breaches": ("mini: x",)}, Exit(1, "reported")),
        (
            "stopped early",
            {"gate": {"min_pass_rate": 0.5}, "stopped": "stopping after 1 failures"},
            Exit(EXIT_GATE_FAILED, "reported", INCOMPLETE_LINE),
        ),
    ],
)
def test_every_path_of_the_end_ends_in_the_rule(
    tmp_path: Path, case: str, kwargs: dict[str, Any], expected: Exit
) -> None:
    """The real end (collect -> judge -> publish) on each path: its Exit is the rule's, naming how
    far the end went, and a changed status is said in the summary."""
    end = ended(tmp_path, **kwargs)
    assert finish(end) == expected, case
    said = [line for line in end.roles.summary.lines if line.startswith("exit status")]
    assert said == ([expected.line] if expected.line else [])
