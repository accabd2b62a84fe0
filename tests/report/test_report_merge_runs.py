"""Shards bound to one run: every shard's signed ``visits`` carry the run's identity
(run/workers/runid.py), so ``slam report merge`` refuses a shard of another run in one line; and a merge
that let an unsigned shard in keeps that inside what it signs, so merging its output again still
says so.

Real pytest runs (pytester) of the merge suite's product (merge_helpers.py) against FakeOpenAI
servers on loopback; the ``slam`` command runs as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from merge_helpers import project
from patience import patient

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.run.workers.runid import run_identity
from pytest_slam.testing import FakeOpenAI

KEY = "test-report-merge-runs-key"


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def slam(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_slam.cli", *args]
    return subprocess.run(
        argv, cwd=pytester.path, capture_output=True, text=True, timeout=patient(300)
    )


def visits(pytester: pytest.Pytester, name: str) -> dict[str, Any]:
    return json.loads((pytester.path / name).read_text(encoding="utf-8"))["visits"]


@pytest.fixture
def recorded(
    pytester: pytest.Pytester,
    fake_gpt4: Any,
    candidates: tuple[FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> pytest.Pytester:
    """The suite recorded, a shard key in the environment (as CI gives the shard jobs)."""
    project(pytester, fake_gpt4, candidates[:1], cases=1)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    monkeypatch.setenv("SLAM_SHARD_KEY", KEY)
    return pytester


def test_shards_of_two_runs_are_refused_in_one_line(
    recorded: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLAM_RUN_ID", "monday")
    run(recorded, "--slm-report=old.json", "-k", "not alpha").assert_outcomes(passed=2)
    monkeypatch.setenv("SLAM_RUN_ID", "tuesday")
    run(recorded, "--slm-report=a.json", "-k", "alpha").assert_outcomes(passed=1)
    run(recorded, "--slm-report=b.json", "-k", "not alpha").assert_outcomes(passed=2)
    assert visits(recorded, "a.json")["run"] == visits(recorded, "b.json")["run"] == "slam:tuesday"

    refused = slam(recorded, "report", "merge", "a.json", "old.json", "-o", "merged.json")
    assert refused.returncode == 2, refused.stdout
    assert refused.stderr == (
        "slam report merge: old.json is a shard of another run than a.json (run slam:monday, not "
        "slam:tuesday); merge only the reports of one run's shards (give its shards one "
        "SLAM_RUN_ID where the CI has no run id)\n"
    )
    assert not (recorded.path / "merged.json").exists()

    merged = slam(recorded, "report", "merge", "a.json", "b.json", "-o", "merged.json")
    assert merged.returncode == EXIT_GATE_FAILED, merged.stderr  # merged: mini fails its gate
    assert visits(recorded, "merged.json")["run"] == "slam:tuesday"


def test_a_run_is_named_by_its_ci_else_its_commit(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("SLAM_RUN_ID", "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILDKITE_BUILD_ID",
                 "CIRCLE_WORKFLOW_ID", "BUILD_BUILDID", "BUILD_TAG"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    assert run_identity(pytester.path) is None  # no CI, not a git checkout
    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
         "-m", "x"], cwd=pytester.path, check=True,
    )  # fmt: skip
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=pytester.path, capture_output=True, text=True
    ).stdout.strip()
    assert run_identity(pytester.path) == f"commit:{head}"
    monkeypatch.setenv("CI_PIPELINE_ID", "4711")
    assert run_identity(pytester.path) == "gitlab:4711"
    monkeypatch.setenv("GITHUB_RUN_ID", "9876543")
    assert run_identity(pytester.path) == "github:9876543"
    monkeypatch.setenv("SLAM_RUN_ID", "nonce-1")
    assert run_identity(pytester.path) == "slam:nonce-1"


def test_a_merge_of_an_unsigned_merge_still_says_unverified(
    recorded: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLAM_RUN_ID", "one")
    run(recorded, "--slm-report=a.json", "-k", "alpha").assert_outcomes(passed=1)
    monkeypatch.delenv("SLAM_SHARD_KEY")  # a fork's job: no key, its report unsigned
    run(recorded, "--slm-report=b.json", "-k", "not alpha").assert_outcomes(passed=2)
    monkeypatch.setenv("SLAM_SHARD_KEY", KEY)  # the merge job has it, and signs its output

    first = slam(recorded, "report", "merge", "a.json", "b.json", "--unsigned", "-o", "m1.json")
    assert first.returncode == EXIT_GATE_FAILED, first.stderr  # merged
    note = "merged with --unsigned: 1 shard(s) not verified by a signature (b.json)"
    assert note in first.stdout

    again = slam(recorded, "report", "merge", "m1.json", "-o", "m2.json")  # no --unsigned
    assert again.returncode == EXIT_GATE_FAILED, again.stderr
    assert note in again.stdout
    report = json.loads((recorded.path / "m2.json").read_text(encoding="utf-8"))
    assert report["visits"]["unverified"] == ["b.json"]
    assert any(n.startswith(note) for n in report["notes"])

    doc = json.loads((recorded.path / "m1.json").read_text(encoding="utf-8"))
    doc["visits"]["unverified"] = []  # the mark removed: the signature no longer matches
    (recorded.path / "m1-cleaned.json").write_text(json.dumps(doc), encoding="utf-8")
    cleaned = slam(recorded, "report", "merge", "m1-cleaned.json", "-o", "m3.json")
    assert cleaned.returncode == 2 and "was changed after it was written" in cleaned.stderr
