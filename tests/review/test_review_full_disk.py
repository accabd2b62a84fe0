"""`slam review` on a full disk and with a read-only golden folder (disk_helpers.py): a verdict the
server cannot save is one line naming the review file, the error and the fix (on the page and on
stderr), the review file is as it was, the pair stays to review, the session exits 2; the next
session, with space, saves it. The labels export is the same one line, exit 2."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from disk_helpers import (
    READ_ONLY_FS,
    SLAM,
    TOO_LARGE,
    files_under,
    needs_read_only_mount,
    no_traceback,
    run_full,
    start_full,
    start_read_only,
)
from patience import patient
from review_helpers import http, make_project, review_server

from pytest_slam.cli import main
from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import collect
from pytest_slam.review.verdicts import make_verdict, read_verdicts, save_verdicts

REVIEW_FILE = "__slam__/gpt-4/test_product.review.jsonl"


def ids(page: str) -> list[str]:
    return re.findall(r'<section class="pair" data-id="([0-9a-f]+)"', page)


@pytest.fixture
def reviewed(pytester: pytest.Pytester) -> Path:
    """A recorded project whose review file holds one verdict (ana's): the file a failed save
    must leave as it was."""
    project = make_project(pytester)
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs, _ = collect(load_report(project / "slam-report.json").outcomes, store)
    first = pairs[0]
    verdict = make_verdict(key=first.key, model=first.model, answer_hash=first.answer_hash,
                           reference_hash=first.reference_hash, verdict="tie", reviewer="ana")  # fmt: skip
    save_verdicts(store, first.module, [verdict])
    return project


def _full(project: Path, argv: list[str]) -> subprocess.Popen[str]:
    return start_full(argv, project, limit=100)


def _read_only(project: Path, argv: list[str]) -> subprocess.Popen[str]:
    return start_read_only(argv, project, [project / "__slam__"])


STARTS: dict[str, tuple[Callable[[Path, list[str]], subprocess.Popen[str]], str]] = {
    "full disk": (_full, TOO_LARGE),
    "read-only golden folder": (_read_only, READ_ONLY_FS),
}
CASES = [
    pytest.param("full disk"),
    pytest.param("read-only golden folder", marks=needs_read_only_mount),
]


@pytest.mark.parametrize("case", CASES)
def test_a_verdict_the_server_cannot_save_is_one_line_and_the_next_session_saves_it(
    reviewed: Path, case: str
) -> None:
    start, error = STARTS[case]
    before = files_under(reviewed / "__slam__")
    line = f"could not write {REVIEW_FILE}: {error}"
    server = start(reviewed, [*SLAM, "review", "--no-browser", "--reviewer", "ben"])
    try:
        shown = server.stdout.readline()  # type: ignore[union-attr]
        assert "http://127.0.0.1:" in shown, shown + server.stderr.read()  # type: ignore[union-attr]
        address = shown.split(" open ", 1)[1].split()[0]
        pair = ids(http(address)[1])[0]
        status, body = http(address + "verdict", {"id": pair, "choice": "a", "note": ""})
        assert (status, body) == (500, '{"error": "not saved: ' + line + '"}')
        assert pair in ids(http(address)[1])  # still to review
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C, as the reviewer ends a session
        out, err = server.communicate(timeout=patient(30))
    no_traceback(subprocess.CompletedProcess([], server.returncode, out, err))
    assert err.splitlines() == [
        f"slam review: {line}",
        "slam review: 0 verdict(s) saved beside the goldens in __slam__/gpt-4; 1 not saved "
        "(the review file could not be written, said above): fix that and review them again "
        "with `slam review`",
    ]
    assert server.returncode == 2  # the session is incomplete
    assert files_under(reviewed / "__slam__") == before

    with review_server(reviewed, "--reviewer", "ben") as again:  # with space: nothing by hand
        assert pair in ids(http(again)[1])
        assert http(again + "verdict", {"id": pair, "choice": "a", "note": ""})[0] == 200
    assert sorted(v.reviewer for v in read_verdicts(reviewed / REVIEW_FILE)) == ["ana", "ben"]


def test_labels_exported_on_a_full_disk_are_one_line_and_the_old_file_kept(
    reviewed: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = reviewed / "labels.jsonl"
    labels.write_text('{"old": true}\n', encoding="utf-8")
    argv = [*SLAM, "review", "--export-labels", "labels.jsonl"]
    full = run_full(argv, reviewed, limit=100)
    no_traceback(full)
    assert full.returncode == 2, full.stdout + full.stderr
    assert full.stderr.splitlines() == [f"slam review: could not write labels.jsonl: {TOO_LARGE}"]
    assert labels.read_text(encoding="utf-8") == '{"old": true}\n'
    monkeypatch.chdir(reviewed)  # with space, the same command
    assert main(argv[len(SLAM) :]) == 0
    assert '"label"' in labels.read_text(encoding="utf-8")
