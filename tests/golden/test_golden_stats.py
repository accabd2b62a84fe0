"""Golden cache statistics: counts, returned models and age per file."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from pytest_slam.golden.census import format_stats, stats
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

NOW = datetime(2024, 6, 1, tzinfo=UTC)


def add(store: GoldenStore, module: str, prompt: str, *answers: tuple[str, str]) -> None:
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}]}
    golden = [GoldenAnswer(text="x", model=m, recorded_at=t) for m, t in answers]
    store.record(module, GoldenRecord(request_key(request), request, golden), "t")


def test_stats_rows_and_table(tmp_path):
    root = tmp_path / "golden"
    gpt4 = GoldenStore(root, "openai:gpt-4")
    add(gpt4, "tests/test_a.py", "1", ("gpt-4-0613", "2024-05-01T00:00:00Z"))
    add(gpt4, "tests/test_a.py", "2", ("gpt-4-0314", "2024-03-02T00:00:00Z"), ("gpt-4-0613", None))
    add(gpt4, "tests/test_b.py", "3", ("gpt-4-0613", "2024-05-31T12:00:00+00:00"))
    gpt4.flush()
    broken = root / "openai-gpt-4o" / "tests" / "test_c.json"
    broken.parent.mkdir(parents=True)
    broken.write_text("<<<<<<< HEAD\n")
    rows = stats(root, now=NOW)
    assert [r.file for r in rows] == [
        "openai-gpt-4/tests/test_a.json",
        "openai-gpt-4/tests/test_b.json",
        "openai-gpt-4o/tests/test_c.json",
    ]
    a, b, c = rows
    assert (a.reference, a.entries, a.answers) == ("openai:gpt-4", 2, 3)
    assert a.models == ["gpt-4-0314", "gpt-4-0613"]
    assert a.oldest.startswith("2024-03-02") and a.newest.startswith("2024-05-01")
    assert a.age_days == 91.0 and b.age_days == 0.5
    assert c.error and "merge conflict" in c.error and c.entries == 0
    table = format_stats(rows)
    assert table.splitlines()[0].split() == [
        "file",
        "reference",
        "entries",
        "answers",
        "models",
        "oldest",
        "newest",
        "age",
        "(d)",
    ]
    row_a = r"openai-gpt-4/tests/test_a.json +openai:gpt-4 +2 +3 +gpt-4-0314, gpt-4-0613 +"
    assert re.search(row_a + r"2024-03-02 +2024-05-01 +91\.0\n", table)
    assert "total (3 files)" in table and "91.0" in table and str(broken) in table


def test_no_files(tmp_path):
    assert stats(tmp_path / "missing") == []
    assert format_stats([]) == "no golden files"


def test_stats_name_a_killed_store_wide_change_and_the_command_that_recovers_it(tmp_path):
    """What a promote killed between two replaces leaves (its journal, one file already new):
    every replay refuses, so the stats say so and name the command; after it, nothing is said."""
    import hashlib
    import json
    import subprocess
    import sys

    from golden_helpers import MODULE, rec

    from pytest_slam.golden.journal import JOURNAL_SCHEMA, journal_path

    store = GoldenStore(tmp_path / "__slam__", "gpt-4", write_through=True)
    store.record(MODULE, rec("a"), "t::a")
    store.flush()
    path = store.path_for(MODULE)
    before, new = path.read_text(encoding="utf-8"), "half-promoted\n"
    files = [{"path": path.relative_to(store.root).as_posix(), "before": before,
              "after": hashlib.blake2b(new.encode(), digest_size=16).hexdigest()}]  # fmt: skip
    journal = {"schema": JOURNAL_SCHEMA, "what": "promote", "started": "2026-12-01T12:00:00Z"}
    journal_path(store.root, store.lock_dir).write_text(json.dumps({**journal, "files": files}))
    path.write_text(new + "x", encoding="utf-8")  # a second file not yet replaced: rolled back

    def slam_stats(*more: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest_slam.cli", "golden", "stats", "--root", "__slam__"]
        return subprocess.run([*argv, *more], cwd=tmp_path, capture_output=True, text=True)

    said = slam_stats("--json")
    assert said.returncode == 0 and json.loads(said.stdout)  # the rows, still parseable
    assert said.stderr == (
        "slam golden: __slam__: a promote started 2026-12-01T12:00:00Z did not finish (killed?): "
        "some golden files hold its answers and others do not, and every replay refuses until it "
        "is recovered. Fix: run `slam golden stats --recover` (it keeps the change if it had "
        "written every file, else rolls it back)\n"
    )
    recovered = slam_stats("--recover")
    assert recovered.returncode == 0 and "rolled back" in recovered.stderr
    assert path.read_text(encoding="utf-8") == before
    assert slam_stats().stderr == ""
