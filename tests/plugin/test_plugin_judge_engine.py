"""A managed engine as the judge: ``judge = "smollm2-135m"`` starts the embedded llama.cpp engine
when no candidate runs it, the judge's calls go to it, and it is stopped at the end of the run.

A real pytest run against the real engine (SmolLM2-135M); the candidate and the reference are
loopback fakes, so the engine the run starts is the judge's alone.
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

TEST = """
import pytest

@pytest.mark.slm
def test_capital(slm_model):
    slm_model.chat("What is the capital of France?", max_tokens=20)
"""


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.engine
def test_a_managed_engine_judges_and_is_started_and_stopped_like_a_candidate(
    pytester: pytest.Pytester,
) -> None:
    with (
        FakeOpenAI("The capital of France is Paris.", model="gpt-4-0613") as reference,
        FakeOpenAI("Paris is the capital city of France.", model="cand") as candidate,
    ):
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\njudge = 'smollm2-135m'\n"
            "equivalence = { by = 'judge' }\n"
        ))  # fmt: skip
        pytester.makepyfile(test_capital=TEST)
        result = pytester.runpytest_subprocess(
            f"--slm-models={candidate.base_url}#cand", "--slm-record=new", "--slm-report=r.json"
        )
    # its slots follow its concurrency (8 for the embedded engine): the run's judge pairs are
    # asked ahead, as many at once (run/test/judge_ahead.py)
    result.stdout.fnmatch_lines(["*engine smollm2-135m: llama.cpp, 8 slots of *"])
    report = read_report(pytester.path / "r.json")
    (row,) = report["models"]  # the judge's engine is no candidate of the verdict
    assert row["model"] == "cand" and "1 model(s) vs gpt-4" in result.stdout.str()
    assert row["judge_calls"] >= 1, result.stdout.str()  # the judge was asked, on its engine
    (outcome,) = [o for o in report["outcomes"] if o["outcome"] != "engine"]  # not the warm-up
    judged = [c for c in outcome["calls"] if c["role"] == "judge"]
    assert judged and all(c["model"] == "smollm2-135m" for c in judged)
    port = urlsplit(judged[0]["endpoint"]).port
    assert port is not None and not _port_open(port)  # stopped at the end of the run
