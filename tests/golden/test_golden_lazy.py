"""Lazy golden files: an entry is parsed only when read, with exactly what a full parse gives, and
anything outside the canonical layout (or broken) falls back to the full parse and its messages."""

from __future__ import annotations

import json
import re

import pytest
from golden_helpers import MODULE, rec, store_at, write_module

from pytest_slam.golden.fileformat import (
    GoldenFile,
    GoldenFileError,
    GoldenReferenceMismatch,
    dump_golden,
    read_golden,
)
from pytest_slam.golden.lazy import LazyEntries, index_golden
from pytest_slam.records import GoldenAnswer, GoldenRecord


def records(n: int) -> list[GoldenRecord]:
    return [rec(f"prompt {i}", f"answer {i}", temperature=0) for i in range(n)]


def test_a_lookup_parses_only_its_entry_and_gives_what_a_full_parse_gives(tmp_path):
    recs = records(20)
    path = write_module(tmp_path, MODULE, *recs)
    store = store_at(tmp_path)
    assert store.lookup(MODULE, recs[7].key).answer.text == "answer 7"
    entries = store.load(MODULE).entries
    assert isinstance(entries, LazyEntries) and entries.parsed == 1
    assert len(entries) == 20 and recs[3].key in entries and "nope" not in entries
    assert store.lookup(MODULE, "0" * 16) is None and entries.parsed == 1
    full = read_golden(path, "openai:gpt-4").entries
    assert list(entries) == list(full)
    assert {k: entries[k] for k in entries} == full


def test_odd_keys_unicode_and_every_field_survive_the_index(tmp_path):
    odd = rec('ünïcode ✓ "quoted"\nnew line', "tab\there", tools=[], temperature=0)
    odd.answers.append(GoldenAnswer(text="", tool_calls=[{"function": {"arguments": "{}"}}]))
    odd.judge = {"j1": {"score": 0.5, "why": []}}
    by_key = {'k"quote\\slash': rec("a"), "ключ": odd, "k-empty": GoldenRecord("", {}, [])}
    for key, r in by_key.items():
        r.key = key
    path = tmp_path / "g.json"
    path.write_text(dump_golden(GoldenFile(path, "openai:gpt-4", by_key)), encoding="utf-8")
    lazy = index_golden(path, "openai:gpt-4").entries
    assert isinstance(lazy, LazyEntries)
    assert dict(lazy.items()) == read_golden(path, "openai:gpt-4").entries


def test_an_empty_file_and_a_missing_file_have_no_entries(tmp_path):
    path = tmp_path / "g.json"
    path.write_text(dump_golden(GoldenFile(path, "openai:gpt-4", {})), encoding="utf-8")
    assert dict(index_golden(path, "openai:gpt-4").entries) == {}
    missing = index_golden(tmp_path / "none.json", "openai:gpt-4")
    assert not missing.exists and dict(missing.entries) == {}


def test_another_layout_is_parsed_whole_with_the_same_records(tmp_path):
    recs = records(5)
    path = write_module(tmp_path, MODULE, *recs)
    canonical = read_golden(path).entries
    path.write_text(json.dumps(json.loads(path.read_text()), indent=4, sort_keys=True))
    golden = store_at(tmp_path).load(MODULE)
    assert not isinstance(golden.entries, LazyEntries)
    assert golden.entries == canonical


def test_a_broken_entry_names_its_line_when_read_and_the_module_stays_broken(tmp_path):
    a, b = rec("a"), rec("b")
    path = write_module(tmp_path, MODULE, a, b)
    text = path.read_text()
    bad_key = max(a.key, b.key)  # the second entry in the file
    good = a if bad_key == b.key else b
    start = text.index(f'"{bad_key}": {{')
    path.write_text(text[:start] + text[start:].replace('"text": "ok"', '"text": 5', 1))
    line = text[:start].count("\n") + 1
    store = store_at(tmp_path)
    assert store.lookup(MODULE, good.key) is not None  # never touched: not checked yet
    with pytest.raises(GoldenFileError, match=rf"{re.escape(str(path))}:{line}: entry '{bad_key}'"):
        store.lookup(MODULE, bad_key)
    with pytest.raises(GoldenFileError):
        store.lookup(MODULE, good.key)


