"""The opt-in answer cache (swap/cache.py), unit by unit: what makes two models one, and two
requests one entry. The plugin runs (tests/plugin/test_plugin_ahead.py) show a run reusing it."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.cache import AnswerCache, identity
from pytest_slam.swap.chat import ChatResult


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
    cache, sent = AnswerCache(tmp_path / ".slam" / "cache"), {"model": "gpt-4o-mini", "seed": 7}
    kept = Call("mini", "candidate", {}, text="Paris.")
    cache.put(_endpoint("mini"), sent, ChatResult(kept))
    result = cache.get(_endpoint("mini-again"), sent)
    assert result is not None and result.call.text == "Paris."
    assert result.call.model == "mini-again"


def test_numbers_are_one_entry_when_equal_and_two_when_they_differ(tmp_path: Path) -> None:
    cache, spec = AnswerCache(tmp_path / ".slam" / "cache"), _endpoint("mini")
    kept = ChatResult(Call("mini", "candidate", {}, text="Paris."))
    cache.put(spec, {"temperature": 0.0, "seed": 2**53}, kept)
    assert cache.has(spec, {"temperature": 0, "seed": 2**53})  # 0 == 0.0: the same request
    assert cache.has(spec, {"temperature": 0, "seed": float(2**53)})
    assert not cache.has(spec, {"temperature": 0, "seed": 2**53 + 1})  # another seed
    assert not cache.has(spec, {"temperature": 0.5, "seed": 2**53})
