"""Property: any text a model sends crosses from an xdist worker to the controller exactly as it
was, through the path a report takes (pytest's serializable form, ``run/workers/crossing.sent``, execnet's
own serializer, ``run/workers/crossing.received``, pytest's report again) and the path of a worker's payload.
execnet refuses what UTF-8 cannot encode, a lone surrogate: without ``sent`` the run ends with an
INTERNALERROR (tests/plugin/test_plugin_xdist_text.py runs it)."""

from __future__ import annotations

from typing import Any

import execnet
import pytest
import report_helpers as synth
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_slam.run.workers.crossing import CARRIED, carried, received, sent
from pytest_slam.util import textcodec

HOSTILE = "\ud800\udbff\udc00\udfff\ud83d\ude00\x00\x1b\u202e\\" + "\x00slam-text:"
TEXTS = st.text(
    alphabet=st.one_of(
        st.characters(codec=None, categories=["L", "N", "P", "Z", "Cc", "Cf", "Cs", "So"]),
        st.sampled_from(HOSTILE),
    ),
    max_size=40,
)


def _report(text: str) -> pytest.TestReport:
    """A worker's call report of a swapped test whose answer, golden answer, message, JUnit
    property and section all hold ``text``, as run/start/session.py annotates it."""
    outcome = next(o for o in synth.outcomes() if o["nodeid"].endswith(f"[{synth.SMOL}]"))
    outcome["calls"][0]["text"] = text
    outcome["pairs"][0]["reference_text"] = text
    outcome["message"] = text
    report = pytest.TestReport(
        nodeid=outcome["nodeid"],
        location=("tests/test_support.py", 1, "test_triage"),
        keywords={},
        outcome="failed",
        longrepr=text,
        when="call",
        sections=[("pytest-slam", text)],
        user_properties=[("slam_answer", text)],
    )
    vars(report)["slam"] = outcome
    return report


def _across(data: dict[str, Any]) -> dict[str, Any]:
    """What execnet hands the controller for ``data`` (its own serializer, as a channel uses)."""
    back: dict[str, Any] = execnet.loads(execnet.dumps(data))
    return back


@given(TEXTS)
@settings(max_examples=60, deadline=None)
def test_a_report_with_any_text_reaches_the_controller_unchanged(text: str) -> None:
    report = _report(text)
    data = _across(sent(report._to_json()))
    received(data)
    back = pytest.TestReport._from_json(data)
    assert vars(back)["slam"] == vars(report)["slam"]
    assert vars(back)["slam"]["calls"][0]["text"] == text  # exactly: no half joined or replaced
    assert back.longrepr == text and back.sections == [("pytest-slam", text)]
    assert [tuple(p) for p in back.user_properties] == [("slam_answer", text)]
    assert CARRIED not in vars(back)


@given(st.lists(TEXTS, max_size=4), TEXTS)
@settings(max_examples=60, deadline=None)
def test_a_workers_payload_with_any_text_reaches_the_controller_unchanged(
    lines: list[str], key: str
) -> None:
    payload = {"summary": lines, "visited": {key: [key]}, "deselected": 0}
    data, changed = carried(payload)
    back = _across(data)
    assert (textcodec.uncarried(back) if changed else back) == payload


def test_a_lone_surrogate_is_what_execnet_refuses() -> None:
    """Why ``sent`` exists: the report as pytest serializes it cannot cross as it is."""
    with pytest.raises(execnet.DataFormatError):
        execnet.dumps(_report("\ud800")._to_json())
