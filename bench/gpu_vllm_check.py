"""The GPU check of pytest-slam's vLLM engine and energy metering: run by gpu_vllm_check.sh on a GPU box.

Two parts, each through the plugin in a real pytest run (a temporary project, its JSON report read back):

1. vLLM: ``vllm serve MODEL`` started by the plugin's engine supervisor, eight calls, then TTFT,
   TPOT, tokens/s and NVML energy per call and per output token. Needs vLLM and the model's weights
   on that machine (a Hugging Face id already in the local cache, or a local folder); when either is
   missing it says which and goes on.
2. NVML through the plugin without vLLM: a synthetic GPU-served model (an OpenAI-compatible server
   that does real bf16 matrix work on the GPU for every token it streams, marked ``gpu = true``),
   so per-call and per-test energy are read from a real GPU even where vLLM cannot be installed.

Prints one table per part and writes the reports under $OUT (or /tmp/slam-gpu-check).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(os.environ.get("OUT") or "/tmp/slam-gpu-check")
DEFAULT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"
PRODUCT = """
import openai, pytest

QUESTIONS = [
    "Explain in two sentences why the sky is blue.",
    "Write a haiku about a regression test.",
    "List four prime numbers and say why each is prime.",
    "Summarise what a load balancer does.",
    "Translate 'good morning, how are you?' into French and German.",
    "Give three tips for writing a clear error message.",
    "What is the difference between a list and a tuple in Python?",
    "Describe the water cycle for a ten-year-old.",
]

@pytest.mark.slm
@pytest.mark.parametrize("question", QUESTIONS)
def test_answer(slm_model, question):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": question}], max_tokens=64,
        temperature=0)
    assert r.choices[0].message.content
"""
SYNTHETIC_SERVER = """
import os, sys, torch
from pytest_slam.testing import fake_openai

DEVICE = os.environ.get("SLAM_SYNTHETIC_DEVICE", "cuda")  # "cpu": a dry run of the plumbing
SIZE = 4096 if DEVICE == "cuda" else 64
WORK = torch.randn(SIZE, SIZE, device=DEVICE, dtype=torch.bfloat16)

def answer(body):
    words = []
    for i in range(int(body.get("max_tokens") or 32)):
        x = WORK
        for _ in range(40):  # about 5 TFLOP per token: real GPU energy to meter
            x = x @ WORK
        if DEVICE == "cuda":
            torch.cuda.synchronize()
        words.append(f"w{i}")
    return " ".join(words)

