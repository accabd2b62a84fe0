"""Sharded runs, one verdict: shards' JSON reports merged by ``slam report merge`` equal the whole
run, and ``slam golden prune --from-report`` judges stale entries across shards only when every
shard ran to its end and together they ran the suite.

Real pytest runs (pytester) of a product suite whose reference and two candidates are FakeOpenAI
servers on loopback; the ``slam`` command runs as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from merge_helpers import MODULES, SUITE, project, rows
from patience import patient

from pytest_slam.report.aggregate import latency_calls
from pytest_slam.report.jsonreport import load_report
from pytest_slam.report.seal import digest_of
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI


@pytest.fixture(autouse=True)
def shard_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key every shard's run signs its report with and the merge verifies (as CI holds it)."""
    monkeypatch.setenv("SLAM_SHARD_KEY", "test-report-merge-shard-key")


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def slam(pytester: pytest.Pytester, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pytest_slam.cli", *args]
    return subprocess.run(
        argv, cwd=pytester.path, capture_output=True, text=True, timeout=patient(300)
    )


def node_ids(cases: int) -> list[str]:
    return [
        f"test_{m}.py::test_case[{model}-{n}]"
        for m in MODULES
        for n in range(cases)
        for model in ("mini", "twin")
    ]


def test_three_shards_merge_into_the_whole_runs_verdict_and_gate(
    pytester: pytest.Pytester, fake_gpt4: Any, candidates: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    cases = 41  # 123 cases, 2 candidates: 246 tests
    project(pytester, fake_gpt4, candidates, cases)
    run(pytester, "--slm-record=new").assert_outcomes(passed=2 * 3 * cases)
    whole = run(pytester, "--slm-report=whole.json")
    whole.assert_outcomes(passed=2 * 3 * cases)
    assert whole.ret == EXIT_GATE_FAILED  # the tests passed, mini's equivalence did not

    ids = node_ids(cases)
    shards = [ids[i::3] for i in range(3)]  # plain node-id selection, every module in every shard
    for i, shard in enumerate(shards):
        result = run(pytester, f"--slm-report=shard{i}.json", *shard)
        result.assert_outcomes(passed=len(shard))
    merged = slam(pytester, "report", "merge", "shard0.json", "shard1.json", "shard2.json",
                  "-o", "merged.json", "--html", "merged.html", "--markdown", "merged.md",
                  "--junit", "merged.xml")  # fmt: skip

    assert merged.returncode == whole.ret, merged.stderr
    assert "gate: FAIL" in merged.stdout
    assert f"exit status {EXIT_GATE_FAILED}: the tests passed, the gate did not pass" in (
        merged.stdout
    )
    got, want = rows(pytester.path / "merged.json"), rows(pytester.path / "whole.json")
    assert list(got) == ["mini", "twin"]
    assert got == want  # counts, pass rates, mean equivalence, intervals, verdicts, the gate
    assert got["mini"]["tests_passed"] == 3 * cases and got["mini"]["gate"] == "FAIL"
    assert got["twin"]["equivalence_mean"] == 1.0 and got["twin"]["gate"] == "PASS"

    report = load_report(pytester.path / "merged.json")
    for model in ("mini", "twin"):
        measured = [
            c
            for i in range(3)
            for o in load_report(pytester.path / f"shard{i}.json").outcomes
            if o.model == model
            for c in latency_calls(o.candidate_calls())
        ]
        assert len(measured) == 3 * cases
        # the latency a user meets: the calls each shard sent alone (swap/limits.py), its first
        samples = [c.e2e_ms for c in measured if c.alone]
        row = report.verdict.row(model)
        assert row is not None and row.latency_samples == len(samples) == 3
        assert row.e2e_p95_ms == pytest.approx(float(np.percentile(samples, 95)), rel=1e-12)
    assert report.verdict.gate is not None and report.verdict.gate.status == "failed"
    assert report.visits is not None and report.visits.complete
    assert report.visits.shards == ["shard0.json", "shard1.json", "shard2.json"]
    assert set(report.visits.selected) == set(ids) and not report.visits.missing()
    assert (pytester.path / "merged.html").read_text(encoding="utf-8").startswith("<!")
    assert "| mini |" in (pytester.path / "merged.md").read_text(encoding="utf-8")
    junit = (pytester.path / "merged.xml").read_text(encoding="utf-8")
    assert f'tests="{len(ids)}" failures="0"' in junit
    assert 'classname="test_alpha" name="test_case[mini-0]"' in junit


# Selects a shard as pytest-split does: it slices the collected items, calling no pytest_deselected.
SLICER = """
import os

def pytest_collection_modifyitems(config, items):
    shard = os.environ.get("SHARD")
    if shard:
        items[:] = [item for item in items if shard in item.nodeid]
"""


def gamma_golden(pytester: pytest.Pytester) -> Path:
    return pytester.path / "__slam__" / "gpt-4" / "test_gamma.json"


def test_prune_from_merged_shards_removes_only_stale_and_refuses_missing_or_cut_shards(
    pytester: pytest.Pytester,
    fake_gpt4: Any,
    candidates: tuple[FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    project(pytester, fake_gpt4, candidates[:1], cases=5)
    pytester.makeconftest(SLICER)
    run(pytester, "--slm-record=new").assert_outcomes(passed=15)
    pytester.makepyfile(test_gamma=SUITE.format(cases=4, module="gamma"))  # case 4 removed
    for module in MODULES:  # each shard collects the whole suite, then runs its slice
        monkeypatch.setenv("SHARD", module)
        run(pytester, f"--slm-report={module}.json").assert_outcomes(
            passed=5 if module != "gamma" else 4
        )
    golden = gamma_golden(pytester).read_bytes()

    part = slam(pytester, "report", "merge", "alpha.json", "beta.json", "-o", "part.json")
    assert part.returncode == 2, part.stderr  # part of the suite: the verdict is not the suite's
    assert "INCOMPLETE" in part.stdout and "4 collected test(s) ran in no shard" in part.stdout
    refused = slam(pytester, "golden", "prune", "--from-report", "part.json")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert (
        "refusing to prune: part.json is not a complete run (4 collected test(s) ran in no shard "
        "(first: test_gamma.py::test_case[mini-0]): a shard is missing" in refused.stderr
    )
    assert gamma_golden(pytester).read_bytes() == golden

    monkeypatch.setenv("SLAM_INTERRUPT_AT", "gamma-2")
    cut = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--slm-report=gamma-cut.json")
    assert cut.ret == pytest.ExitCode.INTERRUPTED
    monkeypatch.delenv("SLAM_INTERRUPT_AT")
    shards = ("alpha.json", "beta.json", "gamma-cut.json")
    merged = slam(pytester, "report", "merge", *shards, "-o", "cut.json")
    assert merged.returncode == pytest.ExitCode.INTERRUPTED, merged.stderr
    assert "gate: INCOMPLETE (shard gamma-cut.json: the run was interrupted)" in merged.stdout
    refused = slam(pytester, "golden", "prune", "--from-report", "cut.json")
    assert refused.returncode == 2
    assert refused.stderr == (
        "slam golden: refusing to prune: cut.json is not a complete run (shard gamma-cut.json: "
        "the run was interrupted). Fix: run every shard to its end and merge all of them "
        "(slam report merge SHARD.json... -o RUN.json)\n"
    )
    assert gamma_golden(pytester).read_bytes() == golden

    whole = slam(pytester, "report", "merge", "alpha.json", "beta.json", "gamma.json",
                 "-o", "all.json")  # fmt: skip
    assert whole.returncode == EXIT_GATE_FAILED, whole.stderr
    pruned = slam(pytester, "golden", "prune", "--from-report", "all.json")
    assert pruned.returncode == 0, pruned.stderr
    (removed,) = [line for line in pruned.stdout.splitlines() if line.startswith("remove ")]
    assert removed.startswith("remove test_gamma.py ")
    assert removed.endswith("(recorded for test_gamma.py::test_case[4])")  # the removed case
    assert len(json.loads(gamma_golden(pytester).read_text())["entries"]) == 4
    again = slam(pytester, "golden", "prune", "--from-report", "all.json")
    assert again.returncode == 0 and "nothing to prune" in again.stdout


def test_merge_refuses_overlapping_foreign_and_mismatched_shards_in_one_line(
    pytester: pytest.Pytester, fake_gpt4: Any, candidates: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    project(pytester, fake_gpt4, candidates[:1], cases=2)
    run(pytester, "--slm-record=new", "--slm-report=a.json", "-k", "alpha").assert_outcomes(
        passed=2
    )
    run(pytester, "--slm-record=new", "--slm-report=b.json", "-k", "beta").assert_outcomes(passed=2)
    doc = json.loads((pytester.path / "b.json").read_text(encoding="utf-8"))
    doc["run"]["settings"]["samples"] = 3
    (pytester.path / "other-settings.json").write_text(json.dumps(doc), encoding="utf-8")
    doc = json.loads((pytester.path / "b.json").read_text(encoding="utf-8"))
    doc["schema"] = "pytest-slam/report/4"
    (pytester.path / "newer.json").write_text(json.dumps(doc), encoding="utf-8")
    (pytester.path / "notes.txt").write_text("not a report\n", encoding="utf-8")
    shard_b = json.loads((pytester.path / "b.json").read_text(encoding="utf-8"))
    claims = {
        **shard_b,
        "visits": {**shard_b["visits"], "selected": shard_b["visits"]["collected"]},
    }
    invented = [{**shard_b["outcomes"][0], "nodeid": f"test_beta.py::test_made_up[{n}]",
                 "test": f"test_beta.py::test_made_up[{n}]"} for n in range(100)]  # fmt: skip
    faked = {**shard_b, "outcomes": shard_b["outcomes"] + invented}
    outside = {**shard_b, "visits": {**shard_b["visits"], "selected": ["test_x.py::test_new"]}}
    flipped = {**shard_b, "outcomes": [{**o, "outcome": "failed"} for o in shard_b["outcomes"]]}
    tampered = {  # what each edit of b.json leaves, its digest as written, recomputed or gone
        "claims.json": claims,  # selected claims every collected test: 4 of 6 never ran
        "invented.json": faked,  # 100 invented outcomes
        "invented-resealed.json": {**faked, "digest": digest_of(faked["visits"], faked["outcomes"])},
        "outside-resealed.json": {**outside, "digest": digest_of(outside["visits"], outside["outcomes"])},
        "unsealed.json": {k: v for k, v in shard_b.items() if k != "digest"},
        # a forger's edit with its digest recomputed: only the signature (the key) tells
        "flipped-resealed.json": {**flipped, "digest": digest_of(flipped["visits"], flipped["outcomes"])},
        "unsigned.json": {**shard_b, "signature": None},  # a run that had no key
    }  # fmt: skip
    for name, doc in tampered.items():
        (pytester.path / name).write_text(json.dumps(doc), encoding="utf-8")

    cases = {
        "a.json": "a.json and a.json both ran test_alpha.py::test_case[mini-0] (overlapping "
        "shards); give each test to one shard, or merge only one of these files",
        "other-settings.json": "other-settings.json is not a shard of the same run as a.json: "
        "run.settings.samples is 3, not 1; run every shard with the same pyproject.toml",
        "newer.json": "newer.json uses the newer schema pytest-slam/report/4",
        "notes.txt": "notes.txt is not a pytest-slam JSON report: not valid JSON",
        "claims.json": "claims.json was changed after it was written: its outcomes or visits do "
        "not match its digest; pass the file --slm-report wrote, unchanged, or run it again",
        "invented.json": "invented.json was changed after it was written",
        "invented-resealed.json": "invented-resealed.json holds 100 outcome(s) of tests it did not "
        "select (first: test_beta.py::test_made_up[0]); pass the report the shard's run wrote",
        "outside-resealed.json": "outside-resealed.json selected 1 test(s) it did not collect "
        "(first: test_x.py::test_new)",
        "unsealed.json": "unsealed.json carries no digest of its outcomes (written by an older "
        "pytest-slam, or edited)",
        "flipped-resealed.json": "flipped-resealed.json: its signature does not match the shard "
        "key: it was changed after its run signed it, or signed with another key",
        "unsigned.json": "unsigned.json carries no signature (its run had no shard key); give "
        "every shard's job the shard key (SLAM_SHARD_KEY",
    }
    for second, said in cases.items():
        alone = [] if second in tampered else ["a.json"]  # a tampered shard is refused alone too
        result = slam(pytester, "report", "merge", *alone, second, "-o", "merged.json")
        assert result.returncode == 2, (second, result.stdout)
        assert result.stderr.startswith(f"slam report merge: {said}"), result.stderr
        assert result.stderr.count("\n") == 1 and not (pytester.path / "merged.json").exists()
    ok = slam(pytester, "report", "merge", "a.json", "b.json", "-o", "merged.json")
    assert ok.returncode == 2, ok.stderr  # written, but gamma ran in neither: INCOMPLETE
    assert "ran in no shard (first: test_gamma.py::" in ok.stdout
    assert rows(pytester.path / "merged.json")["mini"]["tests_passed"] == 4


def test_an_xdist_runs_visits_are_its_workers_together(
    pytester: pytest.Pytester, fake_gpt4: Any, candidates: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """The controller collects nothing: what the workers collected, ran and asked for is reported."""
    project(pytester, fake_gpt4, candidates[:1], cases=3)
    run(pytester, "--slm-record=new").assert_outcomes(passed=9)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2", "-k", "not gamma",
                                           "--slm-report=xdist.json")  # fmt: skip
    result.assert_outcomes(passed=6)
    visits = load_report(pytester.path / "xdist.json").visits
    assert visits is not None and visits.complete and visits.partial is None
    assert len(visits.collected) == 9 and len(visits.selected) == 6
    assert [n for n in visits.collected if n not in visits.selected] == [
        f"test_gamma.py::test_case[mini-{n}]" for n in range(3)
    ]
    assert sorted(visits.visited) == visits.modules == ["test_alpha.py", "test_beta.py"]
    assert all(len(keys) == 3 for keys in visits.visited.values())
    assert visits.exitstatus == 0 and visits.failed_tests == []
