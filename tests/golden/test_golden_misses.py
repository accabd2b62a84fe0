"""Missed-request notes (golden/misses.py): listed once a run, a note written since still seen."""

from __future__ import annotations

from pathlib import Path

from pytest_slam.golden import misses
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE, TEST = "tests/test_a.py", "tests/test_a.py::test_a"


def _body(text: str) -> dict[str, object]:
    return {"model": "gpt-4", "messages": [{"role": "user", "content": text}]}


def _store(root: Path) -> tuple[GoldenStore, GoldenRecord]:
    store = GoldenStore(root / "__slam__", "gpt-4", write_through=True)
    rec = GoldenRecord(key=request_key(_body("q1")), request=_body("q1"),
                       answers=[GoldenAnswer("a1")], tests=[TEST], turns={TEST: [1]})  # fmt: skip
    store.record(MODULE, rec, TEST)
    return store, rec


def test_a_note_is_seen_by_its_run_and_by_the_next(tmp_path: Path) -> None:
    store, rec = _store(tmp_path)
    assert not misses.noted(store, MODULE, TEST, rec)  # no folder yet: listed empty
    misses.note(store, MODULE, TEST, 1, _body("q1 at 09:05"))  # another request at its place
    assert misses.noted(store, MODULE, TEST, rec)  # the run that wrote it
    again = GoldenStore(tmp_path / "__slam__", "gpt-4")
    assert misses.noted(again, MODULE, TEST, again.lookup(MODULE, rec.key))  # type: ignore[arg-type]
    changed = GoldenRecord(key=rec.key, request=rec.request, answers=[GoldenAnswer("a2")],
                           tests=[TEST], turns={TEST: [1]})  # fmt: skip
    assert not misses.noted(again, MODULE, TEST, changed)  # recorded anew: fetched again


def test_a_conversation_turn_is_never_noted(tmp_path: Path) -> None:
    store, rec = _store(tmp_path)
    turn = {"model": "gpt-4", "messages": [{"role": "user", "content": "q1"},
                                           {"role": "assistant", "content": "a0"}]}  # fmt: skip
    misses.note(store, MODULE, TEST, 1, turn)
    assert not misses.noted(store, MODULE, TEST, rec)
    assert not (tmp_path / ".slam" / misses.FOLDER).exists()
