"""run/fetching.py: which golden requests a test will send, read from its entries (no socket)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from golden_helpers import rec, store_at, write_module

from pytest_slam.run.fetching import independent, places

MODULE = "tests/test_x.py"


def test_a_later_request_is_independent_only_without_earlier_answers_in_it() -> None:
    plain = {"messages": [{"role": "user", "content": "summarize: the earlier answer text"}]}
    assert independent(plain, [])
    assert not independent(plain, ["the earlier answer text"])  # it carries an earlier answer
    assert independent(plain, ["short"])  # too short to tell: not taken as carried
    with_answer = {
        "messages": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "y"}]
    }
    assert not independent(with_answer, [])
    assert not independent({"input": "no messages"}, [])


def test_places_are_each_tests_entries_by_call_number_the_latest_first(tmp_path: Path) -> None:
    first = dataclasses.replace(rec("one"), turns={"tests/test_x.py::test_a": [1]})
    second = dataclasses.replace(rec("two"), turns={"tests/test_x.py::test_a": [2]})
    older = rec("one, as first asked")
    older = dataclasses.replace(
        older,
        turns={"tests/test_x.py::test_a": [1]},
        answers=[dataclasses.replace(older.answers[0], recorded_at="2023-01-01T00:00:00Z")],
    )
    untold = dataclasses.replace(rec("three"), tests=["tests/test_x.py::test_b"])  # no turns kept
    write_module(tmp_path, MODULE, first, second, older, untold)
    found = places(store_at(tmp_path), MODULE)
    assert {t: r.key for t, r in found["tests/test_x.py::test_a"].items()} == {
        1: first.key,
        2: second.key,
    }
    assert found["tests/test_x.py::test_b"][1].key == untold.key  # taken as a first call


def test_an_unreadable_golden_file_plans_nothing(tmp_path: Path) -> None:
    folder = store_at(tmp_path)
    path = folder.path_for(MODULE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ not json", encoding="utf-8")
    assert places(folder, MODULE) == {}
