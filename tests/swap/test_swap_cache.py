"""The opt-in answer cache (swap/cache.py), unit by unit: what makes two models one, and two
requests one entry. The plugin runs (tests/plugin/test_plugin_ahead.py, test_plugin_cache.py)
show a run reusing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_slam.golden.redact import scrub
from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.cache import AnswerCache, deterministic, identity
from pytest_slam.swap.chat import ChatResult
from pytest_slam.swap.request import CANDIDATE_SEED


def _engine(model_path: str, **args: object) -> ModelSpec:
    return ModelSpec("local", "llamacpp", "m", engine_args={"model_path": model_path, **args})  # type: ignore[dict-item]


def test_a_model_file_s_engine_arguments_are_part_of_its_identity(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    assert identity(_engine(str(model), ctx=2048)) != identity(_engine(str(model), ctx=4096))
    assert identity(_engine(str(model), ctx=2048)) == identity(_engine(str(model), ctx=2048))


def test_a_model_file_named_from_home_is_hashed_as_the_engine_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    model = tmp_path / "m.gguf"
    model.write_bytes(b"weights")
    before = identity(_engine("~/m.gguf"))
    model.write_bytes(b"other weights")  # a new file under the same name: another model
    assert identity(_engine("~/m.gguf")) != before


def _endpoint(name: str) -> ModelSpec:
    return ModelSpec(name, "openai", "gpt-4o-mini", base_urls=["http://127.0.0.1:9/v1"])


def test_an_answer_kept_by_one_name_is_served_under_the_name_that_asks(tmp_path: Path) -> None:
    """Two names for one model (same id, same URLs) share what is kept; the call is the asker's."""
    sent: dict[str, object] = {"model": "gpt-4o-mini", "seed": 7}
    kept = Call("mini", "candidate", {}, text="Paris.")
    AnswerCache(tmp_path / ".slam" / "cache", scrub).put(_endpoint("mini"), sent, ChatResult(kept))
    result = AnswerCache(tmp_path / ".slam" / "cache", scrub).get(_endpoint("mini-again"), sent)
    assert result is not None and result.call.text == "Paris."
    assert result.call.model == "mini-again"


def test_numbers_are_one_entry_when_equal_and_two_when_they_differ(tmp_path: Path) -> None:
    spec = _endpoint("mini")
    kept = ChatResult(Call("mini", "candidate", {}, text="Paris."))
    AnswerCache(tmp_path / ".slam" / "cache", scrub).put(
        spec, {"temperature": 0.0, "seed": 2**53}, kept
    )
    cache = AnswerCache(tmp_path / ".slam" / "cache", scrub)  # the next run
    assert cache.has(spec, {"temperature": 0, "seed": 2**53})  # 0 == 0.0: the same request
    assert cache.has(spec, {"temperature": 0, "seed": float(2**53)})
    assert not cache.has(spec, {"temperature": 0, "seed": 2**53 + 1})  # another seed
    assert not cache.has(spec, {"temperature": 0.5, "seed": 2**53})


def test_only_a_request_with_temperature_0_or_the_product_s_own_seed_is_deterministic() -> None:
    assert deterministic({"temperature": 0}) and deterministic({"temperature": 0.0})
    assert deterministic({"temperature": 0.7, "seed": 42})  # the product's seed
    assert not deterministic({"temperature": 0.7})
    assert not deterministic({})  # the API's default temperature is 1
    assert not deterministic({"temperature": 0.7, "seed": CANDIDATE_SEED})  # the swap's pin
    assert not deterministic({"temperature": False})


def test_an_answer_is_served_to_a_later_run_only_and_kept_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_API_KEY", "acme-9f8e7d6c5b")
    folder, spec, sent = tmp_path / ".slam" / "cache", _endpoint("mini"), {"temperature": 0}
    this_run = AnswerCache(folder, scrub, run="run-1")
    this_run.put(spec, sent, ChatResult(Call("mini", "candidate", {}, text="key acme-9f8e7d6c5b")))
    assert this_run.kept == 1 and this_run.get(spec, sent) is None  # its own: never served to it
    assert AnswerCache(folder, scrub, run="run-1").get(spec, sent) is None  # another worker of it
    later = AnswerCache(folder, scrub, run="run-2").get(spec, sent)
    assert later is not None and later.call.text == "key [redacted]"
    assert not any(b"acme-9f8e7d6c5b" in p.read_bytes() for p in folder.rglob("*.json"))
