"""Ctrl-C and partial runs: pytest's one-line interrupt, no orphan, and a gate that never passes.

Real pytest runs in their own process group, sent SIGINT as a terminal's Ctrl-C is (to the whole
foreground group), against the real llama.cpp engine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from patience import patient
from slam_helpers import wait_for

from pytest_slam.report.aggregate import Verdict
from pytest_slam.report.gate import Gate, evaluate, incomplete_reason

NO_REFERENCE = "[tool.slam]\nreference = 'none'\n"
LONG_CALL = """
import os, openai, pytest

@pytest.mark.slm
def test_long(slm_model):
    slm_model.chat("Hi", max_tokens=1)  # a serial run's engine starts at the first call
    open(os.environ["IN_TEST"], "w").close()
    openai.OpenAI().chat.completions.create(
        model="gpt-4o", max_tokens=2000,
        messages=[{"role": "user", "content": "Write a very long essay about cats."}])
"""
NOISE = ("Traceback", "IncompleteRead", "dropped a connection", "Exception in thread")


def _run_marked(marker: str) -> list[int]:
    """Live pids whose environment carries ``marker``: every process the inner run started."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if marker.encode() in (proc / "environ").read_bytes():
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
                if state != "Z":
                    found.append(int(proc.name))
        except (OSError, IndexError):
            continue
    return found


def _engine_loading(marker: str) -> bool:
    for pid in _run_marked(marker):
        try:
            if b"llamacpp_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
        except OSError:
            continue
    return False


def _ctrl_c(pytester: pytest.Pytester, when: str, *args: str) -> tuple[int, str, str]:
    """Run pytest, press Ctrl-C once ``when`` ("engine" loading, or "test" calling); return
    (exit status, output, marker)."""
    in_test = pytester.path / "in-test"
    marker = f"SLAM_INTERRUPT_TEST={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = {**os.environ, "IN_TEST": str(in_test), name: value}
    for var in ("OPENAI_BASE_URL", "OPENAI_API_KEY"):
        env.pop(var, None)
    argv = [sys.executable, "-m", "pytest", "--slm-models=smollm2-135m", "-p", "no:cacheprovider"]
    proc = subprocess.Popen(
        [*argv, "--slm-report=run.json", *args],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # a terminal's foreground process group
    )
    try:
        ready = (lambda: _engine_loading(marker)) if when == "engine" else in_test.exists
        wait_for(lambda: ready() or proc.poll() is not None, 300, f"the inner run to reach {when}")
        if proc.poll() is not None:
            pytest.fail(f"the inner run ended before {when}:\n{proc.communicate()[0]}")
        # Into the call (it streams for seconds), or just into the engine's load: the 135M model
        # loads in under a second from a warm page cache, so a longer wait there could land after
        # the engine is ready and the first test reported (seen once in CI-like runs).
        time.sleep(0.5 if when == "test" else 0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=patient(120))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, out, marker


def _interrupted(pytester: pytest.Pytester, when: str, workers: int | None) -> str:
    """Press Ctrl-C on a long call's run once ``when`` (see ``_ctrl_c``); check the interrupt was
    clean and left nothing running; return the output."""
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(test_long=LONG_CALL)
    xdist = ["-p", "xdist", "-n", str(workers)] if workers else []
    ret, out, marker = _ctrl_c(pytester, when, *xdist)
    assert ret == pytest.ExitCode.INTERRUPTED, out
    assert "KeyboardInterrupt" in out
    assert "(to show a full traceback on KeyboardInterrupt use --full-trace)" in out
    assert not [n for n in NOISE if n in out], out
    wait_for(lambda: not _run_marked(marker), 30, "every process of the run to exit")
    return out


@pytest.mark.parametrize("workers", [None, 2])
def test_ctrl_c_during_a_call_is_one_line_and_the_gate_is_incomplete(
    pytester: pytest.Pytester, workers: int | None
) -> None:
    out = _interrupted(pytester, "test", workers)
    assert "gate: INCOMPLETE (the run was interrupted)" in out
    gate = json.loads((pytester.path / "run.json").read_text())["gate"]
    assert gate["status"] == "incomplete" and gate["passed"] is False, gate


@pytest.mark.parametrize("workers", [None, 2])
def test_ctrl_c_while_the_engine_loads_leaves_nothing_running_nor_an_older_report(
    pytester: pytest.Pytester, workers: int | None
) -> None:
    older = pytester.path / "run.json"  # an earlier run's report, at the path this run writes
    older.write_text('{"schema": "pytest-slam/report/1", "gate": {"status": "passed"}}\n')
    out = _interrupted(pytester, "engine", workers)
    assert "passed" not in out.split("KeyboardInterrupt")[0].lower()
    assert not older.exists()  # with -n 2 the engines start before pytest's sessionfinish can run
    assert (
        "JSON report: none, the run was interrupted before any test reported; the older "
        "run.json was removed" in " ".join(out.split())
    ), out


# -- a run that tested nothing is not a passed gate -----------------------------------------------

SKIPPED = """
import pytest

@pytest.mark.slm
def test_skipped(slm_model):
    pytest.skip("not today")
"""


@pytest.mark.parametrize(
    ("gate", "ret", "line"),
    [
        ("", pytest.ExitCode.OK, None),
        (
            "[tool.slam.gate]\nmin_pass_rate = 0.5\n",
            6,
            "exit status 6: the tests passed, the gate is incomplete",
        ),
    ],
)
def test_a_run_with_no_test_executed_is_incomplete(
    pytester: pytest.Pytester, gate: str, ret: int, line: str | None
) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE + gate)
    pytester.makepyfile(test_skipped=SKIPPED)
    result = pytester.runpytest("--slm-models=http://127.0.0.1:9/v1#nobody", "--slm-report=r.json")
    result.assert_outcomes(skipped=1)
    assert result.ret == ret
    result.stdout.fnmatch_lines(["gate: INCOMPLETE (no test ran)"])
    if line:
        result.stdout.fnmatch_lines([line])
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["gate"]["passed"] is False and report["gate"]["status"] == "incomplete"


@pytest.mark.parametrize(
    ("exitstatus", "stopped", "tests_run", "lost", "why"),
    [
        (0, None, 3, 0, None),
        (2, None, 3, 0, "the run was interrupted"),
        (1, "stopping after 1 failures", 1, 0, "the run stopped early: stopping after 1 failures"),
        (1, None, 2, 1, "1 xdist worker(s) lost"),
        (0, None, 0, 0, "no test ran"),
    ],
)
def test_incomplete_reason(
    exitstatus: int, stopped: str | None, tests_run: int, lost: int, why: str | None
) -> None:
    assert incomplete_reason(exitstatus, stopped, tests_run, lost) == why


def test_an_incomplete_gate_never_passes_even_with_no_rules() -> None:
    verdict = Verdict.from_dict({"models": [], "run": {}})
    result = evaluate(Gate(), verdict, incomplete="the run was interrupted")
    assert (result.passed, result.status) == (False, "incomplete")
    assert result.lines() == ["pytest-slam gate incomplete (the run was interrupted)"]
    assert evaluate(Gate(), verdict).status == "not_configured"


STOPS_EARLY = """
import pytest

pytestmark = pytest.mark.slm

def test_a(slm_model):
    assert False, "first"

def test_b(slm_model):
    pass
"""


def test_a_run_stopped_by_maxfail_is_incomplete(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(test_stop=STOPS_EARLY)
    result = pytester.runpytest("--slm-models=http://127.0.0.1:9/v1#nobody", "-x")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["gate: INCOMPLETE (the run stopped early: stopping after 1 fail*)"]
    )
