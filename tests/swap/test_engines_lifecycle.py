"""The embedded engine's life: one slot per xdist worker, and no orphan under any kill.

Real pytest runs against the real llama.cpp engine (SmolLM2-135M), as a user's run does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from report_helpers import read_report
from slam_helpers import wait_for

from pytest_slam.swap.engines import KV_TOKENS_PER_FILE, slots_that_fit

NO_REFERENCE = "[tool.slam]\nreference = 'none'\n"

# Two opted-in tests that meet at a file barrier, then each ask the engine for a long answer.
TWO_AT_ONCE = """
import os, time, openai, pytest

pytestmark = pytest.mark.slm
BARRIER = os.environ["BARRIER_DIR"]

def _meet(name):
    open(os.path.join(BARRIER, name), "w").close()
    deadline = time.monotonic() + 120
    while len(os.listdir(BARRIER)) < 2:
        assert time.monotonic() < deadline, "the other worker never reached the barrier"
        time.sleep(0.01)

@pytest.mark.parametrize("n", [1, 2])
def test_story(slm_model, n):
    _meet(f"{n}")
    openai.OpenAI().chat.completions.create(
        model="gpt-4o", max_tokens=48, temperature=0,
        messages=[{"role": "user", "content": f"Tell a long story about cat number {n}."}])
"""


def _generating_span(call: dict) -> tuple[float, float]:
    """From the first token to the last: the time the engine spent on this call's answer.

    A request queued behind another (one slot) only gets its first token once the other is done,
    so these spans overlap only when the engine serves both at once.
    """
    return call["started_at"] + call["ttft_ms"] / 1000, call["started_at"] + call["e2e_ms"] / 1000


def test_with_two_workers_the_engine_serves_two_requests_at_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(test_two=TWO_AT_ONCE)
    monkeypatch.setenv("BARRIER_DIR", str(pytester.mkdir("barrier")))
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--slm-models=smollm2-135m", "--slm-report=run.json"
    )
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["*engine smollm2-135m: llama.cpp, 16 slots of 4096 tokens, on http://127.0.0.1:*/v1*"]
    )
    report = read_report(pytester.path / "run.json")
    calls = [c for o in report["outcomes"] if o["outcome"] == "passed" for c in o["calls"]]
    assert len(calls) == 2 and all(c["completion_tokens"] > 1 for c in calls), calls
    (a_start, a_end), (b_start, b_end) = (_generating_span(c) for c in calls)
    assert a_start < b_end and b_start < a_end, "the two answers were generated one after another"


def test_serial_run_starts_a_slot_per_call_in_flight(pytester: pytest.Pytester) -> None:
    """The embedded engine's concurrency is 8 (swap/limits.py): a slot for each call in flight;
    ``--slm-concurrency 1`` is one slot, one call at a time."""
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(
        test_one="import pytest\n\n@pytest.mark.slm\ndef test_x(slm_model):\n"
        "    slm_model.chat('Hi', max_tokens=1)\n"
    )
    result = pytester.runpytest_subprocess("--slm-models=smollm2-135m")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*engine smollm2-135m: llama.cpp, 8 slots of 4096 tokens, on *"])
    result = pytester.runpytest_subprocess("--slm-models=smollm2-135m", "--slm-concurrency=1")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*engine smollm2-135m: llama.cpp, 1 slot of 4096 tokens, on *"])


@pytest.mark.parametrize(
    ("wanted", "available", "expected"),
    [
        (4, None, 4),  # memory unknown: as many as workers
        (4, 10**12, 4),  # plenty
        (8, 2 * 4096 * 2 * 10**8 // KV_TOKENS_PER_FILE, 2),  # room for two slots' KV cache
        (4, 1, 1),  # never fewer than one
    ],
)
def test_slots_follow_workers_memory_permitting(
    wanted: int, available: int | None, expected: int
) -> None:
    assert slots_that_fit(wanted, 4096, 10**8, available) == expected


# -- no orphan under any kill ---------------------------------------------------------------------

BLOCK_AFTER_ENGINE = """
import json, os, time, openai, pytest

@pytest.mark.slm
def test_block(slm_model):
    openai.OpenAI().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    with open(os.environ["ENGINE_FILE"], "w") as fh:
        json.dump({"endpoint": slm_model.calls[0].endpoint}, fh)
    time.sleep(600)
"""


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _processes_with(marker: str) -> list[int]:
    """Pids of live processes whose environment carries ``marker`` (every process the run began)."""
    needle = marker.encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if needle in environ and state != "Z":
            found.append(int(proc.name))
    return found


def test_sigkill_of_the_process_group_leaves_no_process_and_no_port(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".toml", pyproject=NO_REFERENCE)
    pytester.makepyfile(test_block=BLOCK_AFTER_ENGINE)
    engine_file = pytester.path / "engine.json"
    marker = f"SLAM_KILL_TEST={uuid.uuid4().hex}"
    name, value = marker.split("=")
    env = {**os.environ, "ENGINE_FILE": str(engine_file), name: value}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pytest",
            "--slm-models=smollm2-135m",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=pytester.path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group, as a CI job's
    )
    try:
        wait_for(engine_file.exists, 180, "the inner test to reach the engine")
        port = int(read_report(engine_file)["endpoint"].rsplit(":", 1)[1].split("/")[0])
        assert _port_open(port)
        assert len(_processes_with(marker)) >= 3  # pytest, the supervisor, the engine
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        wait_for(lambda: not _processes_with(marker), 30, "every process of the run to exit")
        wait_for(lambda: not _port_open(port), 30, f"the engine's port {port} to close")
    finally:
        for pid in _processes_with(marker):  # only the processes this test started
            os.kill(pid, signal.SIGKILL)
