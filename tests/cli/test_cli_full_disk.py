"""``slam`` commands on a full disk and with a read-only folder (disk_helpers.py): each output
they write (a merged report, the promote's journal and golden files) is written whole or said in
one line naming the file, the error and the fix, exit 2, nothing changed; run again with space,
the same command does its work.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from disk_helpers import (
    READ_ONLY_FS,
    TOO_LARGE,
    files_under,
    needs_read_only_mount,
    no_traceback,
    run_full,
    run_read_only,
)
from slam_helpers import MINI_PYPROJECT, PRODUCT, REPORTED_TESTS, SLAM

from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpt4: Any) -> pytest.Pytester:
    """A recorded product suite and its run's JSON report, ``run.json``."""
    with FakeOpenAI(lambda req: "Mini says: " + req["messages"][-1]["content"].upper()) as mini:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=mini.base_url))  # fmt: skip
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new",
                                    "--slm-report=run.json")  # fmt: skip
        assert result.ret == 0, result.stdout.str()
        yield pytester


# command, the file it names when it cannot write, what must exist after a run with space
COMMANDS = {
    "report merge -o": (  # its spool of merged outcomes is written first, in the temp folder
        ["report", "merge", "run.json", "-o", "out/m.json", "--unsigned"], tempfile.gettempdir(),
        "out/m.json"),
    "report render -o": (
        ["report", "render", "run.json", "-o", "out/r.html"], "out/r.html", "out/r.html"),
    "golden promote (its journal)": (
        ["golden", "promote", "mini", "--report", "run.json"], ".slam/locks/__slam__.journal",
        "__slam__/gpt-4/test_product.json"),
}  # fmt: skip


@pytest.mark.parametrize("name", COMMANDS)
def test_a_command_on_a_full_disk_is_one_line_and_nothing_changed(project, name: str) -> None:
    argv, named, made = COMMANDS[name]
    (project.path / "out").mkdir()
    before = files_under(project.path)
    full = run_full([*SLAM, *argv], project.path, limit=100)
    no_traceback(full)
    assert full.returncode == 2, full.stdout + full.stderr
    lines = full.stderr.splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"could not write {named}: {TOO_LARGE}"), lines
    after = files_under(project.path)
    assert {k: v for k, v in after.items() if k in before} == before  # every old file intact
    assert not [k for k in after if k not in before and not k.startswith(".slam/locks/")]

    again = project.run(*SLAM, *argv)
    assert again.ret == 0, again.stderr.str()
    assert (project.path / made).exists()


@needs_read_only_mount
def test_a_promote_into_a_read_only_golden_folder_is_one_line(project) -> None:
    golden = project.path / "__slam__" / "gpt-4"
    before = files_under(project.path / "__slam__")
    argv = [*SLAM, "golden", "promote", "mini", "--report", "run.json"]
    ro = run_read_only(argv, project.path, [project.path / "__slam__"])
    no_traceback(ro)
    assert ro.returncode == 2, ro.stdout + ro.stderr
    (line,) = ro.stderr.splitlines()
    assert re.fullmatch(
        rf"slam golden: could not write __slam__/\S+: {re.escape(READ_ONLY_FS)}", line
    )
    assert files_under(project.path / "__slam__") == before
    assert not (project.path / ".slam" / "locks" / "__slam__.journal").exists()  # rolled back
    assert project.run(*argv).ret == 0 and golden.is_dir()


def test_a_prune_on_a_full_disk_keeps_every_entry_and_its_trash_is_one_line(project) -> None:
    """The prune's trash (what it removes, kept first so it can be undone) cannot be written:
    nothing is removed; with space, the same command prunes."""
    project.makepyfile(test_product=REPORTED_TESTS.split("def test_password")[0])
    assert project.runpytest("-p", "no:cacheprovider").ret == 0  # the stale entry is found
    before = files_under(project.path / "__slam__")
    full = run_full([*SLAM, "golden", "prune"], project.path, limit=100)
    no_traceback(full)
    assert full.returncode == 2, full.stdout + full.stderr
    (line,) = full.stderr.splitlines()
    assert re.fullmatch(
        rf"slam golden: could not write \.slam/trash/\S+\.jsonl: {re.escape(TOO_LARGE)}", line
    ), line
    assert files_under(project.path / "__slam__") == before
    assert not list((project.path / ".slam" / "trash").glob("*.jsonl"))  # none torn
    again = project.run(*SLAM, "golden", "prune")
    assert again.ret == 0 and files_under(project.path / "__slam__") != before


