"""The GPU check of pytest-slam's vLLM engine and energy metering: run by gpu_vllm_check.sh on a GPU box.

Two parts, each through the plugin in a real pytest run (a temporary project, its JSON report read back):

1. vLLM: ``vllm serve MODEL`` started by the plugin's engine supervisor, eight calls, then TTFT,
   TPOT, tokens/s and NVML energy per call and per output token. Needs vLLM and the model's weights
   on that machine (a Hugging Face id already in the local cache, or a local folder); when either is
   missing it says which and goes on.
2. NVML through the plugin without vLLM: a synthetic GPU-served model (an OpenAI-compatible server
   that does real bf16 matrix work on the GPU for every token it streams, marked ``gpu = true``),
   so per-call and per-test energy are read from a real GPU even where vLLM cannot be installed.
3. Throughput (issue 41): one ``vllm serve MODEL`` serves a suite of ``--requests`` tests (one call
   each, ``max_tokens`` 64 with ``ignore_eos``, so every answer is 64 tokens) whose goldens are
   recorded from that server first; then, for each ``--concurrency`` C, the suite at
   ``--slm-concurrency C`` and ``vllm bench serve --max-concurrency C`` (random prompts, 64 output
   tokens, ``--ignore-eos``) against the same server. Requests/s and output tokens/s of each, the
   suite's counted after its start-up (an empty opted-in run); where the plugin has no
   ``--slm-concurrency`` only C = 1 runs (one call at a time, as such a tree always runs).

    bash bench/gpu_vllm_check.sh [MODEL]                       # all three parts, on the GPU box
    python bench/gpu_vllm_check.py --parts throughput --requests 256 --concurrency 1,16,64 [MODEL]

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


THROUGHPUT_PRODUCT = """
import os, openai, pytest

REQUESTS = int(os.environ.get("SLAM_TP_REQUESTS", "0"))

@pytest.mark.slm
@pytest.mark.parametrize("i", range(REQUESTS))
def test_answer(slm_model, i):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4o", max_tokens=64, temperature=0, extra_body={"ignore_eos": True},
        messages=[{"role": "user", "content": f"Request {i}: tell a short story about {i} cats."}])
    assert r.choices[0].message.content
