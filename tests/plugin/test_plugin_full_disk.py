"""A run on a full disk or with a read-only golden folder: real pytest runs in a subprocess whose
writes fail (disk_helpers.py), then the same run again with space.

Every file the run keeps (golden file, append log, JSON and HTML reports, the saved run of
--slm-baseline=auto, the GitHub step summary) is either written whole or said in one line naming
it, the error and the fix; the previous file is intact; the exit status says the run is
incomplete (2); and the next run, with space, writes what was missing with no manual step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from disk_helpers import (
    PYTEST,
    READ_ONLY_FS,
    TOO_LARGE,
    files_under,
    needs_read_only_mount,
    no_traceback,
    run_full,
    run_read_only,
)
from plugin_golden_helpers import GOLDEN, QUESTIONS, SUITE, entries, run, write_project
from slam_helpers import BAD, PRODUCT, Answers

from pytest_slam.run.end.exitstatus import EXIT_INCOMPLETE
from pytest_slam.testing import FakeOpenAI

PRODUCT_FILE = GOLDEN / "test_product.json"


@pytest.fixture
def recorded(pytester: pytest.Pytester):
    """A project whose three answers are recorded, and a reference that now answers otherwise
    (so a refresh must rewrite the golden file)."""
    answers = Answers()
    with FakeOpenAI(answer=answers) as reference, FakeOpenAI() as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
        write_project(pytester, reference, candidate)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
        answers.good = False
        yield pytester


def _texts(path: Path) -> set[str]:
    return {e["answers"][0]["text"] for e in entries(path).values()}


def test_a_refresh_on_a_full_disk_says_each_file_keeps_the_old_and_the_next_run_recovers(
    recorded: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = recorded.path
    (root / "summary.md").write_text("x" * 1000, encoding="utf-8")  # GitHub's, nearly full
    goldens = files_under(root / "__slam__")
    argv = [*PYTEST, "--slm-record=all", "--slm-report=r.json", "--slm-html=r.html",
            "--slm-baseline=auto"]  # fmt: skip
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(root / "summary.md"))
    full = run_full(argv, root)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY")
    no_traceback(full)
    out = full.stdout
    assert full.returncode == EXIT_INCOMPLETE, out[-3000:]
    fix = TOO_LARGE
    for what, path in (
        ("golden answers", PRODUCT_FILE.as_posix()),
        ("JSON report", "r.json"),
        ("HTML report", "r.html"),
        ("GitHub step summary", "summary.md"),
    ):
        assert f"{what} not written: could not write {path}: {fix}" in out, what
    assert "baseline auto not written: could not write .slam/runs/0001_" in out
    assert "exit status 2: the run is incomplete" in " ".join(out.split())
    assert files_under(root / "__slam__") == goldens  # the old answers, byte for byte
    assert (root / "summary.md").read_text(encoding="utf-8") == "x" * 1000
    assert not (root / "r.json").exists() and not (root / "r.html").exists()
    assert not list((root / ".slam" / "runs").glob("*.json"))  # no empty run to compare with

    again = run(recorded, "--slm-record=all", "--slm-report=r.json")
    again.assert_outcomes(passed=3)
    assert again.ret == 0
    assert _texts(root / PRODUCT_FILE) == {BAD}
    assert (root / "r.json").stat().st_size > 1024


@needs_read_only_mount
def test_a_refresh_with_a_read_only_golden_folder_says_so_and_the_next_run_recovers(
    recorded: pytest.Pytester,
) -> None:
    root = recorded.path
    goldens = files_under(root / "__slam__")
    ro = run_read_only([*PYTEST, "--slm-record=all"], root, [root / GOLDEN])
    no_traceback(ro)
    assert ro.returncode == EXIT_INCOMPLETE, ro.stdout[-3000:] + ro.stderr[-2000:]
    line = f"golden answers not written: could not write {PRODUCT_FILE.as_posix()}: {READ_ONLY_FS}"
    assert line in ro.stdout
    assert files_under(root / "__slam__") == goldens
    assert (root / ".slam" / "appendlog").is_dir()  # the paid answers, kept for the next run

    again = run(recorded, "--slm-record=new")  # not even a refresh: the kept answers fold in
    again.assert_outcomes(passed=3)
    assert again.ret == 0
    assert _texts(root / PRODUCT_FILE) == {BAD}


@needs_read_only_mount
def test_a_run_whose_scratch_folder_is_read_only_is_refused_before_any_call(
    recorded: pytest.Pytester,
) -> None:
    """The scratch folder (locks, append logs, the stale report) read-only: no answer could be
    kept nor any file locked, so the run refuses at its start, in one line, before paying."""
    root = recorded.path
    before = files_under(root)
    ro = run_read_only([*PYTEST, "--slm-record=all"], root, [root / ".slam"])
    no_traceback(ro)
    assert ro.returncode == pytest.ExitCode.USAGE_ERROR, ro.stdout[-3000:] + ro.stderr[-2000:]
    assert ro.stderr.strip().splitlines()[-1] == (
        f"ERROR: pytest-slam: could not write .slam/golden-stale.json: {READ_ONLY_FS}"
    )
    assert files_under(root) == before

    again = run(recorded, "--slm-record=all")
    assert again.ret == 0
    assert _texts(root / PRODUCT_FILE) == {BAD}


def test_a_report_its_shard_key_cannot_sign_is_one_line_and_the_run_incomplete(
    recorded: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report that is not written for want of its key is a report not written, as on a full
    disk: one line, and the exit status says the run is incomplete (it was 0)."""
    monkeypatch.setenv("SLAM_SHARD_KEY_FILE", "no.key")
    result = run(recorded, "--slm-report=r.json")
    result.assert_outcomes(passed=3)
    assert result.ret == EXIT_INCOMPLETE
    result.stdout.fnmatch_lines(["JSON report not written: SLAM_SHARD_KEY_FILE no.key: cannot "
                                 "read the shard key (No such file or directory)"])  # fmt: skip
    assert not (recorded.path / "r.json").exists()


def test_under_xdist_a_workers_unwritten_golden_file_is_said_by_the_controller(
    recorded: pytest.Pytester,
) -> None:
    """A worker flushes its own goldens: the file it could not write crosses to the controller
    in its payload, which says it once and ends the run incomplete."""
    root = recorded.path
    goldens = files_under(root / "__slam__")
    full = run_full([*PYTEST, "-p", "xdist", "-n", "2", "--slm-record=all"], root)
    no_traceback(full)
    assert full.returncode == EXIT_INCOMPLETE, full.stdout[-3000:]
    line = f"golden answers not written: could not write {PRODUCT_FILE.as_posix()}: {TOO_LARGE}"
    assert full.stdout.count(line) == 1, full.stdout[-3000:]
    assert files_under(root / "__slam__") == goldens