def test_the_merge_driver_install_on_a_full_disk_keeps_gitattributes_whole(
    pytester: pytest.Pytester,
) -> None:
    """``.gitattributes`` was rewritten in place: a full disk left it cut short (the user's own
    lines lost). Now it is written whole or left as it was, and the command says which file."""
    import subprocess

    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    own = "".join(f"docs/{n}/*.md linguist-documentation\n" for n in range(8))  # > 100 bytes
    (pytester.path / ".gitattributes").write_text(own, encoding="utf-8")
    full = run_full([*SLAM, "golden", "merge-driver", "--install"], pytester.path, limit=100)
    no_traceback(full)
    assert full.returncode == 2, full.stdout + full.stderr
    assert full.stderr == f"slam golden: could not write .gitattributes: {TOO_LARGE}\n"
    assert (pytester.path / ".gitattributes").read_text(encoding="utf-8") == own
    again = pytester.run(*SLAM, "golden", "merge-driver", "--install")
    assert again.ret == 0
    assert (pytester.path / ".gitattributes").read_text(encoding="utf-8").startswith(own)


CALIBRATE = ["calibrate", "--labels", "labels.jsonl", "--scorers", "token_sort_ratio",
             "--resamples", "100", "--min-count", "10"]  # fmt: skip
OLD_PYPROJECT = '[tool.slam]\nreference = "openai:gpt-4"\n'


@pytest.fixture
def labelled(pytester: pytest.Pytester) -> pytest.Pytester:
    """300 labelled pairs: a one-word paraphrase is acceptable, an unrelated answer is not."""
    rng = random.Random(1)
    words = [f"w{n}" for n in range(40)]
    rows = []
    for i in range(300):
        ref = rng.sample(words, 10)
        good = i % 2 == 0
        cand = [*ref[:9], "x" + ref[9]] if good else [w[::-1] for w in rng.sample(words, 10)]
        rows.append({"candidate": " ".join(cand), "reference": " ".join(ref), "label": good,
                     "unit": str(i // 2)})  # fmt: skip
    text = "".join(json.dumps(r) + "\n" for r in rows)
    (pytester.path / "labels.jsonl").write_text(text, encoding="utf-8")
    (pytester.path / "pyproject.toml").write_text(OLD_PYPROJECT, encoding="utf-8")
    return pytester


def _calibrate_full(root: Path) -> subprocess.CompletedProcess[str]:
    return run_full([*SLAM, *CALIBRATE], root, limit=100)


def _calibrate_read_only(root: Path) -> subprocess.CompletedProcess[str]:
    return run_read_only([*SLAM, *CALIBRATE], root, [root])


CALIBRATE_CASES = {"full disk": (_calibrate_full, TOO_LARGE), "read-only folder": (
    _calibrate_read_only, READ_ONLY_FS)}  # fmt: skip


@pytest.mark.parametrize(
    "case", ["full disk", pytest.param("read-only folder", marks=needs_read_only_mount)]
)
def test_a_calibration_table_that_cannot_be_written_is_one_line_and_pyproject_kept(
    labelled: pytest.Pytester, case: str
) -> None:
    """``slam calibrate`` writes its table into pyproject.toml: on a full disk or in a read-only
    folder it says the file, the error and the fix (not "pass a pyproject.toml you can write"),
    exits 2, and leaves pyproject.toml as it was; with space the same command writes it."""
    calibrate, error = CALIBRATE_CASES[case]
    root = labelled.path
    done = calibrate(root)
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines() == [f"slam calibrate: could not write pyproject.toml: {error}"]
    assert (root / "pyproject.toml").read_text(encoding="utf-8") == OLD_PYPROJECT
    assert [p.name for p in root.iterdir() if p.name.startswith(".")] in ([], [".slam"])
    again = labelled.run(*SLAM, *CALIBRATE)
    assert again.ret == 0, again.stderr.str()
    assert "[tool.slam.equivalence]" in (root / "pyproject.toml").read_text(encoding="utf-8")
