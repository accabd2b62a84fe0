"""The gate's verdict as the terminal's very last line.

pytest prints its short test summary (the FAILED lines) and the ``N failed in Xs`` line from its
terminal reporter's own ``pytest_sessionfinish`` wrapper, after every ``pytest_terminal_summary``
hook; with 400 failures the pytest-slam section scrolls far away. This wrapper is the outermost
one (``tryfirst``), so what it writes after ``yield`` comes after all of that.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_slam.run.end.summary import Summary

COLOURS = {"PASS": "green", "FAIL": "red", "INCOMPLETE": "red"}


class LastLine:
    """Registered on the controller (or a plain run) only: workers print no summary."""

    def __init__(self, summary: Summary) -> None:
        self.summary = summary

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> Generator[None, object, object]:
        result = yield
        line = self.summary.last_line
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if line and reporter is not None and not reporter.no_summary:
            word = line.split(": ", 1)[1].split(" (", 1)[0]
            colour = COLOURS.get(word, "yellow")
            reporter.write_line(line, **{colour: True, "bold": True})
        return result
