"""pytest-slam's own hooks: where a project customizes a run from its ``conftest.py`` (or a plugin).

Declared here, registered by plugin.py (``pytest_addhooks``), as pytest-xdist declares its
``newhooks.py``. Each is called with keyword arguments; implement only the arguments you need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_slam.records import JSON, Pair
    from pytest_slam.report.aggregate import Verdict


@pytest.hookspec
def pytest_slam_models(config: pytest.Config, models: list[str]) -> None:
    """Edit the candidate list in place before pytest-slam resolves it: add, drop or reorder names
    (``[tool.slam] candidates`` or ``--slm-models``, as given). Called once per process, at
    configure time, when pytest-slam is enabled. A name added must resolve as a configured one does.
    """


@pytest.hookspec
def pytest_slam_pair_scored(item: pytest.Item, model: str, pair: Pair) -> None:
    """One of ``item``'s calls on ``model`` was paired with its golden answer and scored
    (``pair.scores``, ``pair.verdict``); called in the process that ran the test, after the test's
    own assertions. Read it (export, log); a change to ``pair`` shows in the report.
    """


@pytest.hookspec
def pytest_slam_gate(verdict: Verdict, breaches: list[str]) -> None:
    """Before the gate is judged: append a line to ``breaches`` to fail the run's gate with that
    reason (a rule of the project's own, read from ``verdict.models``). ``breaches`` holds the
    ``[tool.slam.budget]`` breaches already found. Called once, where the report is written.
    """


@pytest.hookspec
def pytest_slam_report(document: dict[str, JSON]) -> None:
    """The JSON report's document, just before it is written: add or change keys in place (a
    build id, a link to the CI run). Called once per JSON file written (``--slm-report``,
    ``--slm-baseline=auto``'s saved run).
    """
