"""The exit status of a run after its gate: one rule for a pytest run and a merge of its shards.

Failed tests keep pytest's status; only a run whose tests passed gets ``EXIT_GATE_FAILED`` from a
gate that did not pass, so a CI log tells a failed gate from failed tests.
"""

from __future__ import annotations

from pytest_slam.report.gate_result import GateResult
from pytest_slam.run.options import EXIT_GATE_FAILED

EXIT_OK = 0  # pytest.ExitCode.OK


def exit_status(tests_status: int, gate_passed: bool | None) -> int:
    """The rule: the tests' status when they did not pass, else ``EXIT_GATE_FAILED`` when a
    configured gate did not pass (``gate_passed`` False; None: no gate), else ``EXIT_OK``. A pytest
    run, a merge of its shards and ``slam rescore`` all end with it."""
    if tests_status == EXIT_OK and gate_passed is False:
        return EXIT_GATE_FAILED
    return tests_status


def gated_exitstatus(result: GateResult | None, exitstatus: int) -> int:
    """``exit_status`` of a run's gate result (None: no gate configured)."""
    return exit_status(exitstatus, None if result is None else result.passed)


def gate_failed_line(result: GateResult) -> str:
    why = "is incomplete" if result.incomplete else "did not pass"
    return f"exit status {EXIT_GATE_FAILED}: the tests passed, the gate {why}"
