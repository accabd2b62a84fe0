"""The exit status of a run after its gate: one rule for a pytest run and a merge of its shards.

Failed tests keep pytest's status; only a run whose tests passed gets ``EXIT_GATE_FAILED`` from a
gate that did not pass, so a CI log tells a failed gate from failed tests. ``run_exit`` is where a
pytest run's status is decided, on every path of its end (run/end/finish.py); ``exit_status`` is the
core it shares with ``slam report merge`` and ``slam rescore``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pytest_slam.report.gate_result import GateResult
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED

EXIT_OK = 0  # pytest.ExitCode.OK
EXIT_INCOMPLETE = 2  # pytest.ExitCode.INTERRUPTED: the run did not end whole

# How far the end of a pytest run went: "off" (the swap not armed), a "worker" (it hands its
# payload to its controller), "collect-only", "nothing reported" (no outcome: no verdict), or
# "reported" (a verdict, judged, and its gate).
Reached = Literal["off", "worker", "collect-only", "nothing reported", "reported"]


@dataclass(frozen=True)
class Exit:
    """A pytest run's exit status as ``run_exit`` decided it; ``line`` says why when the gate
    changed pytest's status (the summary's last word before the gate's line)."""

    status: int
    reached: Reached
    line: str | None = None


def run_exit(tests_status: int, reached: Reached, gate: GateResult | None = None) -> Exit:
    """The one rule a pytest run's exit status follows: every path of run/end/finish.py ends here.

    - No verdict (``reached`` is not "reported": the swap not armed, a worker, whose controller
      decides for the run, --collect-only, or no test reported an outcome): pytest's status.
    - A verdict: ``exit_status``. Tests that did not pass keep pytest's status whatever the gate
      (failed 1, interrupted 2, internal error 3, usage error 4, none collected 5). Tests that
      passed get ``EXIT_GATE_FAILED`` from a configured gate that failed or is incomplete (a
      partial run: interrupted, stopped early, a lost xdist worker, no test ran; report/gate.py
      ``incomplete_reason`` says which), with the line saying so; else ``EXIT_OK``.
    ``gate``: the gate's result, None where no gate rule is configured.
    """
    if reached != "reported" or gate is None:
        return Exit(tests_status, reached)
    status = exit_status(tests_status, gate.passed)
    return Exit(status, reached, gate_failed_line(gate) if status != tests_status else None)


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


def unwritten_exit(decided: Exit, unwritten: list[str]) -> Exit:
    """A run that could not write what it keeps (a golden file, a report, a saved run: a full
    disk, a read-only folder) is incomplete, whatever its tests and gate said: ``EXIT_INCOMPLETE``,
    as an interrupted run, so CI never takes its missing files for a pass. Only a status more
    serious than that (internal error 3, usage error 4) stays. ``unwritten``: one line each,
    said above the status's own line."""
    if not unwritten or decided.status in (3, 4):
        return decided
    count = len(unwritten)
    line = (
        f"exit status {EXIT_INCOMPLETE}: the run is incomplete, {count} file(s) could not be "
        "written (said above); the next run, with space, writes them"
    )
    return Exit(EXIT_INCOMPLETE, decided.reached, line)
