"""The embedded engine's running test is answered while fetches for later tests wait (issue 49).

A real pytest run (pytester, a subprocess) of ten-odd tests recorded against a loopback reference,
then replayed against the embedded default, SmolLM2-135M in a managed llama.cpp engine of 8 slots.
The later tests' requests are fetched ahead; the first test makes its own call once the fetched
ones fill every place they may take. Before, 8 fetched answers filled the engine's 8 slots and the
test's own call waited behind them (and timed out at 600 s on a busy machine). The evidence is the
broker's own record of the call in the report (``waited_for``: calls that ended while it waited for
a place), never a timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

LATER = 8  # tests whose requests are fetched ahead while the first one runs
SLOTS = 8  # the embedded engine's slots (swap/limits.py DEFAULT_ENGINE_CONCURRENCY)
SUITE = """
import os, time, openai, pytest
from pytest_slam.swap.chat import IN_FLIGHT

pytestmark = pytest.mark.slm

def fetched_in_flight():
    return sum(1 for f in list(IN_FLIGHT) if (f.label or "").startswith("fetched ahead"))

@pytest.mark.parametrize("n", range({tests}))
def test_ask(n):
    if n == 0 and os.environ.get("FETCHED"):
        # the running test asks once the fetched calls fill every place they may take, on a
        # machine of any speed (a guard against a hang, not a timing)
        until = time.monotonic() + 120
        while fetched_in_flight() < int(os.environ["FETCHED"]) and time.monotonic() < until:
            time.sleep(0.001)
    openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{{"role": "user", "content": f"Say {{n}}"}}],
        max_tokens=2, temperature=0)
"""


def _project(pytester: pytest.Pytester, reference: FakeOpenAI) -> None:
    # no call alone first: the latency sample's would drain the engine before the others go
    pytester.makefile(".toml", pyproject=f"""
[tool.slam]
candidates = ["smollm2-135m"]
reference = "{reference.base_url}#gpt-4"
alone_first = 0
alone_every = 0
""")  # fmt: skip


def _calls(report: Path) -> dict[str, dict[str, Any]]:
    outcomes = read_report(report)["outcomes"]
    # each test's call by its number (test_ask[smollm2-135m-N])
    return {o["nodeid"].rsplit("-", 1)[-1]: c for o in outcomes for c in o["calls"]}


@pytest.mark.engine
def test_the_running_test_s_call_is_answered_while_fetches_fill_the_engine(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SLAM_WITH_CANDIDATES", raising=False)  # record the reference alone
    pytester.makepyfile(test_product=SUITE.format(tests=1 + LATER))
    _project(pytester, fake_gpt4)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-record=new").assert_outcomes(
        passed=1 + LATER
    )
    monkeypatch.setenv("FETCHED", str(SLOTS - 1))  # a slot is kept for the running test
    replay = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-report=r.json")
    outcomes = replay.parseoutcomes()
    assert outcomes.get("passed", 0) + outcomes.get("failed", 0) == 1 + LATER, outcomes
    calls = _calls(pytester.path / "r.json")
    own = calls["0]"]
    assert not own["fetched_ahead"] and own["error"] is None
    # sent with the fetched calls filling every other slot of the engine, and at once: no call
    # ended while it waited for a place (before, it waited for one of the fetched answers)
    assert own["in_flight"] == SLOTS, own
    assert own["waited_for"] == 0, own
    assert sum(c["fetched_ahead"] for c in calls.values()) == LATER  # each later one fetched
