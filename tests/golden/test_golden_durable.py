"""A write-through store (what a test run uses): each recorded answer is in its file at once, the
bytes are those a buffered flush writes, and writers in other processes are merged, never lost."""

from __future__ import annotations

import json
import os

from golden_helpers import MODULE, rec, store_at

from pytest_slam.golden.store import GoldenStore


def durable_at(tmp_path):
    return GoldenStore(tmp_path / "fixtures" / "slam", "openai:gpt-4", write_through=True)


def on_disk(store: GoldenStore) -> dict:
    return json.loads(store.path_for(MODULE).read_text(encoding="utf-8"))["entries"]


def test_each_record_is_on_disk_at_once_with_the_bytes_a_flush_writes(tmp_path):
    records = [rec(f"prompt {i}", f"answer {i}") for i in range(5)]
    durable = durable_at(tmp_path / "one")
    for i, r in enumerate(records):
        durable.record(MODULE, r, "t::x")
        assert len(on_disk(durable)) == i + 1 and r.key in on_disk(durable)
    buffered = store_at(tmp_path / "two")
    for r in reversed(records):
        buffered.record(MODULE, r, "t::x")
    [path] = buffered.flush()
    assert durable.path_for(MODULE).read_bytes() == path.read_bytes()

    durable.mark_used(MODULE, records[0].key, "t::replayed-later")
    assert durable.flush() == [durable.path_for(MODULE)]  # folds in the later visit
    assert on_disk(durable)[records[0].key]["tests"] == ["t::replayed-later", "t::x"]


def test_a_file_changed_by_another_writer_is_re_read_and_merged(tmp_path):
    first, second = durable_at(tmp_path), durable_at(tmp_path)
    first.record(MODULE, rec("a"), "t::a")
    second.record(MODULE, rec("b"), "t::b")  # another xdist worker, same file
    first.record(MODULE, rec("c"), "t::c")  # must see b, although it wrote the file last but one
    assert set(on_disk(first)) == {rec("a").key, rec("b").key, rec("c").key}
    assert first.lookup(MODULE, rec("b").key) is not None


def test_a_replayed_file_is_never_rewritten(tmp_path):
    durable_at(tmp_path).record(MODULE, rec("a"), "t::a")
    path = store_at(tmp_path).path_for(MODULE)
    before, stamp = path.read_bytes(), path.stat().st_mtime_ns
    replay = durable_at(tmp_path)
    replay.mark_used(MODULE, rec("a").key, "t::a")
    assert replay.lookup(MODULE, rec("a").key) is not None
    assert replay.flush() == [] and path.read_bytes() == before
    assert path.stat().st_mtime_ns == stamp


def test_a_file_built_entry_by_entry_is_the_canonical_json_dump(tmp_path):
    from pytest_slam.golden.fileformat import SCHEMA, GoldenFile, _entry, _sorted, dump_golden
    from pytest_slam.golden.redact import scrub
    from pytest_slam.records import GoldenAnswer, GoldenRecord

    odd = rec('ünïcode ✓ "quoted"\nnew line', "tab\there", tools=[], temperature=0)
    odd.answers.append(GoldenAnswer(text="", tool_calls=[{"function": {"arguments": "{}"}}]))
    odd.judge = {"j1": {"score": 0.5, "why": []}}
    records = [rec("a"), odd, GoldenRecord(key="k-empty", request={}, answers=[])]
    golden = GoldenFile(tmp_path / "g.json", "openai:gpt-4", {r.key: r for r in records})
    doc = {"schema": SCHEMA, "reference": "openai:gpt-4",
           "entries": _sorted({r.key: _entry(r) for r in records})}  # fmt: skip
    canonical = json.dumps(scrub(doc), indent=2, ensure_ascii=False) + "\n"
    cache: dict = {}
    assert dump_golden(golden) == canonical
    assert dump_golden(golden, cache) == canonical and len(cache) == 3
    assert dump_golden(golden, cache) == canonical  # every entry's text from the cache
    del golden.entries[odd.key]
    assert dump_golden(golden, cache) == dump_golden(golden) and len(cache) == 2


def test_a_symlinked_golden_is_written_through_and_stays_a_link(tmp_path):
    """A team that keeps its goldens elsewhere and links them in: a record updates the target."""
    durable = durable_at(tmp_path)
    link = durable.path_for(MODULE)
    target = tmp_path / "shared" / "goldens" / "test_product.json"
    durable_at(tmp_path / "elsewhere").record(MODULE, rec("a"), "t::a")  # a golden to link to
    target.parent.mkdir(parents=True)
    durable_at(tmp_path / "elsewhere").path_for(MODULE).rename(target)
    link.parent.mkdir(parents=True)
    link.symlink_to(os.path.relpath(target, link.parent))  # relative, as git stores a link

    durable.record(MODULE, rec("b"), "t::b")
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert set(json.loads(target.read_text(encoding="utf-8"))["entries"]) == {
        rec("a").key,
        rec("b").key,
    }
    assert sorted(p.name for p in link.parent.iterdir()) == [link.name]  # no temp file left
    assert durable.flush() == [link] and link.is_symlink()  # the end of the run: still a link
    assert set(on_disk(durable_at(tmp_path))) == {rec("a").key, rec("b").key}


def test_pruning_the_last_entry_of_a_symlinked_golden_keeps_the_link(tmp_path):
    target = tmp_path / "shared" / "test_product.json"
    durable_at(tmp_path / "elsewhere").record(MODULE, rec("a"), "t::a")
    target.parent.mkdir(parents=True)
    durable_at(tmp_path / "elsewhere").path_for(MODULE).rename(target)
    link = durable_at(tmp_path).path_for(MODULE)
    link.parent.mkdir(parents=True)
    link.symlink_to(target)

    assert store_at(tmp_path).prune([(MODULE, rec("a").key)]) == 1
    assert link.is_symlink() and json.loads(target.read_text(encoding="utf-8"))["entries"] == {}
    assert store_at(tmp_path).load(MODULE).entries == {}
