"""Prune keeps what it removes in a trash file first; restore puts it back byte for byte; the stale
report of a partial run is refused, with the reason."""

from __future__ import annotations

import json

import pytest
from golden_helpers import MODULE, OTHER, rec, store_at

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.stale import (
    mark_run_started,
    read_stale_report,
    stale_report_path,
    write_stale_report,
)
from pytest_slam.golden.trash import Trash, latest_trash, read_trash, restore


def test_prune_writes_the_trash_before_the_file_and_restore_gives_the_same_bytes(tmp_path):
    store = store_at(tmp_path)
    for prompt in ("a", "b", "c"):
        store.record(MODULE, rec(prompt, f"answer {prompt}"), f"t::{prompt}")
    store.record(OTHER, rec("d"), "t::d")
    paths = store.flush()
    before = {p: p.read_bytes() for p in paths}

    pruner = store_at(tmp_path)
    trash = Trash(pruner.root, pruner.reference)
    seen_at_trash_time = []

    def keep(module, records):
        seen_at_trash_time.append(len(json.loads(pruner.path_for(module).read_text())["entries"]))
        trash.add(module, records)

    gone = [(MODULE, rec("b").key), (OTHER, rec("d").key)]
    assert pruner.prune(gone, keep) == 2
    assert sorted(seen_at_trash_time) == [
        1,
        3,
    ]  # each file still whole when its entries reached the trash
    assert trash.count == 2 and trash.path == latest_trash(pruner.root)
    assert not pruner.path_for(OTHER).exists()
    kept = read_trash(trash.path)
    assert (kept.reference, kept.store_root()) == ("openai:gpt-4", pruner.root)
    assert sorted((m, r.key) for m, r in kept.items) == sorted(gone)

    restored, kept = restore(store_at(tmp_path), kept)
    assert (sorted(restored), kept) == (sorted(gone), [])
    assert {p: p.read_bytes() for p in paths} == before


def test_restore_keeps_an_entry_recorded_again_since(tmp_path):
    store = store_at(tmp_path)
    store.record(MODULE, rec("a", "old"), "t::a")
    store.flush()
    trash = Trash(store.root, store.reference)
    store.prune([(MODULE, rec("a").key)], trash.add)
    again = store_at(tmp_path)
    again.record(MODULE, rec("a", "new"), "t::a")
    again.flush()
    restored, kept = restore(store_at(tmp_path), read_trash(trash.path))
    assert (restored, kept) == ([], [(MODULE, rec("a").key)])
    assert store_at(tmp_path).lookup(MODULE, rec("a").key).answers[0].text == "new"


def test_trash_errors_are_one_line(tmp_path):
    with pytest.raises(GoldenError, match="no pruned entries to restore"):
        latest_trash(store_at(tmp_path).root)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{}\n")
    with pytest.raises(GoldenError, match=r"unreadable trash file \(no pytest-slam trash header\)"):
        read_trash(bad)


def test_a_partial_run_report_is_refused_with_its_reason(tmp_path):
    root = store_at(tmp_path).root
    path = stale_report_path(root)
    write_stale_report(path, "openai:gpt-4", [(MODULE, "k")], partial="the run was interrupted")
    assert json.loads(path.read_text())["entries"] == []  # a partial run lists nothing, ever
    with pytest.raises(GoldenError) as info:
        read_stale_report(path)
    message = str(info.value)
    assert "refusing to prune: the last run was partial (the run was interrupted)" in message
    assert "\n" not in message and "to its end" in message


def test_a_run_marks_the_report_under_way_only_where_there_are_goldens(tmp_path):
    store = store_at(tmp_path)
    mark_run_started(store.root, "openai:gpt-4")
    assert not stale_report_path(store.root).exists()  # no goldens: nothing written anywhere
    store.record(MODULE, rec("a"), "t::a")
    store.flush()
    mark_run_started(store.root, "openai:gpt-4")
    with pytest.raises(GoldenError, match=r"a run started at .* has not finished \(killed"):
        read_stale_report(stale_report_path(store.root))
