"""``slam golden merge`` and the merge driver on golden files the store wrote: the merge rule
(answers, tests, turns, judge verdicts, removed entries), conflicts, and unusable inputs.

Every golden file here is written by a real ``GoldenStore``, and every merge runs the real ``slam``
command in a subprocess. End-to-end shards and git branches: ``test_plugin_golden_merge.py``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from disk_helpers import TOO_LARGE, no_traceback, run_full
from patience import patient
from slam_helpers import SLAM

from pytest_slam.golden.fileformat import GoldenFileError, read_golden
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE = "tests/test_help.py"
REL = "openai-gpt-4/tests/test_help.json"
T1, T2, T3 = (f"tests/test_help.py::test_{n}" for n in ("a", "b", "c"))


def rec(prompt: str, text: str, at: str, test: str, turn: int = 1, **extra: object) -> GoldenRecord:
    """A recorded answer as a record run files it: the request, the answer, where it was asked."""
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": prompt}]}
    answer = GoldenAnswer(text=text, model="gpt-4-0613", recorded_at=at, prompt_tokens=9,
                          completion_tokens=4, ttft_ms=120.5, e2e_ms=300.1)  # fmt: skip
    return GoldenRecord(key=request_key(request), request=request, answers=[answer],
                        turns={test: [turn]}, **extra)  # type: ignore[arg-type]  # fmt: skip


def record(root: Path, *calls: tuple[GoldenRecord, str]) -> Path:
    """A store at ``root`` that recorded ``calls`` (record, test) in order; returns the file."""
    store = GoldenStore(root, "openai:gpt-4")
    for r, test in calls:
        store.record(MODULE, r, test)
    store.flush()
    return store.path_for(MODULE)


def slam(cwd: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_slam.cli", *map(str, args)]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=patient(120))


SHARED_EARLY = rec("Opening hours?", "9 to 5.", "2026-01-01T10:00:00Z", T1)
SHARED_LATE = rec("Opening hours?", "9 to 5.", "2026-01-01T10:05:00Z", T3)  # same answer, later
REFUND = rec("Refund?", "Open Orders.", "2026-01-01T10:01:00Z", T1)
FOLLOW_UP = rec("And then?", "Click Refund.", "2026-01-01T10:02:00Z", T1, turn=2)
PASSWORD = rec("Password?", "Use the link.", "2026-01-01T10:03:00Z", T2)


def test_shards_merge_into_the_bytes_of_the_serial_recording(tmp_path):
    serial = GoldenStore(tmp_path / "serial", "openai:gpt-4")
    for r, test in ((SHARED_EARLY, T1), (REFUND, T1), (FOLLOW_UP, T1), (PASSWORD, T2)):
        serial.record(MODULE, r, test)
    serial.mark_used(MODULE, SHARED_EARLY.key, T3, turn=1)  # test_c replays test_a's answer
    serial.flush()
    record(tmp_path / "s1", (SHARED_EARLY, T1), (REFUND, T1), (FOLLOW_UP, T1))
    record(tmp_path / "s2", (PASSWORD, T2))
    record(tmp_path / "s3", (SHARED_LATE, T3))

    done = slam(tmp_path, "golden", "merge", "s3", "s1", "s2", "-o", "merged")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "merged 3 inputs: 1 golden files, 4 entries -> merged\n"
    merged = (tmp_path / "merged" / REL).read_bytes()
    assert merged == (tmp_path / "serial" / REL).read_bytes()
    shared = json.loads(merged)["entries"][SHARED_EARLY.key]
    assert shared["answers"][0]["recorded_at"] == "2026-01-01T10:00:00Z"  # the first recorded
    assert shared["tests"] == [T1, T3] and shared["turns"] == {T1: [1], T3: [1]}

    into = slam(tmp_path, "golden", "merge", "s1", "s2", "s3", "-o", "s1")  # into an input
    assert into.returncode == 0, into.stderr
    assert (tmp_path / "s1" / REL).read_bytes() == merged
    files = slam(tmp_path, "golden", "merge", f"s2/{REL}", f"s3/{REL}", f"s1/{REL}", "-o", "m.json")
    assert files.returncode == 0, files.stderr
    assert (tmp_path / "m.json").read_bytes() == merged


def test_answered_differently_on_two_inputs_is_a_conflict_and_nothing_is_written(tmp_path):
    record(tmp_path / "s1", (REFUND, T1), (PASSWORD, T2))
    other = rec("Refund?", "Ask Billing.", "2026-01-01T11:00:00Z", T3)
    record(tmp_path / "s2", (other, T3))
    done = slam(tmp_path, "golden", "merge", "s1", "s2", "-o", "merged")
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"slam golden: merged/{REL}: entry {REFUND.key} (asked by {T1}, {T3}) was answered "
        f"differently: 'Open Orders.' in s1/{REL}, 'Ask Billing.' in s2/{REL}; nothing written. "
        "Fix: pass --base the goldens both started from if one side only kept the old answer, "
        "or re-record those tests on one side (pytest --slm-record=all) and merge again\n"
    )
    assert not (tmp_path / "merged").exists()


def test_a_side_that_kept_the_ancestors_answer_yields_to_the_re_recorded_one(tmp_path):
    base = record(tmp_path / "base", (REFUND, T1))
    shutil.copytree(tmp_path / "base", tmp_path / "kept")
    record(tmp_path / "kept", (PASSWORD, T2))
    rerecorded = rec("Refund?", "Refunds moved to Billing.", "2026-02-01T09:00:00Z", T1)
    record(tmp_path / "new", (rerecorded, T1))
    done = slam(tmp_path, "golden", "merge", "kept", "new", "-o", "out", "--base", "base")
    assert done.returncode == 0, done.stderr
    merged = read_golden(tmp_path / "out" / REL)
    assert merged.entries[REFUND.key].answers[0].text == "Refunds moved to Billing."
    assert set(merged.entries) == {REFUND.key, PASSWORD.key}
    without = slam(tmp_path, "golden", "merge", "kept", "new", "-o", "out2")
    assert without.returncode == 1, "without the ancestor, two answers are a conflict"
    assert base.exists()


def test_judge_verdicts_on_the_kept_answers_merge_and_those_on_replaced_answers_drop(tmp_path):
    verdict = {"value": 1.0, "explanation": "same", "judge": "gpt-4o"}
    record(tmp_path / "base", (REFUND, T1))
    judged_a = rec("Refund?", "Open Orders.", REFUND.answers[0].recorded_at or "", T1,
                   judge={"j1": verdict})  # fmt: skip
    judged_b = rec("Refund?", "Open Orders.", REFUND.answers[0].recorded_at or "", T1,
                   judge={"j2": {**verdict, "judge": "claude"}})  # fmt: skip
    record(tmp_path / "a", (judged_a, T1))
    record(tmp_path / "b", (judged_b, T1))
    done = slam(tmp_path, "golden", "merge", "a", "b", "-o", "ab", "--base", "base")
    assert done.returncode == 0, done.stderr
    assert set(read_golden(tmp_path / "ab" / REL).entries[REFUND.key].judge) == {"j1", "j2"}

    rerecorded = rec("Refund?", "Ask Billing.", "2026-02-01T09:00:00Z", T1)
    record(tmp_path / "c", (rerecorded, T1))
    done = slam(tmp_path, "golden", "merge", "a", "c", "-o", "ac", "--base", "base")
    assert done.returncode == 0, done.stderr
    kept = read_golden(tmp_path / "ac" / REL).entries[REFUND.key]
    assert kept.answers[0].text == "Ask Billing." and kept.judge == {}


def test_an_entry_pruned_on_one_side_stays_pruned_unless_the_other_side_changed_it(tmp_path):
    record(tmp_path / "base", (REFUND, T1), (PASSWORD, T2))
    for side in ("pruned", "kept", "visited"):
        shutil.copytree(tmp_path / "base", tmp_path / side)
    store = GoldenStore(tmp_path / "pruned", "openai:gpt-4")
    assert store.prune([(MODULE, REFUND.key)]) == 1
    record(tmp_path / "visited", (rec("Refund?", "Open Orders.", "2026-03-01T00:00:00Z", T3), T3))

    done = slam(tmp_path, "golden", "merge", "pruned", "kept", "-o", "o1", "--base", "base")
    assert done.returncode == 0, done.stderr
    assert set(read_golden(tmp_path / "o1" / REL).entries) == {PASSWORD.key}
    done = slam(tmp_path, "golden", "merge", "pruned", "visited", "-o", "o2", "--base", "base")
    assert done.returncode == 0, done.stderr
    assert read_golden(tmp_path / "o2" / REL).entries[REFUND.key].tests == [T1, T3]


def test_a_secret_in_a_hand_edited_input_never_reaches_the_merged_file(tmp_path):
    path = record(tmp_path / "a", (REFUND, T1))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["entries"][REFUND.key]["answers"][0]["text"] = "Use key sk-proj-abcdefgh12345678 here."
    path.write_text(json.dumps(data), encoding="utf-8")
    done = slam(tmp_path, "golden", "merge", "a", "-o", "out")
    assert done.returncode == 0, done.stderr
    text = (tmp_path / "out" / REL).read_text(encoding="utf-8")
    assert "sk-proj" not in text and "Use key [redacted] here." in text


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{\n  "schema": "pytest-slam/golden/1",\n  "entries": {\n', "not valid JSON"),
        ('{"schema": "pytest-slam/golden/9", "reference": "gpt-4", "entries": {}}',
         "schema 'pytest-slam/golden/9' is not 'pytest-slam/golden/1'"),
        ('{"schema": "pytest-slam/golden/1", "reference": "claude", "entries": {}}',
         "holds answers of reference 'claude'"),
        ("\udcff", "not UTF-8"),
    ],
    ids=["truncated", "newer-schema", "other-reference", "binary"],
)  # fmt: skip
def test_an_unusable_input_is_one_line_exit_2_and_nothing_written(tmp_path, content, problem):
    good = record(tmp_path / "a", (REFUND, T1))
    before = good.read_bytes()
    bad = tmp_path / "b" / REL
    bad.parent.mkdir(parents=True)
    bad.write_bytes(content.encode("utf-8", "surrogateescape"))
    for args in (("a", "b", "-o", "a"), (good, bad, "-o", good)):
        done = slam(tmp_path, "golden", "merge", *args)
        assert done.returncode == 2 and done.stdout == ""
        assert done.stderr.startswith("slam golden: ") and problem in done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert good.read_bytes() == before


def test_mixed_or_missing_inputs_are_refused(tmp_path):
    good = record(tmp_path / "a", (REFUND, T1))
    mixed = slam(tmp_path, "golden", "merge", "a", good, "-o", "out")
    assert mixed.returncode == 2 and "mixes golden files and folders" in mixed.stderr
    missing = slam(tmp_path, "golden", "merge", "a", "nope", "-o", "out")
    assert missing.returncode == 2 and "nope: no such golden file or folder" in missing.stderr
    assert not (tmp_path / "out").exists()


def test_the_driver_keeps_both_sides_between_markers_and_the_store_refuses_that_file(tmp_path):
    base = record(tmp_path / "base", (PASSWORD, T2))
    ours = tmp_path / "ours.json"
    theirs = tmp_path / "theirs.json"
    for path, text in ((ours, "Open Orders."), (theirs, "Ask Billing.")):
        side = tmp_path / path.stem
        shutil.copytree(tmp_path / "base", side)
        shutil.copy(record(side, (rec("Refund?", text, "2026-01-02T00:00:00Z", T1), T1)), path)
    ours_before = ours.read_text(encoding="utf-8")
    done = slam(tmp_path, "golden", "merge-driver", base, ours, theirs, "tests/x.json")
    assert done.returncode == 1
    assert done.stderr == (
        f"slam golden merge-driver: tests/x.json: entry {REFUND.key} (asked by {T1}) was answered "
        "differently: 'Open Orders.' in ours, 'Ask Billing.' in theirs; both kept between conflict "
        "markers. Fix: keep one side of each, or re-record those tests (pytest --slm-record=all) "
        "after keeping either\n"
    )
    text = ours.read_text(encoding="utf-8")
    with pytest.raises(GoldenFileError, match="unresolved git merge conflict marker"):
        read_golden(ours)
    lines = text.splitlines()
    start, middle, end = (next(i for i, line in enumerate(lines) if line.startswith(m))
                          for m in ("<<<<<<< ours", "=======", ">>>>>>> theirs"))  # fmt: skip
    kept_ours = "\n".join(lines[:start] + lines[start + 1 : middle] + lines[end + 1 :]) + "\n"
    assert kept_ours == ours_before  # one side kept: exactly that side's file
    kept_theirs = "\n".join(lines[:start] + lines[middle + 1 : end] + lines[end + 1 :]) + "\n"
    assert kept_theirs == theirs.read_text(encoding="utf-8")


def test_the_driver_on_a_full_disk_leaves_ours_as_it_was_in_one_line(tmp_path):
    """git's merge driver writes OURS in place of git's copy: on a full disk (a file-size limit)
    OURS is left whole as it was, one line names it with the fix, exit 2 (git then stops the
    merge); with space, the same call merges."""
    base = record(tmp_path / "base", (PASSWORD, T2))
    ours, theirs = tmp_path / "ours.json", tmp_path / "theirs.json"
    for path, text in ((ours, "Open Orders."), (theirs, "Ask Billing.")):
        side = tmp_path / path.stem
        shutil.copytree(tmp_path / "base", side)
        shutil.copy(record(side, (rec("Refund?", text, "2026-01-02T00:00:00Z", T1), T1)), path)
    before = ours.read_bytes()
    argv = [*SLAM, "golden", "merge-driver", base, ours, theirs, "tests/x.json"]
    full = run_full(list(map(str, argv)), tmp_path, limit=100)
    no_traceback(full)
    assert (full.returncode, full.stdout) == (2, ""), full.stderr
    assert full.stderr == f"slam golden merge-driver: could not write ours.json: {TOO_LARGE}\n"
    assert ours.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["ours.json", "theirs.json"]
    assert slam(tmp_path, *argv[len(SLAM) :]).returncode == 1  # with space: merged, a conflict


def test_the_driver_refuses_an_unusable_side_and_leaves_ours_as_it_was(tmp_path):
    ours = record(tmp_path / "a", (REFUND, T1))
    before = ours.read_bytes()
    theirs = tmp_path / "theirs.json"
    theirs.write_text("<<<<<<< HEAD\n", encoding="utf-8")
    empty = tmp_path / "empty.json"
    empty.write_text("", encoding="utf-8")  # git's ancestor of a file both branches added
    done = slam(tmp_path, "golden", "merge-driver", empty, ours, theirs, "tests/x.json")
    assert done.returncode == 2 and "unresolved git merge conflict marker" in done.stderr
    assert done.stderr.startswith("slam golden merge-driver: tests/x.json: ")
    assert ours.read_bytes() == before
    usage = slam(tmp_path, "golden", "merge-driver", ours)
    assert usage.returncode == 2 and "needs BASE OURS THEIRS" in usage.stderr


def test_install_writes_the_attributes_line_and_the_git_config_once(tmp_path, tmp_path_factory):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitattributes").write_text("*.png binary", encoding="utf-8")
    for _ in range(2):
        done = slam(tmp_path, "golden", "merge-driver", "--install")
        assert done.returncode == 0, done.stderr
    assert (tmp_path / ".gitattributes").read_text(encoding="utf-8") == (
        "*.png binary\n__slam__/**/*.json merge=slam-golden\n"
    )
    config = subprocess.run(["git", "config", "--get-regexp", "merge.slam-golden"], cwd=tmp_path,
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert config.splitlines() == [
        "merge.slam-golden.name pytest-slam golden files",
        "merge.slam-golden.driver slam golden merge-driver %O %A %B %P",
    ]
    outside = tmp_path_factory.mktemp("not-a-repository")
    done = slam(outside, "golden", "merge-driver", "--install")
    assert done.returncode == 2 and "Fix: run it in a git repository" in done.stderr
    assert not (outside / ".gitattributes").exists()
