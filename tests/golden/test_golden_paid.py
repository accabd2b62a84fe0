"""Reference answers paid for and not yet recorded (golden/paid.py), unit by unit: kept scrubbed,
taken once a run for the very same request, spent once recorded. The killed refresh that they
serve is in tests/plugin/test_plugin_paid.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_slam.golden.paid import Paid
from pytest_slam.records import Call, ModelSpec

SPEC = ModelSpec("gpt-4", "openai", "gpt-4", base_urls=["http://127.0.0.1:9/v1"])


def _body(question: str, temperature: float = 0) -> dict[str, object]:
    return {"model": "gpt-4", "temperature": temperature,
            "messages": [{"role": "user", "content": question}]}  # fmt: skip


def test_a_kept_answer_is_scrubbed_taken_once_for_the_same_request_and_spent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_API_KEY", "acme-Paid-k3y-9001")
    root = tmp_path / "__slam__"
    Paid(root, SPEC).keep(_body("q"), Call("gpt-4", "reference", {}, text="acme-Paid-k3y-9001"))
    files = list((tmp_path / ".slam" / "paid").glob("*.json"))
    assert len(files) == 1 and b"acme-Paid-k3y-9001" not in files[0].read_bytes()

    later = Paid(root, SPEC)  # the next refresh
    assert later.take(_body("other")) is None  # another request
    assert later.take(_body("q", temperature=0.5)) is None  # another body, the same question
    taken = later.take(_body("q", temperature=0.0))  # 0.0 and 0: the same request
    assert taken is not None and taken.text == "[redacted]"
    assert later.take(_body("q")) is None and later.used == 1  # one answer, taken once
    later.spend(_body("q"))
    assert list((tmp_path / ".slam" / "paid").glob("*.json")) == []


def test_a_damaged_or_expired_answer_is_no_answer_and_is_removed(tmp_path: Path) -> None:
    root = tmp_path / "__slam__"
    Paid(root, SPEC).keep(_body("old"), Call("gpt-4", "reference", {}, text="old"))
    Paid(root, SPEC).keep(_body("cut"), Call("gpt-4", "reference", {}, text="cut"))
    folder = tmp_path / ".slam" / "paid"
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if data["call"]["text"] == "old":
            path.write_text(json.dumps({**data, "kept_at": 0}), encoding="utf-8")
        else:
            path.write_text(path.read_text(encoding="utf-8")[:20], encoding="utf-8")
    later = Paid(root, SPEC)
    assert later.take(_body("old")) is None and later.take(_body("cut")) is None
    assert list(folder.glob("*.json")) == []