fake = fake_openai.FakeOpenAI(answer, model="gpu-synthetic", port=int(sys.argv[1])).start()
print(fake.base_url, flush=True)
sys.stdin.read()  # serve until the parent closes our stdin
"""


def vllm_problem(model: str) -> str | None:
    """Why vLLM cannot serve ``model`` here, or None when it can."""
    beside = Path(sys.executable).with_name("vllm")
    if not (beside.exists() or shutil.which("vllm")):
        return "no `vllm` executable (pip install vllm; its wheel and CUDA torch need a registry)"
    if Path(model).is_dir():
        return None
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return f"cannot look for {model} in the Hugging Face cache (no huggingface_hub)"
    found = try_to_load_from_cache(model, "config.json")
    if not isinstance(found, str):
        return f"no weights for {model} in the Hugging Face cache and no hub to fetch them from"
    return None


def run_suite(name: str, pyproject: str, models: str) -> dict | None:
    """One real pytest run of PRODUCT in a fresh project; its JSON report, or None on failure."""
    project = Path(tempfile.mkdtemp(prefix=f"slam-{name}-"))
    (project / "pyproject.toml").write_text(textwrap.dedent(pyproject))
    (project / "test_product.py").write_text(PRODUCT)
    report = OUT / f"{name}.json"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    argv = [sys.executable, "-m", "pytest", *_plugin(), "-p", "no:cacheprovider", "-o", "addopts=",
            f"--slm-models={models}", f"--slm-report={report}", "-q"]  # fmt: skip
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    print(done.stdout[-4000:], done.stderr[-2000:], sep="\n")
    print(f"{name}: pytest exited {done.returncode} after {time.monotonic() - t0:.0f} s")
    return json.loads(report.read_text()) if report.exists() else None


def _plugin() -> list[str]:
    """Load the plugin from this checkout unless it is installed (its entry point loads it then)."""
    import importlib.metadata as md

    try:
        md.distribution("pytest-slam")
    except md.PackageNotFoundError:
        return ["-p", "pytest_slam.plugin"]
    return []


def show(report: dict) -> None:
    """TTFT, TPOT, throughput and energy: per model, then per call."""
    print(report["run"]["gpu_telemetry"] or "GPU telemetry: (none: no GPU-served model)")
    for row in report["models"]:
        tpot = (row.get("distributions") or {}).get("tpot_ms", {})
        print(f"{row['model']}: TTFT p50 {_n(row['ttft_p50_ms'])} ms, TPOT p50 {_n(tpot.get('p50'))} ms, "
              f"E2E p95 {_n(row['e2e_p95_ms'])} ms, {_n(row['output_tokens_per_s'])} tok/s, "
              f"energy {_n(row['energy_per_call_j'])} J/call, "
              f"{_n(row['energy_per_output_token_j'], 4)} J/token, "
              f"${_n(row['cost_per_1000_calls_usd'], 4)} per 1,000 calls")  # fmt: skip
    print(f"{'call':>4} {'TTFT ms':>8} {'TPOT ms':>8} {'out tok':>7} {'energy J':>9}  test")
    for outcome in report["outcomes"]:
        for i, call in enumerate(outcome["calls"]):
            print(f"{i:>4} {_n(call['ttft_ms']):>8} {_n(call['tpot_ms']):>8} "
                  f"{call['completion_tokens'] or '-':>7} {_n(call['energy_j'], 3):>9}  "
                  f"{outcome['nodeid']} (test: {_n(outcome['energy_j'], 3)} J)")  # fmt: skip


def _n(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def check_vllm(model: str) -> None:
    problem = vllm_problem(model)
    if problem:
        print(f"vLLM part not run: {problem}.")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # weights come from the cache, never the hub
    report = run_suite("vllm", f"""
        [tool.slam]
        reference = "none"
        engine_timeout_s = 900

        [tool.slam.models.qwen]
        provider = "vllm"
        model = "{model}"
        hourly_usd = 3.5
        engine = {{ dtype = "bfloat16", max_model_len = 4096, gpu_memory_utilization = 0.3 }}
        """, "qwen")  # fmt: skip
    if report:
        show(report)


def check_synthetic() -> None:
    """Energy through the plugin on a real GPU, with a server that does real GPU work per token."""
    from pytest_slam.swap.engines import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SYNTHETIC_SERVER, str(port)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))  # fmt: skip
    try:
        base_url = server.stdout.readline().strip()
        if not base_url:
            print("synthetic part not run: its GPU server did not start (torch with CUDA?)")
            return
        _ = urllib.request.urlopen(base_url.removesuffix("/v1") + "/health", timeout=30).read()
        report = run_suite("synthetic", f"""
            [tool.slam]
            reference = "none"

            [tool.slam.models.gpu-synthetic]
            provider = "endpoint"
            base_url = "{base_url}"
            hourly_usd = 3.5
            engine = {{ gpu = true }}
            """, "gpu-synthetic")  # fmt: skip
        if report:
            print("(synthetic: the GPU work precedes the first token, so TPOT means nothing here)")
            show(report)
    finally:
        server.stdin.close()
        server.wait(30)


# What the GPU machine's image already holds (device/KINDS.md); everything else is carried as wheels.
GPU_IMAGE_HAS = {"anyio", "certifi", "filelock", "h11", "httpcore", "httpx", "idna", "iniconfig",
                 "jinja2", "markupsafe", "packaging", "pluggy", "pygments", "pytest", "tqdm",
                 "typing-extensions"}  # fmt: skip


def closure(roots: tuple[str, ...] = ("openai", "rapidfuzz")) -> list[str]:
    """``NAME==VERSION`` of the roots and their needs as installed here, less what the image has.

    Needs are read from the installed metadata, with markers evaluated for the GPU machine (Linux,
    CPython 3.12), so the list matches what pip would install there.
    """
    import importlib.metadata as md

    from packaging.requirements import Requirement

    there = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
             "platform_system": "Linux", "platform_machine": "x86_64", "extra": ""}  # fmt: skip
    seen: dict[str, str] = {}
    todo = [Requirement(r) for r in roots]
    while todo:
        req = todo.pop()
        name = req.name.lower().replace("_", "-")
        if name in seen or name in GPU_IMAGE_HAS or (req.marker and not req.marker.evaluate(there)):
            continue
        dist = md.distribution(name)
        seen[name] = dist.version
        todo += [Requirement(r) for r in dist.requires or ()]
    return [f"{n}=={v}" for n, v in sorted(seen.items())]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "model", nargs="?", default=os.environ.get("SLAM_VLLM_MODEL", DEFAULT_MODEL)
    )
    parser.add_argument(
        "--closure", action="store_true", help="Print the wheels to carry, and exit"
    )
    args = parser.parse_args()
    if args.closure:
        print("\n".join(closure()))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    print(f"== 1. vLLM serving {args.model} through pytest-slam ==")
    check_vllm(args.model)
    print("\n== 2. NVML energy through pytest-slam, synthetic GPU-served model ==")
    check_synthetic()
    return 0


if __name__ == "__main__":
    sys.exit(main())
