"""A JUnit XML file from a report's outcomes, for a merged run (a pytest run has ``--junitxml``).

One ``testcase`` per outcome, named as pytest names it (``classname`` the module and class path,
``name`` the function with its parameters), with the ``slam_*`` properties a run attaches
(junit.py) and a failure, error or skip where the outcome says so.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from pathlib import Path

from pytest_slam.records import Outcome
from pytest_slam.report.aggregate import CANDIDATE_FAILED, ENGINE, final_outcomes, sort_outcomes
from pytest_slam.report.junit import junit_properties
from pytest_slam.util.files import atomic_write
from pytest_slam.util.textcodec import visible

FAILED = ("failed", CANDIDATE_FAILED)


def junit_xml(outcomes: Iterable[Outcome], name: str = "pytest-slam") -> str:
    cases = [o for o in final_outcomes(sort_outcomes(outcomes)) if o.outcome != ENGINE]
    kinds = [o.outcome for o in cases]
    suite = ET.Element(
        "testsuite",
        {
            "name": name,
            "tests": str(len(cases)),
            "failures": str(sum(kinds.count(k) for k in FAILED)),
            "errors": str(kinds.count("error")),
            "skipped": str(kinds.count("skipped")),
            "time": f"{sum(o.duration_s for o in cases):.3f}",
        },
    )
    for outcome in cases:
        classname, test = _names(outcome.nodeid)
        case = ET.SubElement(
            suite,
            "testcase",
            {"classname": classname, "name": test, "time": f"{outcome.duration_s:.3f}"},
        )
        props = ET.SubElement(case, "properties")
        for key, value in junit_properties(outcome):
            ET.SubElement(props, "property", {"name": key, "value": visible(str(value))})
        tag = {
            "failed": "failure",
            CANDIDATE_FAILED: "failure",
            "error": "error",
            "skipped": "skipped",
        }.get(outcome.outcome)
        if tag:
            message = visible(outcome.message or outcome.outcome)  # XML holds no NUL, no surrogate
            ET.SubElement(case, tag, {"message": message})
    root = ET.Element("testsuites")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _names(nodeid: str) -> tuple[str, str]:
    """pytest's (classname, name): ``tests/test_x.py::TestA::test_b[m]`` -> ``tests.test_x.TestA``."""
    path, *parts = nodeid.split("::")
    module = path.removesuffix(".py").replace("/", ".")
    return ".".join([module, *parts[:-1]]), parts[-1] if parts else path


def write_junit(path: str | os.PathLike[str], outcomes: Iterable[Outcome]) -> Path:
    return atomic_write(path, junit_xml(outcomes))
