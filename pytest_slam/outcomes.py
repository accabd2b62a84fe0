"""One test's Outcome, built from what the swap recorded, and the one-line failure for a dead model.

The Outcome rides on the test report as plain data, because reports are what xdist carries from the
workers to the controller (stash data does not travel).
"""

from __future__ import annotations

from typing import Any

import pytest

from .metering import outcome_energy
from .optin import base_test_id
from .records import Outcome


def _model(item: pytest.Item) -> str:
    return str(item.callspec.params["slm_model"])  # type: ignore[attr-defined]


def build_outcome(
    item: pytest.Item, report: pytest.TestReport, ctx: Any, verdict: Any
) -> dict[str, Any]:
    model = _model(item)
    outcome = Outcome(
        nodeid=item.nodeid,
        test=base_test_id(item.nodeid, model),
        model=model,
        outcome=_status(report),
        duration_s=report.duration,
    )
    if ctx is not None:
        outcome.calls = [c.as_dict() for c in ctx.calls]
        outcome.energy_j = outcome_energy(ctx.calls)
    if verdict is not None:
        outcome.pairs = [p.as_dict() for p in verdict.pairs]
        outcome.budget_breaches = list(verdict.breaches)
        outcome.repeat = getattr(verdict, "repeat", None)
        if verdict.problems:
            outcome.message = "\n".join(verdict.problems)
    return outcome.as_dict()


def _status(report: pytest.TestReport) -> str:
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def one_line_failure(ctx: Any, report: pytest.TestReport) -> str | None:
    """An unreachable model fails its tests with one readable line, not a traceback wall."""
    if ctx is None or not report.failed:
        return None
    for call in ctx.calls:
        if call.error and "unreachable" in call.error:
            return f"pytest-slam: {call.error}. Start the server or fix the model's base_url."
    return None
