"""Golden records and stores for the golden tests: one request, one GPT-4 answer, a tmp store."""

from __future__ import annotations

from pathlib import Path

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE = "examples/tests/test_triage.py"
OTHER = "examples/tests/test_summary.py"


def rec(prompt: str, text: str = "ok", **params) -> GoldenRecord:
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}], **params}
    answer = GoldenAnswer(
        text=text,
        model="gpt-4-0613",
        recorded_at="2024-05-01T12:00:00Z",
        prompt_tokens=12,
        completion_tokens=3,
        ttft_ms=410.5,
        e2e_ms=980.0,
        system_fingerprint="fp_1",
    )
    return GoldenRecord(key=request_key(request), request=request, answers=[answer])


def store_at(tmp_path: Path, reference: str = "openai:gpt-4") -> GoldenStore:
    return GoldenStore(tmp_path / "fixtures" / "slam", reference)


def write_module(tmp_path: Path, module: str, *records: GoldenRecord) -> Path:
    store = store_at(tmp_path)
    for r in records:
        store.record(module, r, "t::a")
    [path] = store.flush()
    return path
