"""Shards checked by worker processes (issue 53): ``slam report merge`` of large shards checks them
two or more at a time, each worker parsing a shard's lines once and preparing them for the fold.
The merged report is the one a merge one shard at a time writes, byte for byte but its time; a
forged shard is still refused in one line before anything of it is used, and leaves no prepared
file behind; a full temporary folder in a worker is still the one line naming that folder.

The shards are written by the real report code (``pytest_slam.testing.shards``), signed as a
shard's job signs them; the workers are real processes (``load_shards(workers=2)``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from disk_helpers import TOO_LARGE, no_traceback, run_full
from patience import patient

from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.merge import MergeError, Trust, load_shards, merge
from pytest_slam.testing.shards import Written, write_shards

KEY = "test-report-merge-workers-key"
SHARDS, CASES = 5, 3


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLAM_SHARD_KEY", KEY)
        return write_shards(tmp_path_factory.mktemp("shards"), SHARDS, CASES, (15, 60))


@pytest.fixture
def spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The temporary folder the merge (and its workers, forked or spawned) prepares shards in."""
    folder = tmp_path / "spool"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder


def merged_to(paths: list[Path], out: Path, workers: int) -> None:
    result = merge(load_shards(paths, Trust(key=KEY.encode()), workers=workers))
    write_json(out, result.verdict, result.outcomes, result.visits, lines=result.lines)


def without_time(path: Path) -> str:
    return "".join(
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if not line.startswith('  "generated_at": ')
    )


def test_shards_checked_by_workers_merge_into_the_report_one_at_a_time_writes(
    written: Written, tmp_path: Path, spool: Path
) -> None:
    merged_to(written.shards, tmp_path / "apart.json", workers=2)
    merged_to(written.shards, tmp_path / "here.json", workers=1)

    apart = without_time(tmp_path / "apart.json")
    assert apart == without_time(tmp_path / "here.json")  # signature included: the same key
    whole = json.loads(written.whole.read_text(encoding="utf-8"))
    got = json.loads(apart)
    assert got["outcomes"] == whole["outcomes"]
    assert got["models"] == whole["models"] and got["tests"] == whole["tests"]
    assert len(got["outcomes"]) == SHARDS * CASES * 3
    assert list(spool.iterdir()) == []  # every prepared file gone


def test_a_forged_shard_checked_by_a_worker_is_refused_in_one_line_leaving_nothing(
    written: Written, tmp_path: Path, spool: Path
) -> None:
    paths = [Path(shutil.copy(p, tmp_path)) for p in written.shards]
    text = paths[3].read_text(encoding="utf-8")
    first = text.index('{"nodeid"')
    paths[3].write_text(
        text[:first] + text[first:].replace('"duration_s":0.5', '"duration_s":0.1', 1)
    )

    with pytest.raises(MergeError) as refused:
        load_shards(paths, Trust(key=KEY.encode()), workers=2)

    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{paths[3]} was changed after it was written")
    assert list(spool.iterdir()) == []  # the shards before it were prepared: removed


@pytest.mark.parametrize("workers", [1, 2])
def test_a_shard_signed_with_another_key_is_refused_leaving_no_prepared_file(
    written: Written, spool: Path, workers: int
) -> None:
    """Its lines match its digest, so they were prepared before its signature was refused."""
    with pytest.raises(MergeError) as refused:
        load_shards(written.shards, Trust(key=b"another-key"), workers=workers)

    assert str(refused.value).startswith(f"{written.shards[0]}: its signature does not match")
    assert list(spool.iterdir()) == []


def test_a_full_temporary_folder_in_a_worker_is_one_line_naming_it(
    written: Written, tmp_path: Path
) -> None:
    merging = (
        "import sys; from pytest_slam.cli import main; import pytest_slam.report.merge as m; "
        "m.PARALLEL_BYTES = 0; sys.exit(main(sys.argv[1:]))"
    )
    argv = [
        sys.executable,
        "-c",
        merging,
        "report",
        "merge",
        "--unsigned",
        *map(str, written.shards),
    ]
    full = run_full([*argv, "-o", str(tmp_path / "m.json")], tmp_path, limit=100)

    no_traceback(full)
    assert full.returncode == 2, full.stdout + full.stderr
    lines = full.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith(
        f"could not write {tempfile.gettempdir()}: {TOO_LARGE}"
    ), lines
    assert not (tmp_path / "m.json").exists()


def test_a_worker_killed_while_checking_is_one_line_naming_its_shard(
    written: Written, tmp_path: Path
) -> None:
    """A worker killed mid-check (the kernel's OOM killer, a user's kill) ended the merge in a
    ``BrokenProcessPool`` traceback. Each worker here kills itself with SIGKILL as its check
    starts (forked, it runs the ``die`` this process put in the check's place): the OOM killer
    itself cannot be summoned safely here."""
    merging = (
        "import os, signal, sys\n"
        "from pytest_slam.cli import main\n"
        "import pytest_slam.report.merge as m\n"
        "def die(*args):\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
        "m.PARALLEL_BYTES = 0\n"
        "m._check_apart = die\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "m.json"
    argv = [sys.executable, "-c", merging, "report", "merge", "--unsigned"]
    ended = subprocess.run(
        [*argv, *map(str, written.shards), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=patient(120),
        cwd=tmp_path,
    )

    no_traceback(ended)
    assert ended.returncode == 2, ended.stdout + ended.stderr
    lines = ended.stderr.splitlines()
    assert len(lines) == 1, lines
    assert f"the worker process checking {written.shards[0]} stopped" in lines[0], lines
    assert not out.exists()
