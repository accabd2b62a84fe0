"""Importing logged reference answers, including the real GPT-4 answers in ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from slam_helpers import SHARED_DATA

from pytest_slam.golden.importers import GoldenImportError, import_jsonl
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore

DATA = SHARED_DATA
MODULE = "tests/test_imported.py"
# FastChat's per-category sampling temperatures (mt_bench README), so keys match real requests.
MT_BENCH_TEMPERATURE = {"writing": 0.7, "roleplay": 0.7, "stem": 0.1, "humanities": 0.1}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


def completion(*texts: str, model: str = "gpt-4-0613") -> dict:
    choices = [
        {"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
        for i, t in enumerate(texts)
    ]
    usage = {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1714564800,
        "model": model,
        "choices": choices,
        "usage": usage,
        "system_fingerprint": "fp_9",
    }


def body(prompt: str, **params) -> dict:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}], **params}


def store_at(tmp_path: Path) -> GoldenStore:
    return GoldenStore(tmp_path / "golden", "openai:gpt-4")


def test_logged_openai_traffic_and_batch_style_lines(tmp_path):
    rows = [
        {"request": body("one", stream=True), "response": completion("first"), "e2e_ms": 812.0},
        {
            "custom_id": "r2",
            "body": body("two"),
            "response": {"status_code": 200, "body": completion("second")},
        },
        {
            "request": {
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": body("three", n=2),
            },
            "response": {"status_code": 200, "body": completion("a", "b")},
        },
        {"request": body("four"), "response": {"status_code": 429, "body": {"error": {}}}},
        {"request": body("one"), "response": completion("duplicate, not imported")},
    ]
    store = store_at(tmp_path)
    result = import_jsonl(write_jsonl(tmp_path / "log.jsonl", rows), store, MODULE)
    assert (result.imported, result.duplicates, result.failed) == (3, 1, 1)
    assert result.written == [store.path_for(MODULE)]
    fresh = store_at(tmp_path)
    first = fresh.lookup(MODULE, request_key(body("one")))
    assert first.answer.text == "first" and first.answer.e2e_ms == 812.0
    assert first.answer.recorded_at == "2024-05-01T12:00:00Z" and first.answer.model == "gpt-4-0613"
    assert first.answer.completion_tokens == 4 and first.answer.system_fingerprint == "fp_9"
    assert fresh.lookup(MODULE, request_key(body("two"))).answer.text == "second"
    three = fresh.lookup(MODULE, request_key(body("three", n=2)))
    assert [a.text for a in three.answers] == ["a", "b"] and three.answer.completion_tokens is None
    assert fresh.lookup(MODULE, request_key(body("four"))) is None


def test_simple_lines_with_system_and_params(tmp_path):
    rows = [
        {
            "prompt": "Hi",
            "answer": "Hello!",
            "model": "gpt-4",
            "system": "Be brief.",
            "params": {"temperature": 0},
            "recorded_at": "2023-06-01T00:00:00Z",
        }
    ]
    store = store_at(tmp_path)
    assert import_jsonl(write_jsonl(tmp_path / "s.jsonl", rows), store, MODULE).imported == 1
    request = {
        "model": "gpt-4",
        "temperature": 0.0,
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    }
    assert store_at(tmp_path).lookup(MODULE, request_key(request)).answer.text == "Hello!"


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("{not json", "Expecting property name"),
        ('["a list"]', "not a JSON object"),
        ('{"prompt": "p", "answer": "a"}', "'model' must be a string"),
        ('{"something": "else"}', "unknown line format"),
        ('{"request": "text", "response": {}}', "must be objects"),
    ],
)
def test_a_bad_line_names_file_and_line(tmp_path, line, problem):
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"prompt": "p", "answer": "a", "model": "gpt-4"})
    path.write_text(f"{good}\n\n{line}\n")
    with pytest.raises(GoldenImportError, match=problem) as info:
        import_jsonl(path, store_at(tmp_path), MODULE)
    assert str(info.value).startswith(f"{path}:3: ")
    assert not store_at(tmp_path).path_for(MODULE).exists()  # nothing half-imported


def read_records(folder: str) -> list[dict]:
    path = DATA / folder / "records.jsonl"
    if not path.exists():
        pytest.skip(f"needs the shared GPT-4 data at {path} (read in place, never copied)")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_import_real_alpaca_eval_gpt4_answers(tmp_path):
    records = read_records("alpaca_eval_gpt4_vs_slm")
    rows = [
        {
            "prompt": r["instruction"],
            "answer": r["gpt4_output"],
            "model": "gpt-4",
            "response_model": "gpt-4",
        }
        for r in records
    ]
    store = store_at(tmp_path)
    result = import_jsonl(write_jsonl(tmp_path / "alpaca.jsonl", rows), store, MODULE, "simple")
    assert (result.imported, result.duplicates) == (250, 0)
    fresh = store_at(tmp_path)
    for r in records:
        found = fresh.lookup(MODULE, request_key(body(r["instruction"], stream=True)))
        assert found is not None and found.answer.text == r["gpt4_output"]
    again = import_jsonl(write_jsonl(tmp_path / "alpaca.jsonl", rows), fresh, MODULE)
    assert (again.imported, again.duplicates, again.written) == (0, 250, [])


def mt_bench_rows(record: dict) -> list[dict]:
    """A two-turn conversation as two logged requests: turn 2 carries GPT-4's own turn 1."""
    (q1, q2), (a1, a2) = record["turns"], record["gpt4_answer_turns"]
    temperature = MT_BENCH_TEMPERATURE.get(record["category"], 0.0)
    first = [{"role": "user", "content": q1}]
    second = [*first, {"role": "assistant", "content": a1}, {"role": "user", "content": q2}]
    return [
        {
            "request": {"model": "gpt-4", "messages": msgs, "temperature": temperature},
            "response": completion(answer, model="gpt-4"),
        }
        for msgs, answer in ((first, a1), (second, a2))
    ]


def test_import_real_mt_bench_two_turn_gpt4_answers(tmp_path):
    records = read_records("mt_bench_gpt4_vs_slm")
    rows = [row for r in records for row in mt_bench_rows(r)]
    store = store_at(tmp_path)
    result = import_jsonl(write_jsonl(tmp_path / "mt.jsonl", rows), store, MODULE, "openai")
    assert (result.imported, result.duplicates, result.failed) == (160, 0, 0)
    fresh = store_at(tmp_path)
    for row in rows:
        asked = {**row["request"], "stream": True, "stream_options": {"include_usage": True}}
        found = fresh.lookup(MODULE, request_key(asked))
        assert found.answer.text == row["response"]["choices"][0]["message"]["content"]
    sample = records[0]
    turn2 = mt_bench_rows(sample)[1]["request"]
    assert fresh.lookup(MODULE, request_key(turn2)).answer.text == sample["gpt4_answer_turns"][1]
