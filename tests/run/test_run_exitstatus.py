"""The one exit-status rule a pytest run, a shard merge and ``slam rescore`` end with."""

from __future__ import annotations

import pytest

from pytest_slam.cli import rescore
from pytest_slam.run.exitstatus import EXIT_OK, exit_status
from pytest_slam.run.options import EXIT_GATE_FAILED


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
