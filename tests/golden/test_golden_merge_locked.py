"""``slam golden merge`` into the project's store is a store-wide change: it takes the store lock
that every golden writer takes (a recording run's every answer, a promote), recovers a killed
change first and journals its writes, so it never drops an answer written meanwhile nor merges a
half-promoted store. The merge driver refuses what git would never hand it (a missing side) and
never writes an empty golden file; an unwritable ``-o`` is one line, exit 2.

Real ``slam`` processes, real ``GoldenStore`` writers in another process holding the lock.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from golden_helpers import rec
from patience import patient

from pytest_slam.golden.fileformat import read_golden
from pytest_slam.golden.journal import JOURNAL_SCHEMA, journal_path
from pytest_slam.golden.store import GoldenStore

MODULE = "tests/test_help.py"
WAIT_S = 120  # a bound on one command, never a verdict on speed


def slam(cwd: Path, *args: str | Path, **popen: object) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "pytest_slam.cli", *map(str, args)]
    return subprocess.Popen(argv, cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, **popen)  # type: ignore[call-overload]  # fmt: skip


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=patient(WAIT_S))
    return proc.returncode, out, err


def texts(path: Path) -> set[str]:
    return {a.text for r in read_golden(path).entries.values() for a in r.answers}


def project(tmp_path: Path) -> tuple[GoldenStore, Path]:
    """A project whose live store holds one answer, and a shard's store holding three others."""
    live = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    live.record(MODULE, rec("live?", "live answer"), "t::a")
    live.flush()
    shard = GoldenStore(tmp_path / "shard" / "__slam__", "openai:gpt-4")
    for n in range(3):
        shard.record(MODULE, rec(f"shard {n}?", f"shard answer {n}"), "t::b")
    shard.flush()
    return live, shard.root


WRITER = textwrap.dedent("""
    import sys
    from golden_helpers import rec
    from pytest_slam.golden.store import GoldenStore

    store = GoldenStore(sys.argv[1], "openai:gpt-4")
    with store.transaction("promote"):  # the store lock, held from here to the commit
        for n in range(5):
            store.record(sys.argv[2], rec(f"new {n}?", f"recorded meanwhile {n}"), "t::c")
        store.flush()
        print("holding", flush=True)
        sys.stdin.readline()  # until the test lets go
""")


def test_a_merge_waits_for_a_writer_holding_the_store_and_loses_none_of_its_answers(tmp_path):
    live, shard = project(tmp_path)
    tests_dir = Path(__file__).resolve().parents[1]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(live.root), MODULE], cwd=tmp_path, text=True,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(map(str, (tests_dir, tests_dir.parent)))},
    )  # fmt: skip
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "holding\n"
        merge = slam(tmp_path, "golden", "merge", "__slam__", shard, "-o", "__slam__")
        assert merge.stderr is not None
        said = merge.stderr.readline()  # the merge says it waits; one that does not goes on
    finally:
        assert writer.stdin is not None
        writer.stdin.write("\n")
        writer.stdin.close()
        writer.wait(timeout=patient(WAIT_S))
    code, _, err = finish(merge)
    assert writer.returncode == 0
    assert code == 0, said + err
    want = {"live answer", *(f"shard answer {n}" for n in range(3))}
    want |= {f"recorded meanwhile {n}" for n in range(5)}
    assert texts(live.path_for(MODULE)) == want  # the writer's five and the shard's three
    assert said.startswith("slam golden: waiting for the store lock")
    assert not journal_path(live.root, live.lock_dir).exists()


def test_a_merge_after_a_killed_promote_recovers_first_and_never_merges_a_mixed_store(tmp_path):
    live, shard = project(tmp_path)
    path = live.path_for(MODULE)
    before = path.read_text(encoding="utf-8")
    half = before.replace("live answer", "half-promoted answer")
    digest = hashlib.blake2b(half.encode(), digest_size=16).hexdigest()
    other = live.path_for("tests/test_other.py")  # a second file the promote had not reached
    files = [
        {"path": path.relative_to(live.root).as_posix(), "before": before, "after": digest},
        {"path": other.relative_to(live.root).as_posix(), "before": None, "after": "x" * 32},
    ]
    journal = {"schema": JOURNAL_SCHEMA, "what": "promote", "started": "2026-12-01T12:00:00Z"}
    journal_path(live.root, live.lock_dir).write_text(json.dumps({**journal, "files": files}))
    path.write_text(half, encoding="utf-8")  # killed between its two replaces

    code, _, err = finish(slam(tmp_path, "golden", "merge", "__slam__", shard, "-o", "__slam__"))
    assert code == 0, err
    assert err.splitlines() == [
        "slam golden: a promote started 2026-12-01T12:00:00Z did not finish (killed?); rolled "
        "back: those files are as they were before it (2 files)"
    ]
    assert texts(path) == {"live answer", *(f"shard answer {n}" for n in range(3))}


def test_the_driver_refuses_a_missing_side_and_writes_no_empty_golden_file(tmp_path):
    live, _ = project(tmp_path)
    ours = tmp_path / "ours.json"
    for args in (("nope-base", ours, "nope-theirs"), (live.path_for(MODULE), ours, ours)):
        code, out, err = finish(slam(tmp_path, "golden", "merge-driver", *args, "x.json"))
        assert code == 2 and out == "", err
        assert err.startswith("slam golden merge-driver: ") and "no such file" in err
        assert err.count("\n") == 1 and "Traceback" not in err
        assert not ours.exists()
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")
    ours.write_text("", encoding="utf-8")
    code, _, err = finish(slam(tmp_path, "golden", "merge-driver", empty, ours, empty, "x.json"))
    assert code == 2 and err.count("\n") == 1 and "never empty" in err, err
    assert ours.read_text(encoding="utf-8") == ""


def test_a_merge_to_an_unwritable_output_is_one_line_and_writes_nothing(tmp_path):
    live, shard = project(tmp_path)
    (tmp_path / "a-file").write_text("not a folder\n", encoding="utf-8")
    for out in ("a-file/merged.json", "a-file/deeper/merged"):
        inputs = (live.path_for(MODULE), shard / "openai-gpt-4" / "tests" / "test_help.json")
        if not out.endswith(".json"):
            inputs = (live.root, shard)
        code, stdout, err = finish(slam(tmp_path, "golden", "merge", *inputs, "-o", out))
        assert code == 2 and stdout == "", err
        assert err.startswith(f"slam golden: {out}") and "cannot write the merge there" in err
        assert err.count("\n") == 1 and "Fix: pass -o" in err
    assert (tmp_path / "a-file").read_text(encoding="utf-8") == "not a folder\n"