def test_invalid_json_inside_an_entry_gives_the_full_parse_message(tmp_path):
    path = write_module(tmp_path, MODULE, *records(3))
    lines = path.read_text().splitlines(keepends=True)
    number = next(i for i, s in enumerate(lines, 1) if '"answer 1"' in s)
    lines[number - 1] = lines[number - 1].replace('"answer 1"', '"answer 1')
    path.write_text("".join(lines))
    with pytest.raises(GoldenFileError) as expected:
        read_golden(path, "openai:gpt-4")
    assert f"{path}:{number}:" in str(expected.value)
    with pytest.raises(GoldenFileError) as lazy:
        store_at(tmp_path).lookup(MODULE, records(3)[1].key)
    assert str(lazy.value) == str(expected.value)


def test_a_file_replaced_by_another_writer_is_indexed_again(tmp_path):
    write_module(tmp_path, MODULE, rec("a"), rec("c"))
    reader = store_at(tmp_path)
    assert reader.lookup(MODULE, rec("a").key) is not None
    writer = store_at(tmp_path)
    writer.record(MODULE, rec("b"), "t::b")  # an xdist worker, same file
    writer.flush()
    assert reader.lookup(MODULE, rec("b").key) is None  # not in the index it took
    assert reader.lookup(MODULE, rec("c").key).answer.text == "ok"  # read from the new file
    assert reader.lookup(MODULE, rec("b").key) is not None


def test_reference_mismatch_is_found_at_index_time(tmp_path):
    other = store_at(tmp_path, "OpenAI/GPT-4")
    other.record(MODULE, rec("a"), "t::a")
    other.flush()
    with pytest.raises(GoldenReferenceMismatch):
        index_golden(other.path_for(MODULE), "openai:gpt-4")


def test_stale_parses_no_entry_when_no_test_failed(tmp_path):
    recs = records(10)
    write_module(tmp_path, MODULE, *recs)
    run = store_at(tmp_path)
    assert run.lookup(MODULE, recs[0].key) is not None
    stale = run.stale({MODULE: {recs[0].key}}, covered_modules={MODULE}, failed_tests=set())
    assert stale == sorted((MODULE, r.key) for r in recs[1:])
    assert run.load(MODULE).entries.parsed == 1
    spared = run.stale({MODULE: {recs[0].key}}, {MODULE}, failed_tests={"t::a"})
    assert spared == []  # every entry lists t::a


def test_once_a_quarter_is_read_one_by_one_the_files_bytes_are_kept_and_no_record(tmp_path):
    recs = records(160)
    path = write_module(tmp_path, MODULE, *recs)
    store = store_at(tmp_path)
    for r in recs[:41]:
        assert store.lookup(MODULE, r.key).answer.text == r.answer.text
    entries = store.load(MODULE).entries
    assert entries.parsed == 41
    whole = read_golden(path, "openai:gpt-4").entries
    path.unlink()  # the bytes were read at the 41st: every entry is read from them now
    assert [store.lookup(MODULE, r.key) for r in recs] == [whole[r.key] for r in recs]
    assert entries.parsed == 41 + 160  # each read parsed again: no record is kept (issue 53)
    assert list(entries.each()) == list(whole.values())


def test_a_bulk_read_parses_the_file_whole_once_and_keeps_it(tmp_path):
    recs = records(40)
    path = write_module(tmp_path, MODULE, *recs)
    store = store_at(tmp_path)
    entries = store.load(MODULE).entries
    whole = read_golden(path, "openai:gpt-4").entries
    assert dict(entries.items()) == whole and entries.parsed == 40
    path.unlink()  # kept: a miss's at_place, once a test, parses nothing again
    assert list(entries.values()) == list(whole.values())


