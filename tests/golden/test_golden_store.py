"""The golden store: layout, round trip, byte-identical files, broken files, stale and prune."""

from __future__ import annotations

import json
import re

import pytest
from golden_helpers import MODULE, OTHER, rec, store_at, write_module

from pytest_slam.golden.fileformat import SCHEMA, GoldenFileError, GoldenReferenceMismatch
from pytest_slam.records import GoldenAnswer


def test_files_are_grouped_by_reference_and_module(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("a"), "examples/tests/test_triage.py::test_a")
    [path] = store.flush()
    assert path == tmp_path / "fixtures/slam/openai-gpt-4/examples/tests/test_triage.json"
    assert store.modules() == [MODULE]


def test_round_trip_keeps_every_field(tmp_path):
    store = store_at(tmp_path)
    first = rec("Classify: refund ✓", "billing\n", temperature=0, stream=True)
    first.answers.append(GoldenAnswer(text="billing (second sample)", model="gpt-4-0613"))
    store.record(MODULE, first, "t::a")
    store.flush()
    loaded = store_at(tmp_path).lookup(MODULE, first.key)
    assert loaded is not None
    assert loaded.request == {
        "model": "gpt-4",
        "messages": [{"role": "user", "content": "Classify: refund ✓"}],
        "temperature": 0.0,
    }
    assert [a.as_dict() for a in loaded.answers] == [a.as_dict() for a in first.answers]
    assert loaded.tests == ["t::a"]


def test_file_reads_well_in_a_pull_request(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("b", "naïve — answer"), "t::b")
    store.record(MODULE, rec("a"), "t::a")
    [path] = store.flush()
    text = path.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["schema"] == SCHEMA and doc["reference"] == "openai:gpt-4"
    assert list(doc["entries"]) == sorted(doc["entries"])
    assert "naïve — answer" in text and text.endswith("}\n") and '\n  "entries": {' in text
    assert all("key" not in entry for entry in doc["entries"].values())
    assert text.startswith('{\n  "schema": "pytest-slam/golden/1",\n  "reference": "openai:gpt-4",')
    assert "null" not in text  # unset answer fields are left out, from_dict restores them


def test_same_answers_give_byte_identical_files_in_any_order(tmp_path):
    records = [rec(f"prompt {i}", f"answer {i}") for i in range(5)]
    one, two = store_at(tmp_path / "one"), store_at(tmp_path / "two")
    for r in records:
        one.record(MODULE, r, "t::x")
    for r in reversed(records):
        two.record(MODULE, r, "t::x")
    [p1], [p2] = one.flush(), two.flush()
    assert p1.read_bytes() == p2.read_bytes()
    again = store_at(tmp_path / "one")
    again.record(MODULE, records[0], "t::x")
    assert again.flush() == []  # nothing changed, nothing written
    assert p1.read_bytes() == p2.read_bytes()


def test_replay_never_writes(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("a"), "t::a")
    [path] = store.flush()
    before = path.read_bytes()
    replay = store_at(tmp_path)
    key = rec("a").key
    assert replay.lookup(MODULE, key).answer.text == "ok"
    replay.mark_used(MODULE, key, "t::another")
    assert replay.flush() == [] and path.read_bytes() == before
    assert replay.visited == {MODULE: {key}}


def test_used_by_tests_are_saved_when_the_file_is_written_anyway(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("a"), "t::a")
    store.flush()
    store.mark_used(MODULE, rec("a").key, "t::shared")
    store.record(MODULE, rec("b"), "t::b")
    store.flush()
    assert store_at(tmp_path).lookup(MODULE, rec("a").key).tests == ["t::a", "t::shared"]


def test_locks_live_outside_the_goldens_and_are_ignored_by_git(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("a"), "t::a")
    store.flush()
    golden_files = sorted(p.name for p in (tmp_path / "fixtures/slam").rglob("*") if p.is_file())
    assert golden_files == ["test_triage.json"]
    assert (tmp_path / "fixtures/.slam/.gitignore").read_text().splitlines()[-1] == "*"
    assert list((tmp_path / "fixtures/.slam/locks").rglob("*.lock"))


def test_record_checks_the_key_and_the_module(tmp_path):
    store = store_at(tmp_path)
    wrong = rec("a")
    wrong.key = "0" * 16
    with pytest.raises(ValueError, match="is not the request's key"):
        store.record(MODULE, wrong, "t::a")
    with pytest.raises(ValueError, match="relative to the rootdir"):
        store.record("../elsewhere/test_x.py", rec("a"), "t::a")


