"""The vLLM engine without a GPU: its command, its checks, and its lifecycle run for real.

vLLM itself needs a CUDA GPU, so a stand-in ``vllm`` executable (a small Python script) takes its
place: it records its argv and serves FakeOpenAI, with ``/health``, on the ``--port`` it is given.
Start, health check, stop, and the death of the engine with a SIGKILLed owner then run for real,
through the same supervisor a real ``vllm serve`` runs under. ``bench/gpu_vllm_check.sh`` runs the
real thing on a GPU machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from slam_helpers import wait_for

from pytest_slam.metrics.energy import GpuMeter
from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines import EngineError, VllmEngine, start_engine

QWEN = "Qwen/Qwen2.5-0.5B-Instruct"
FAKE_VLLM = """#!{python}
# A stand-in for `vllm serve MODEL --port N ...`: records its argv, then serves FakeOpenAI.
import json, os, sys
from pytest_slam.testing import fake_openai

args = sys.argv[1:]
with open({record!r}, "a") as fh:
    fh.write(json.dumps({{"pid": os.getpid(), "argv": args}}) + "\\n")
if args[:1] != ["serve"]:
    sys.exit("usage: vllm serve MODEL --port N")
port = args[args.index("--port") + 1]
sys.exit(fake_openai.main(["--port", port, "--model", args[1], "--answer", "vLLM says hi."]))
"""


@pytest.fixture
def fake_vllm(tmp_path: Path) -> Path:
    """A ``vllm`` executable in its own folder; what it was run with lands in ``vllm-argv.jsonl``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    exe = folder / "vllm"
    exe.write_text(
        FAKE_VLLM.format(python=sys.executable, record=str(tmp_path / "vllm-argv.jsonl"))
    )
    exe.chmod(0o755)
    return exe


def _runs(fake_vllm: Path) -> list[dict]:
    record = fake_vllm.parent.parent / "vllm-argv.jsonl"
    return [json.loads(line) for line in record.read_text().splitlines()]


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def _no_gpu_here() -> None:
    meter = GpuMeter()
    try:
        if meter.available:
            pytest.skip(f"a GPU is present ({meter.reason}): the no-GPU path cannot run here")
    finally:
        meter.close()


def test_command_maps_every_option_to_vllms_flag(fake_vllm: Path) -> None:
    args = {"executable": str(fake_vllm), "dtype": "bfloat16", "max_model_len": 2048,
            "gpu_memory_utilization": 0.35, "tensor_parallel_size": 2, "seed": 7,
            "enforce_eager": True, "trust_remote_code": False,
            "extra_args": ["--max-num-batched-tokens", 4096]}  # fmt: skip
    engine = VllmEngine(ModelSpec(QWEN, "vllm", QWEN, engine_args=args), port=8123)
    assert engine.command() == [
        str(fake_vllm), "serve", QWEN, "--host", "127.0.0.1", "--port", "8123",
        "--dtype", "bfloat16", "--max-model-len", "2048", "--gpu-memory-utilization", "0.35",
        "--tensor-parallel-size", "2", "--seed", "7", "--enforce-eager",
        "--max-num-batched-tokens", "4096",
    ]  # fmt: skip
    assert engine.base_url == "http://127.0.0.1:8123/v1"
    assert engine.health_url == "http://127.0.0.1:8123/health"


def test_a_first_start_gets_time_to_load_and_compile() -> None:
    default = VllmEngine(ModelSpec("q", "vllm", QWEN), port=1)
    assert default.start_timeout(120.0) == 600.0  # engine_timeout_s is sized for llama.cpp
    assert default.start_timeout(900.0) == 900.0
    given = VllmEngine(ModelSpec("q", "vllm", QWEN, engine_args={"start_timeout_s": 60}), port=1)
    assert given.start_timeout(900.0) == 60.0


def test_a_misspelt_option_is_named_with_the_known_ones() -> None:
    engine = VllmEngine(ModelSpec("q", "vllm", QWEN, engine_args={"max_model_length": 2048}), 1)
    with pytest.raises(EngineError) as info:
        engine.check_available()
    message = str(info.value)
    assert "unknown vLLM engine option(s) max_model_length;" in message
    assert "max_model_len" in message and "extra_args" in message


