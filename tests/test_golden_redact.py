"""No API key or auth header ever reaches a committed golden file."""

from __future__ import annotations

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.redact import REDACTED, scrub
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345"


def test_key_shapes_and_secret_env_values_are_redacted(monkeypatch):
    monkeypatch.setenv("ACME_API_KEY", "acme-4f9a8b7c")
    monkeypatch.setenv("HF_TOKEN", "hf_abcdefghijk123")
    monkeypatch.setenv("SHORT_TOKEN", "x")
    data = {
        "a": OPENAI_KEY,
        "b": ["Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOjF9.sig", "acme-4f9a8b7c"],
        "c": {"nested": f"use key {OPENAI_KEY} and hf_abcdefghijk123 here"},
        "api_key": "anything",
        "n": 3,
    }
    assert scrub(data) == {
        "a": REDACTED,
        "b": [REDACTED, REDACTED],
        "c": {"nested": f"use key {REDACTED} and {REDACTED} here"},
        "api_key": REDACTED,
        "n": 3,
    }


def test_ordinary_text_is_left_alone(monkeypatch):
    monkeypatch.setenv("SHORT_TOKEN", "x")
    text = (
        "Banks compare their capital to risk-weighted assets; the Bearer of bad news; "
        "scikit-learn is also called sk-learn-compatible-estimators-library; x marks it."
    )
    assert scrub({"t": text}) == {"t": text}


def test_a_written_golden_file_holds_no_secret(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.setenv("INTERNAL_SECRET", "s3cr3t-value")
    request = {
        "model": "gpt-4",
        "messages": [{"role": "user", "content": "config: s3cr3t-value"}],
        "extra_headers": {"Authorization": f"Bearer {OPENAI_KEY}"},
        "api_key": OPENAI_KEY,
    }
    answer = GoldenAnswer(text=f"Your key {OPENAI_KEY} is set.", model="gpt-4-0613")
    store = GoldenStore(tmp_path / "golden", "openai:gpt-4")
    store.record("tests/test_cfg.py", GoldenRecord(request_key(request), request, [answer]), "t")
    [path] = store.flush()
    text = path.read_text()
    assert OPENAI_KEY not in text and "s3cr3t-value" not in text and "Authorization" not in text
    assert "Your key [redacted] is set." in text and '"content": "config: [redacted]"' in text
