"""Per-test properties for ``--junitxml``: model, scores, latency, tokens and cost on each testcase.

pytest's junitxml writes a testcase's ``<properties>`` from its *teardown* report, which copies
``item.user_properties`` (what ``record_property`` fills). So the properties go on the item as soon
as the Outcome exists, and on the report too when the Outcome is made at teardown. They travel
back from xdist workers inside the reports, like the Outcome itself.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pytest_slam.records import JSON, Outcome

PREFIX = "slam_"


def attach(
    item: pytest.Item, report: pytest.TestReport, outcome: Outcome | Mapping[str, JSON]
) -> None:
    """Set this test's ``slam_*`` properties, replacing any from an earlier phase of the test;
    nothing when no file is written that carries them (``--junitxml``, pytest-reportlog's
    ``--report-log``; an xdist worker is given the same options)."""
    option = item.config.option
    if not (getattr(option, "xmlpath", None) or getattr(option, "report_log", None)):
        return
    from pytest_slam.report.junit import junit_properties

    props = junit_properties(outcome)
    item.user_properties[:] = [*_others(item.user_properties), *props]
    if report.when == "teardown":
        report.user_properties = [*_others(report.user_properties), *props]


def _others(properties: list[tuple[str, object]]) -> list[tuple[str, object]]:
    return [p for p in properties if not str(p[0]).startswith(PREFIX)]