def test_without_a_gpu_the_message_says_which_part_is_missing(
    fake_vllm: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _no_gpu_here()
    if Path(sys.executable).with_name("vllm").exists():
        pytest.skip("vLLM is installed beside this Python")
    monkeypatch.setenv("PATH", str(tmp_path))  # no vllm anywhere
    bare = VllmEngine(ModelSpec(f"vllm:{QWEN}", "vllm", QWEN), port=1)
    with pytest.raises(EngineError, match=r"this machine has neither vLLM nor a CUDA GPU\. Run it"):
        bare.check_available()
    monkeypatch.setenv("PATH", str(fake_vllm.parent))  # vllm on PATH, still no GPU
    assert bare.executable() == str(fake_vllm)
    with pytest.raises(
        EngineError, match=r"this machine has no CUDA GPU\. Run it on a GPU machine"
    ):
        bare.check_available()
    missing = ModelSpec("q", "vllm", QWEN, engine_args={"executable": str(tmp_path / "nope")})
    with pytest.raises(EngineError, match="has neither vLLM nor a CUDA GPU"):
        VllmEngine(missing, port=1).check_available()


def test_served_and_stopped_through_the_plugin(pytester: pytest.Pytester, fake_vllm: Path) -> None:
    pytester.makefile(
        ".toml",
        pyproject=f"""
        [tool.slam]
        reference = "none"

        [tool.slam.models.qwen]
        provider = "vllm"
        model = "{QWEN}"
        hourly_usd = 2.5

        [tool.slam.models.qwen.engine]
        executable = "{fake_vllm}"
        gpu = false
        dtype = "bfloat16"
        max_model_len = 2048
        gpu_memory_utilization = 0.4
        tensor_parallel_size = 1
        enforce_eager = true
        extra_args = ["--max-num-seqs", "8"]
        """,
    )
    pytester.makepyfile(
        test_product="""
        import openai, pytest

        @pytest.mark.slm
        def test_answer(slm_model):
            r = openai.OpenAI().chat.completions.create(
                model="gpt-4", messages=[{"role": "user", "content": "hi"}], max_tokens=8)
            assert r.choices[0].message.content == "vLLM says hi."
            assert slm_model.calls[0].response_model == "Qwen/Qwen2.5-0.5B-Instruct"
        """
    )
    result = pytester.runpytest("--slm-models=qwen")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*pytest-slam*", "qwen *1/1*"])
    (run,) = _runs(fake_vllm)  # one engine for the session
    argv = run["argv"]
    assert argv[:4] == ["serve", QWEN, "--host", "127.0.0.1"]
    assert " ".join(argv[6:]) == (
        "--dtype bfloat16 --max-model-len 2048 --gpu-memory-utilization 0.4 "
        "--tensor-parallel-size 1 --enforce-eager --max-num-seqs 8"
    )
    assert not _alive(run["pid"])  # stopped when the session ended


def test_engine_dies_with_its_sigkilled_owner(fake_vllm: Path) -> None:
    owner_code = f"""
import sys, time, tempfile
from pathlib import Path
from pytest_slam.swap.engines import start_engine
from pytest_slam.records import ModelSpec
spec = ModelSpec("qwen", "vllm", {QWEN!r}, engine_args={{"executable": {str(fake_vllm)!r}, "gpu": False}})
start_engine(spec, Path(tempfile.mkdtemp()), 60)
print(spec.base_urls[0], flush=True)
time.sleep(600)
"""
    owner = subprocess.Popen([sys.executable, "-c", owner_code], stdout=subprocess.PIPE, text=True)
    try:
        base_url = owner.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), "the owner did not start the engine"
        health = base_url.removesuffix("/v1") + "/health"
        with urllib.request.urlopen(health, timeout=10) as response:
            assert response.status == 200
        (run,) = _runs(fake_vllm)
        assert _alive(run["pid"])
        owner.send_signal(signal.SIGKILL)
        owner.wait(30)
        wait_for(lambda: not _alive(run["pid"]), 60, "the orphaned vllm to exit")
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()


def test_each_test_says_vllm_cannot_run_here_in_one_line(pytester: pytest.Pytester) -> None:
    _no_gpu_here()
    if shutil.which("vllm") or Path(sys.executable).with_name("vllm").exists():
        pytest.skip("vLLM is installed here")
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(
        test_two="""
        import pytest

        pytestmark = pytest.mark.slm

        def test_one(slm_model):
            slm_model.chat("Hi", max_tokens=1)

        def test_two(slm_model):
            slm_model.chat("Hi", max_tokens=1)
        """
    )
    result = pytester.runpytest(f"--slm-models=vllm:{QWEN}")
    # the first call starts the engines and fails on that line; the next test errors at its start
    result.assert_outcomes(failed=1, errors=1)
    line = (
        f"model 'vllm:{QWEN}' is served by vLLM, which needs vLLM and a CUDA GPU; this machine "
        "has neither vLLM nor a CUDA GPU. Run it on a GPU machine with `pip install "
        "'pytest-slam[vllm]'`, or point the model at a running server with base_url in "
        "[tool.slam.models.NAME]."
    )
    out = result.stdout.str()
    # Each affected test's report is that one line (the short summary repeats it after the id).
    assert [text for text in result.stdout.lines if text == line] == [line, line], out
    assert "Traceback" not in out and "EngineError" not in out


def test_start_engine_sets_the_url_and_stop_ends_it(fake_vllm: Path, tmp_path: Path) -> None:
    spec = ModelSpec("qwen", "vllm", QWEN, engine_args={"executable": str(fake_vllm), "gpu": False})
    server = start_engine(spec, tmp_path, timeout_s=60)
    try:
        assert spec.base_urls == [server.engine.base_url]
        (run,) = _runs(fake_vllm)
        assert _alive(run["pid"]) and server.started_s is not None
    finally:
        server.stop()
    assert not _alive(run["pid"])
    assert os.path.exists(server.log_path)