"""
OUTPUT_TOKENS = 64
CONCURRENCY = "--slm-concurrency"


def vllm_executable() -> str | None:
    beside = Path(sys.executable).with_name("vllm")
    return str(beside) if beside.exists() else shutil.which("vllm")


def vllm_problem(model: str) -> str | None:
    """Why vLLM cannot serve ``model`` here, or None when it can."""
    if vllm_executable() is None:
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


def _pytest(project: Path, args: list[str], requests: int) -> tuple[float, str]:
    """One pytest run in ``project`` with ``requests`` tests: its wall seconds and its output."""
    env = dict(os.environ, SLAM_TP_REQUESTS=str(requests),
               PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")  # fmt: skip
    argv = [sys.executable, "-m", "pytest", *_plugin(), "-p", "no:cacheprovider", "-o", "addopts=",
            "-q", *args]  # fmt: skip
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=project, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 5):  # 5: the empty run collects no test
        print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
        raise RuntimeError(f"pytest {' '.join(args)} exited {done.returncode}")
    return wall, done.stdout


def _wait_healthy(url: str, server: subprocess.Popen[bytes], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(2)
    return False


def _vllm_bench(exe: str, url: str, model: str, requests: int, concurrency: int) -> dict | None:
    """``vllm bench serve`` at ``concurrency`` in flight: its result JSON, or None."""
    name = f"vllm-bench-c{concurrency}.json"
    argv = [exe, "bench", "serve", "--backend", "openai-chat", "--base-url", url,
            "--endpoint", "/v1/chat/completions", "--model", model, "--dataset-name", "random",
            "--random-input-len", "24", "--random-output-len", str(OUTPUT_TOKENS), "--ignore-eos",
            "--num-prompts", str(requests), "--max-concurrency", str(concurrency),
            "--save-result", "--result-dir", str(OUT), "--result-filename", name]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0 or not (OUT / name).exists():
        print(done.stdout[-2000:], done.stderr[-2000:], sep="\n")
        return None
    result: dict = json.loads((OUT / name).read_text())
    return result


def check_throughput(model: str, requests: int, concurrencies: list[int]) -> None:
    """The suite's throughput against ``vllm bench serve``'s, on one vLLM server, per concurrency."""
    problem = vllm_problem(model)
    exe = vllm_executable()
    if problem or exe is None:
        print(f"throughput part not run: {problem}.")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from pytest_slam.swap.engines import free_port

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = (OUT / "vllm-serve.log").open("wb")
    server = subprocess.Popen([exe, "serve", model, "--port", str(port), "--max-model-len", "4096",
                               "--gpu-memory-utilization", "0.5"],
                              stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
    project = Path(tempfile.mkdtemp(prefix="slam-throughput-"))
    try:
        if not _wait_healthy(url, server, 900):
            print(f"throughput part not run: vllm serve did not come up (see {log.name})")
            return
        (project / "test_product.py").write_text(THROUGHPUT_PRODUCT)
        (project / "pyproject.toml").write_text(
            f'[tool.slam]\nreference = "{url}/v1#{model}"\nmodels = ["{url}/v1#{model}"]\n'
        )
        _pytest(project, ["--slm-record=new"], requests)  # the goldens, from the same server
        supported = CONCURRENCY in _pytest(project, ["--help"], 0)[1]
        start = min(_pytest(project, [], 0)[0] for _ in range(3))
        print(f"{CONCURRENCY}: {'yes' if supported else 'no (only concurrency 1 runs)'}; "
              f"start-up (empty opted-in run) {start:.1f} s; {requests} requests of "
              f"{OUTPUT_TOKENS} tokens")  # fmt: skip
        print(f"{'C':>4} {'suite req/s':>12} {'tok/s':>8} {'vllm bench req/s':>17} {'tok/s':>8}"
              f" {'suite/bench':>11}")  # fmt: skip
        for c in concurrencies:
            if not supported and c != 1:
                print(f"{c:>4} {'not available on this tree':>38}")
                continue
            flags = [CONCURRENCY, str(c)] if supported else []
            report = OUT / f"throughput-c{c}.json"
            wall, _ = _pytest(project, [*flags, f"--slm-report={report}"], requests)
            spent = max(wall - start, 1e-9)
            calls = [
                call for o in json.loads(report.read_text())["outcomes"] for call in o["calls"]
            ]
            tokens = sum(call.get("completion_tokens") or 0 for call in calls)
            bench = _vllm_bench(exe, f"{url}", model, requests, c) or {}
            b_rps, b_tps = bench.get("request_throughput"), bench.get("output_throughput")
            ratio = f"{requests / spent / b_rps:.2f}x" if b_rps else "-"
            print(f"{c:>4} {requests / spent:>12.2f} {tokens / spent:>8.1f} {_n(b_rps, 2):>17} "
                  f"{_n(b_tps):>8} {ratio:>11}")  # fmt: skip
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
        shutil.rmtree(project, ignore_errors=True)


def _numbers(text: str) -> list[int]:
    values = [int(n) for n in text.split(",") if n.strip()]
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: write whole numbers >= 1, comma-separated")
    return values


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
    parser.add_argument(
        "--parts", default="vllm,synthetic,throughput", help="Which parts run, comma-separated"
    )
    parser.add_argument("--requests", type=int, default=256, help="Throughput: tests (calls)")
    parser.add_argument(
        "--concurrency", type=_numbers, default=[1, 16, 64], help="Throughput: in flight, e.g. 1,16"
    )
    args = parser.parse_args()
    if args.closure:
        print("\n".join(closure()))
        return 0
    OUT.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    parts = {p.strip() for p in args.parts.split(",")}
    if "vllm" in parts:
        print(f"== 1. vLLM serving {args.model} through pytest-slam ==")
        check_vllm(args.model)
    if "synthetic" in parts:
        print("\n== 2. NVML energy through pytest-slam, synthetic GPU-served model ==")
        check_synthetic()
    if "throughput" in parts:
        print(f"\n== 3. The suite's throughput against vllm bench serve, {args.model} ==")
        check_throughput(args.model, args.requests, args.concurrency)
    return 0


if __name__ == "__main__":
    sys.exit(main())