def test_a_released_store_keeps_nothing_read_and_reads_the_file_again(tmp_path):
    recs = records(160)
    path = write_module(tmp_path, MODULE, *recs)
    store = store_at(tmp_path)
    for r in recs[:41]:  # the bytes are kept from the 41st
        store.lookup(MODULE, r.key)
    store.release()
    assert store.lookup(MODULE, recs[0].key) is not None
    path.unlink()
    assert store.lookup(MODULE, recs[1].key) is None  # read from the file, gone now


def test_each_parses_every_entry_once_and_keeps_none(tmp_path):
    recs = records(40)
    path = write_module(tmp_path, MODULE, *recs)
    entries = store_at(tmp_path).load(MODULE).entries
    assert isinstance(entries, LazyEntries)
    assert list(entries.each()) == list(read_golden(path, "openai:gpt-4").entries.values())
    assert entries.parsed == 0
    path.write_text(path.read_text().replace('"answer 3"', '"answer 3'))  # broken, and replaced
    with pytest.raises(GoldenFileError):
        list(store_at(tmp_path).load(MODULE).entries.each())


def test_an_entry_indented_otherwise_is_read_by_the_full_parse(tmp_path):
    a = rec("a")
    a.judge = {"j1": {"score": 1}}
    path = write_module(tmp_path, MODULE, a, rec("b"), rec("c"))
    text = path.read_text()
    odd = text.replace('      },\n      "request": {', '    },\n    "request": {', 1)
    assert odd != text  # a key line of the layout's shape inside an entry: still valid JSON
    path.write_text(odd)
    full = read_golden(path, "openai:gpt-4").entries
    store = store_at(tmp_path)
    assert {key: store.lookup(MODULE, key) for key in full} == full
    assert set(store.load(MODULE).entries) == set(full)


def _variants(tmp_path) -> dict[str, bytes]:
    """Golden files as the store writes them, and the same bytes out of the layout."""
    odd = rec('ünïcode ✓ "quoted"\nnew line', "line\n>>>>>>> in an answer", temperature=0)
    by_key = {r.key: r for r in [*records(12), odd]}
    quoted = rec("q")
    quoted.key = 'k"quote\\slash'
    by_key[quoted.key] = quoted
    whole = dump_golden(GoldenFile(tmp_path / "g.json", "openai:gpt-4", by_key)).encode()
    one = dump_golden(GoldenFile(tmp_path / "g.json", "openai:gpt-4", {odd.key: odd})).encode()
    half = len(whole) // 2
    return {
        "entries": whole,
        "one entry": one,
        "no entry": dump_golden(GoldenFile(tmp_path / "g.json", "openai:gpt-4", {})).encode(),
        "a conflict": whole[:half] + b"\n>>>>>>> theirs\n" + whole[half:],
        "cut short": whole[:-5],
        "indented otherwise": whole.replace(b"\n    ", b"\n   "),
    }


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 1000])
def test_the_index_read_in_pieces_of_any_size_is_the_index_read_at_once(tmp_path, chunk):
    """A key line and the closing line before it may fall across two pieces; a conflict marker
    too: each piece's whole lines are matched and the last one is read again with the next."""
    import io

    from pytest_slam.golden.lazy import _index

    found = {}
    for name, data in _variants(tmp_path).items():
        at_once = _index(io.BytesIO(data), len(data), chunk=len(data) + 1)
        assert _index(io.BytesIO(data), len(data), chunk=chunk) == at_once, name
        found[name] = at_once is not None
    assert found == {
        "entries": True,
        "one entry": True,
        "no entry": True,
        "a conflict": False,
        "cut short": False,
        "indented otherwise": False,
    }


def test_a_file_indexed_in_small_pieces_reads_what_a_full_parse_gives(tmp_path, monkeypatch):
    from pytest_slam.golden import lazy

    monkeypatch.setattr(lazy, "CHUNK", 5)
    recs = records(20)
    path = write_module(tmp_path, MODULE, *recs)
    entries = index_golden(path, "openai:gpt-4").entries
    assert isinstance(entries, LazyEntries)
    assert entries[recs[19].key].answer.text == "answer 19"
    assert {k: entries[k] for k in entries} == read_golden(path, "openai:gpt-4").entries
