"""The heartbeat's line for many calls at once (run/start/progress.py): per model, the running test's own
calls apart from the answers fetched for later tests (issue 49, item 4).

A real pytest config (pytester) and the real in-flight records the swap keeps; no timing.
"""

from __future__ import annotations

import pytest

from pytest_slam.records import ModelSpec
from pytest_slam.run.start.progress import Progress
from pytest_slam.swap.chat import InFlight, Target


def test_the_grouped_line_counts_the_test_s_own_call_apart_from_the_fetched_ones(
    pytester: pytest.Pytester,
) -> None:
    progress = Progress(pytester.parseconfig(), "serial")
    progress.test = "test_a.py::test_x[mini]"
    mini = Target(ModelSpec("mini", "openai", "gpt-4o-mini"), "http://127.0.0.1:9/v1", None)
    own = InFlight(mini, 100.0)
    fetched = [InFlight(mini, 101.0, label=f"fetched ahead for test_{i}") for i in range(5)]
    line = progress.line([own, *fetched], 120.0)
    assert line == (
        "test_a.py::test_x[mini] 20 s: 6 calls in flight: "
        "mini (candidate) 6: 1 the test's own, 5 fetched ahead"
    )
