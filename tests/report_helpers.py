"""Realistic synthetic run outcomes for the report tests, built from the real records.

Three candidates against a GPT-4 reference over four product tests (one making two calls):

- ``smollm2-135m`` (llama.cpp, self-hosted, no GPU telemetry): a cold start, a failed test with
  low equivalence, an errored call (connection refused), a request with no golden answer,
  estimated token counts;
- ``qwen2.5-1.5b`` (vLLM on a GPU): everything passes, energy measured;
- ``gpt-4o-mini`` (hosted API): one skipped test, an answer holding HTML and a script.

The numbers are chosen so the expected aggregates can be worked out by hand in the tests.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pytest_slam.records import Call, ModelSpec, Outcome, Pair, Score
from pytest_slam.report.aggregate import PerTestRow, RunInfo
from pytest_slam.report.visits import Visits

REFERENCE = "openai:gpt-4"
SMOL, QWEN, MINI = "smollm2-135m", "qwen2.5-1.5b", "gpt-4o-mini"
MODELS = (SMOL, QWEN, MINI)
TESTS = ("test_triage", "test_summarize", "test_extract", "test_reply")
XSS = '<script>alert("pwned")</script><img src=x onerror=alert(1)>'

# key -> (reference text, ttft_ms, e2e_ms, prompt_tokens, completion_tokens, cost_usd)
GOLDEN: dict[str, tuple[str, float, float, int, int, float]] = {
    "k_triage": ("Priority: high. Route to billing.", 300, 900, 50, 10, 0.0021),
    "k_summ1": (
        "The customer was charged twice for order 1182 and asks for a refund of $42.",
        350, 2400, 400, 120, 0.0192,
    ),
    "k_summ2": ("Refund approved; the duplicate charge is reversed in 3 days.", 320, 2000, 380, 100,
                0.0174),
    "k_extract": ('{"order": 1182, "amount": 42.0, "currency": "USD"}', 280, 1500, 200, 60, 0.0096),
    "k_reply": (
        "Hi Dana,\nSorry about the double charge. We refunded $42; expect it within 3 days.",
        400, 3100, 150, 200, 0.0165,
    ),
}  # fmt: skip


def call(model: str, text: str, ttft: float | None, e2e: float | None, pt: int | None,
         ct: int | None, cost: float | None, *, key: str, energy: float | None = None,
         **extra: Any) -> dict[str, Any]:  # fmt: skip
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": f"[{key}]"}]}
    return Call(model=model, role="candidate", request=request, text=text, prompt_tokens=pt,
                completion_tokens=ct, ttft_ms=ttft, e2e_ms=e2e, cost_usd=cost, energy_j=energy,
                key=key, streamed=True, **extra).as_dict()  # fmt: skip


def pair(index: int, key: str, *scores: tuple[str, float], missing: bool = False) -> dict:
    if missing:
        return Pair(call_index=index, key=key, golden_file="golden/support.json",
                    reference_text=None, missing=True).as_dict()  # fmt: skip
    text, ttft, e2e, pt, ct, cost = GOLDEN[key]
    return Pair(
        call_index=index, key=key, golden_file="golden/support.json", reference_text=text,
        reference_model="gpt-4-0613", reference_prompt_tokens=pt, reference_completion_tokens=ct,
        reference_e2e_ms=e2e, reference_ttft_ms=ttft, reference_cost_usd=cost,
        scores=[Score(name, value, threshold=0.6).as_dict() for name, value in scores],
    ).as_dict()  # fmt: skip


def outcome(model: str, test: str, result: str, calls: list, pairs: list, **extra: Any) -> dict:
    return Outcome(nodeid=f"tests/test_support.py::{test}[{model}]",
                   test=f"tests/test_support.py::{test}", model=model, outcome=result,
                   duration_s=0.5, calls=calls, pairs=pairs, **extra).as_dict()  # fmt: skip


def smol_outcomes() -> list[dict[str, Any]]:
    m = SMOL
    return [
        outcome(m, "test_triage", "passed",
                [call(m, "Priority: high. Billing.", 40, 210, 52, 9, 0.000012, key="k_triage",
                      cold_start=True)],
                [pair(0, "k_triage", ("embedding", 0.92), ("judge", 0.88))]),
        outcome(m, "test_summarize", "failed",
                [call(m, "Customer charged twice.", 50, 640, 410, 96, 0.000036, key="k_summ1"),
                 call(m, "Refund maybe later.", 45, 580, 385, 88, 0.000032, key="k_summ2")],
                [pair(0, "k_summ1", ("embedding", 0.61), ("judge", 0.35)),
                 pair(1, "k_summ2", ("embedding", 0.70), ("judge", 0.50))],
                message="AssertionError: summary misses the refund amount"),
        outcome(m, "test_extract", "error",
                [call(m, "", None, None, None, None, None, key="k_extract",
                      error="APIConnectionError: connection refused (127.0.0.1:8081)")],
                [], message="openai.APIConnectionError: Connection error."),
        outcome(m, "test_reply", "failed",
                [call(m, "Hello, refund done.", 60, 900, 151, 180, 0.00005, key="k_reply_smol",
                      tokens_estimated=True),
                 Call(model="local-embedder", role="passthrough", request={}, e2e_ms=5.0,
                      cost_usd=1.0).as_dict()],
                [pair(0, "k_reply_smol", missing=True)],
                message="golden answer missing; record it with: pytest --slm-record=missing"),
    ]  # fmt: skip


def qwen_outcomes() -> list[dict[str, Any]]:
    m = QWEN
    return [
        outcome(m, "test_triage", "passed",
                [call(m, "Priority: high. Route to billing.", 30, 150, 50, 12, 0.00002,
                      key="k_triage", energy=30.0)],
                [pair(0, "k_triage", ("embedding", 0.95), ("judge", 0.90))], energy_j=31.0),
        outcome(m, "test_summarize", "passed",
                [call(m, "The customer was charged twice for order 1182; refund of $42 asked.",
                      35, 400, 400, 110, 0.00005, key="k_summ1", energy=80.0),
                 call(m, "Refund approved, reversed within 3 days.", 33, 380, 380, 95, 0.00004,
                      key="k_summ2", energy=70.0)],
                [pair(0, "k_summ1", ("embedding", 0.90), ("judge", 0.80)),
                 pair(1, "k_summ2", ("embedding", 0.88), ("judge", 0.84))]),
        outcome(m, "test_extract", "passed",
                [call(m, '{"order": 1182, "amount": 42.0, "currency": "USD"}', 32, 300, 200, 58,
                      0.00003, key="k_extract", energy=50.0)],
                [pair(0, "k_extract", ("embedding", 0.97), ("judge", 1.0))]),
        outcome(m, "test_reply", "passed",
                [call(m, "Hi Dana,\nWe refunded the $42 double charge; 3 days.", 40, 700, 150, 190,
                      0.00006, key="k_reply", energy=120.0)],
                [pair(0, "k_reply", ("embedding", 0.80), ("judge", 0.70))]),
    ]  # fmt: skip


def mini_outcomes() -> list[dict[str, Any]]:
    m = MINI
    return [
        outcome(m, "test_triage", "passed",
                [call(m, "Priority: high. Route to billing.", 250, 600, 50, 11, 0.0000141,
                      key="k_triage")],
                [pair(0, "k_triage", ("embedding", 0.97), ("judge", 0.95))]),
        outcome(m, "test_summarize", "passed",
                [call(m, "Charged twice for order 1182; wants a $42 refund.", 300, 1800, 400,
                      115, 0.000129, key="k_summ1"),
                 call(m, "Refund approved; reversal takes 3 days.", 280, 1600, 380, 98,
                      0.0001158, key="k_summ2")],
                [pair(0, "k_summ1", ("embedding", 0.93), ("judge", 0.90)),
                 pair(1, "k_summ2", ("embedding", 0.91), ("judge", 0.92))]),
        outcome(m, "test_extract", "skipped", [], [], message="needs tool calls"),
        outcome(m, "test_reply", "passed",
                [call(m, f"Hi Dana,\nSorry! We refunded $42. {XSS}", 320, 2500, 150, 205,
                      0.0001455, key="k_reply")],
                [pair(0, "k_reply", ("embedding", 0.90), ("judge", 0.86))]),
    ]  # fmt: skip


def outcomes() -> list[dict[str, Any]]:
    """All twelve outcomes, in the order a serial run would produce them."""
    return smol_outcomes() + qwen_outcomes() + mini_outcomes()


def run_info(models: tuple[str, ...] = MODELS) -> RunInfo:
    specs = {
        SMOL: ModelSpec(SMOL, "llamacpp", "SmolLM2-135M-Instruct-Q8_0.gguf", hourly_usd=0.2),
        QWEN: ModelSpec(QWEN, "vllm", "Qwen/Qwen2.5-1.5B-Instruct", hourly_usd=1.2),
        MINI: ModelSpec(MINI, "openai", "gpt-4o-mini", input_usd_per_mtok=0.15,
                        output_usd_per_mtok=0.6),
    }  # fmt: skip
    return RunInfo(
        models=[specs.get(m, ModelSpec(m, "vllm", m)) for m in models],
        reference=REFERENCE,
        settings={"record": "none", "repeat": 1, "scorers": ["embedding", "judge"]},
        started="2025-11-29T17:00:00+00:00",
        finished="2025-11-29T17:03:12+00:00",
        pytest_version="9.0.0",
        plugin_version="0.1.0",
        cost_assumption="self-hosted: engine hourly price x busy seconds; API: price table 2025-11",
        gpu_telemetry="GPU telemetry: NVML available for vLLM only",
    )


def expanded(document: Any) -> Any:
    """A report document with each outcome and per-test row as ``as_dict`` gives it, and its
    visits' ``selected``: the file leaves out each field at its default (``report/packed.py``),
    and ``selected`` when it is ``collected``, which a reader fills back in."""
    for key, kind in (("outcomes", Outcome), ("tests", PerTestRow)):
        found = document.get(key) if isinstance(document, dict) else None
        if isinstance(found, list):
            document[key] = [
                kind.from_dict(o).as_dict() if isinstance(o, dict) else o for o in found
            ]
    visits = document.get("visits") if isinstance(document, dict) else None
    if isinstance(visits, dict) and "selected" not in visits:
        document["visits"] = {**visits, "selected": Visits.from_dict(visits).selected}
    return document


def read_report(path: str | os.PathLike[str]) -> Any:
    """A JSON file as ``json.loads`` reads it; a report's outcomes ``expanded``."""
    return expanded(json.loads(Path(path).read_text(encoding="utf-8")))