def test_truncated_file_names_file_and_line_and_others_still_load(tmp_path):
    path = write_module(tmp_path, MODULE, rec("a"), rec("b"))
    write_module(tmp_path, OTHER, rec("c"))
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[: len(lines) // 2]))
    store = store_at(tmp_path)
    with pytest.raises(GoldenFileError) as info:
        store.lookup(MODULE, rec("a").key)
    message = str(info.value)
    assert f"{path}:{len(lines) // 2 + 1}:" in message
    assert "truncated" in message and "slam golden refresh" in message
    assert store.lookup(OTHER, rec("c").key).answer.text == "ok"
    with pytest.raises(GoldenFileError):  # still broken on the next test of that module
        store.load(MODULE)


def test_merge_conflict_markers_name_the_line_and_say_resolve(tmp_path):
    path = write_module(tmp_path, MODULE, rec("a"))
    lines = path.read_text().splitlines(keepends=True)
    conflicted = [*lines[:4], "<<<<<<< HEAD\n", *lines[4:6], "=======\n", ">>>>>>> branch\n"]
    path.write_text("".join(conflicted + lines[6:]))
    with pytest.raises(
        GoldenFileError, match=rf"{re.escape(str(path))}:5: unresolved git merge conflict"
    ) as info:
        store_at(tmp_path).load(MODULE)
    assert "resolve the conflict" in str(info.value) and info.value.line == 5


def test_bad_entry_names_the_line_of_its_key(tmp_path):
    path = write_module(tmp_path, MODULE, rec("a"))
    doc = json.loads(path.read_text())
    doc["entries"]["badbadbadbadbad0"] = {"request": {}, "answers": "not a list"}
    path.write_text(json.dumps(doc, indent=2, sort_keys=True))
    line = path.read_text().splitlines().index('    "badbadbadbadbad0": {') + 1
    with pytest.raises(
        GoldenFileError, match=rf"{re.escape(str(path))}:{line}: entry 'badbadbadbadbad0'"
    ):
        store_at(tmp_path).load(MODULE)


def test_flush_never_overwrites_a_broken_file(tmp_path):
    path = write_module(tmp_path, MODULE, rec("a"))
    path.write_text("{ truncated")
    store = store_at(tmp_path)
    store.record(MODULE, rec("b"), "t::b")
    store.record(OTHER, rec("c"), "t::c")
    with pytest.raises(GoldenFileError, match="not valid JSON"):
        store.flush()
    assert path.read_text() == "{ truncated"
    assert store_at(tmp_path).lookup(OTHER, rec("c").key) is not None


def test_file_of_another_reference_names_both(tmp_path):
    other = store_at(tmp_path, "OpenAI/GPT-4")  # same folder name, another reference id
    other.record(MODULE, rec("a"), "t::a")
    other.flush()
    with pytest.raises(GoldenReferenceMismatch) as info:
        store_at(tmp_path, "openai:gpt-4").load(MODULE)
    assert "'OpenAI/GPT-4'" in str(info.value) and "'openai:gpt-4'" in str(info.value)
    assert info.value.found == "OpenAI/GPT-4" and info.value.expected == "openai:gpt-4"


def test_stale_finds_exactly_the_unvisited_entry_and_prune_removes_it(tmp_path):
    a, b, c = rec("a"), rec("b"), rec("c")
    store = store_at(tmp_path)
    store.record(MODULE, a, "t::visits")
    store.record(MODULE, b, "t::crashed")
    store.record(MODULE, c, "t::gone")
    store.record(OTHER, rec("d"), "t::not-run")
    store.flush()
    run = store_at(tmp_path)
    visited = {MODULE: {a.key}}
    stale = run.stale(visited, covered_modules={MODULE}, failed_tests={"t::crashed"})
    assert stale == [(MODULE, c.key)]
    assert run.prune(stale) == 1
    left = store_at(tmp_path)
    assert set(left.load(MODULE).entries) == {a.key, b.key}
    assert left.lookup(OTHER, rec("d").key) is not None
    assert run.stale(visited, {MODULE}, set()) == [(MODULE, b.key)]


def test_pruning_the_last_entry_removes_the_file(tmp_path):
    path = write_module(tmp_path, MODULE, rec("a"))
    assert store_at(tmp_path).prune([(MODULE, rec("a").key)]) == 1
    assert not path.exists()
