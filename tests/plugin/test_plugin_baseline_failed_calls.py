"""Comparisons count every call (issue 50, item 3): a candidate whose near misses became runaways
regressed, in ``slam report diff``, ``--slm-baseline`` and the gate, though the mean over the pairs
it still answered went up.

Real pytest runs (pytester): the reference and the candidate are FakeOpenAI servers on loopback;
the candidate first answers each JSON request with one leaf changed (a near miss), then streams
filler on two of them (runaways at the structured cap) and answers the third exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_slam.cli import main
from pytest_slam.testing import FakeOpenAI

SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("ticket", ["late parcel", "broken lid", "lost order"])
def test_classify(ticket):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", temperature=0, response_format={"type": "json_object"},
        messages=[{"role": "user", "content": f"Classify as JSON: {ticket}"}])
    json.loads(r.choices[0].message.content)
"""
FILLER = '{"sentiment": "negative", "notes": "' + "and so on " * 20_000  # never ends by itself


def reference(request: dict[str, Any]) -> str:
    ticket = request["messages"][-1]["content"].split(": ", 1)[1]
    return json.dumps({"ticket": ticket, "sentiment": "negative", "team": "logistics"})


class Candidate:
    """Near misses while ``runaway`` is False; then filler on all but the last ticket."""

    runaway = False

    def __call__(self, request: dict[str, Any]) -> str:
        answer = json.loads(reference(request))
        if not self.runaway:
            return json.dumps({**answer, "team": "billing"})  # one leaf of three changed
        return json.dumps(answer) if answer["ticket"] == "lost order" else FILLER


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def row(report: Path) -> dict[str, Any]:
    return json.loads(report.read_text(encoding="utf-8"))["models"][0]


def test_near_misses_that_became_runaways_are_a_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The mean over answered pairs climbs (0.67 -> 1.00), the mean over every call falls (two of
    three calls gave nothing): ``slam report diff`` exits 1 naming it, ``--slm-baseline`` lists it
    and its gate fails."""
    monkeypatch.setenv("COLUMNS", "200")
    pytester.makepyfile(test_triage=SUITE)
    candidate = Candidate()
    with FakeOpenAI(reference) as ref, FakeOpenAI(candidate) as cand:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
candidates = ["mini"]

[tool.slam.models.mini]
base_url = "{cand.base_url}"

[tool.slam.baseline]
latency_increase_ms = 600000
cost_increase_pct = 1000000
""")  # fmt: skip
        first = run(pytester, "--slm-record=new", "--slm-report=old.json")
        candidate.runaway = True
        second = run(pytester, "--slm-report=new.json", "--slm-baseline=old.json")
    old, new = row(pytester.path / "old.json"), row(pytester.path / "new.json")
    assert old["calls_errored"] == 0 and new["calls_errored"] == 2, first.stdout.str()
    assert old["equivalence_mean"] < new["equivalence_mean"] == 1.0  # the pairs left look better
    assert new["equivalence_all_calls"] == pytest.approx(1 / 3)
    assert old["equivalence_all_calls"] == old["equivalence_mean"]
    out = second.stdout.str()
    assert "regressions: 0" not in out
    second.stdout.fnmatch_lines(
        ["*- mini: equivalence_all_calls 0.6* -> 0.33*", "pytest-slam gate: FAIL*"]
    )
    capsys.readouterr()
    assert (
        main(["report", "diff", *(str(pytester.path / n) for n in ("old.json", "new.json"))]) == 1
    )
    said = capsys.readouterr().out
    assert "  - mini: equivalence_all_calls 0.6" in said, said
    assert "+ mini: equivalence" not in said  # the pairs left are no gain
