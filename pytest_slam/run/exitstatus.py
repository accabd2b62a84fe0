"""The exit status of a run after its gate: one rule for a pytest run and a merge of its shards.

Failed tests keep pytest's status; only a run whose tests passed gets ``EXIT_GATE_FAILED`` from a
gate that did not pass, so a CI log tells a failed gate from failed tests.
"""

from __future__ import annotations

from pytest_slam.report.gate_result import GateResult
from pytest_slam.run.options import EXIT_GATE_FAILED

EXIT_OK = 0  # pytest.ExitCode.OK


def gate_failed(result: GateResult | None, exitstatus: int) -> bool:
    """The tests passed and a configured gate did not (failed or incomplete)."""
    return result is not None and not result.passed and exitstatus == EXIT_OK


def gated_exitstatus(result: GateResult | None, exitstatus: int) -> int:
    return EXIT_GATE_FAILED if gate_failed(result, exitstatus) else exitstatus


def gate_failed_line(result: GateResult) -> str:
    why = "is incomplete" if result.incomplete else "did not pass"
    return f"exit status {EXIT_GATE_FAILED}: the tests passed, the gate {why}"
