"""Goldens follow a swap: ``slam golden promote MODEL --report RUN.json`` on real runs.

The product's suite runs under pytester with the GPT-4 reference and the candidate as FakeOpenAI
servers on loopback; the candidate answers unlike GPT-4. After the promote, a replay run (the
reference never called) compares the same candidate with its own answers: equivalence 1.0. The
answers replaced are kept as a baseline, and the undo command the promote printed, run as printed,
gives the golden file back byte for byte.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from slam_helpers import MINI_PYPROJECT, PRODUCT, REPORTED_TESTS, SLAM

from pytest_slam.golden.store import GoldenStore
from pytest_slam.testing import FakeOpenAI

PYPROJECT = MINI_PYPROJECT
MINI = "Mini says: "


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpt4: Any) -> Any:
    """A product suite opted in; the candidate answers every question its own way."""
    with FakeOpenAI(lambda req: MINI + req["messages"][-1]["content"].upper(),
                    model="gpt-4o-mini-2024-07-18") as candidate:  # fmt: skip
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        pytester.makefile(".toml", pyproject=PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        yield pytester, fake_gpt4


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def equivalence(pytester: pytest.Pytester, report: str) -> float:
    data = json.loads((pytester.path / report).read_text(encoding="utf-8"))
    return float(data["models"][0]["equivalence_mean"])


def golden_file(pytester: pytest.Pytester) -> Path:
    return pytester.path / "__slam__" / "gpt-4" / "test_product.json"


def test_promote_makes_the_candidate_the_reference_and_undo_restores(project) -> None:
    pytester, gpt4 = project
    recorded = run(pytester, "--slm-record=new", "--slm-report=run.json")
    assert recorded.ret == 0, recorded.stdout.str()
    assert equivalence(pytester, "run.json") < 0.9
    before = golden_file(pytester).read_bytes()
    calls_to_gpt4 = len(gpt4.requests)

    promoted = pytester.run(*SLAM, "golden", "promote", "mini", "--report", "run.json")
    assert promoted.ret == 0, promoted.stderr.str()
    out = promoted.stdout.lines
    assert out[-2] == "2 golden entries of 'gpt-4' now hold mini's answers, 0 already did"
    assert "undo with: slam golden unpromote gpt-4@" in out[-1]
    undo = out[-1].split("undo with: ", 1)[1]

    # The golden file now holds the candidate's answers for the same keys.
    store = GoldenStore(pytester.path / "__slam__", "gpt-4")
    entries = store.load("test_product.py").entries
    assert len(entries) == 2
    assert all(rec.answers[0].text.startswith(MINI) for rec in entries.values())
    assert {rec.answers[0].model for rec in entries.values()} == {"gpt-4o-mini-2024-07-18"}

    replay = run(pytester, "--slm-report=replay.json")
    assert replay.ret == 0, replay.stdout.str()
    assert equivalence(pytester, "replay.json") == 1.0
    assert len(gpt4.requests) == calls_to_gpt4  # a replay: the reference was never asked

    # The old answers are kept under the baseline's name, readable as a golden store.
    name = shlex.split(undo)[3]
    old = GoldenStore(pytester.path / "__slam__", name).load("test_product.py").entries
    assert set(old) == set(entries)
    assert all(rec.answers[0].text.startswith("GPT-4 says: ") for rec in old.values())

    printed = shlex.split(undo)
    assert printed[0] == "slam"  # the command as printed, run by this interpreter's slam
    undone = pytester.run(*SLAM, *printed[1:])
    assert undone.ret == 0, undone.stderr.str()
    assert undone.stdout.lines[-1].startswith("restored 2 golden entries of 'gpt-4' from baseline")
    assert golden_file(pytester).read_bytes() == before
    assert not GoldenStore(pytester.path / "__slam__", name).dir.exists()
    again = run(pytester, "--slm-report=again.json")
    assert again.ret == 0 and equivalence(pytester, "again.json") < 0.9


def test_dry_run_lists_and_changes_nothing(project) -> None:
    pytester, _ = project
    assert run(pytester, "--slm-record=new", "--slm-report=run.json").ret == 0
    before = golden_file(pytester).read_bytes()
    dry = pytester.run(*SLAM, "golden", "promote", "mini", "--report", "run.json", "--dry-run")
    assert dry.ret == 0
    assert sum(line.startswith("would promote test_product.py ") for line in dry.stdout.lines) == 2
    assert dry.stdout.lines[-1] == (
        "2 golden entries of 'gpt-4' would take mini's answers, 0 already did"
    )
    assert golden_file(pytester).read_bytes() == before
    assert sorted(p.name for p in (pytester.path / "__slam__").iterdir()) == ["gpt-4"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nobody", "--report", "run.json"],
         "slam golden: run.json has no answers of 'nobody'. Fix: name one of its candidates: mini"),
        (["mini", "--report", "nope.json"], "slam golden: pytest-slam report not found: nope.json*"),
        (["mini", "--report", "run.json", "--baseline", "gpt-4"],
         "slam golden: *gpt-4 exists already. Fix: pass --baseline a new name"),
        (["mini", "--report", "run.json", "--reference", "openai:gpt-4o"],
         "slam golden: run.json was run against *#gpt-4', not 'openai:gpt-4o'. Fix: leave out *"),
    ],
)  # fmt: skip
def test_bad_inputs_are_one_line_exit_2_nothing_written(project, args, said) -> None:
    pytester, _ = project
    assert run(pytester, "--slm-record=new", "--slm-report=run.json").ret == 0
    before = golden_file(pytester).read_bytes()
    result = pytester.run(*SLAM, "golden", "promote", *args)
    assert result.ret == 2
    assert len(result.stderr.lines) == 1 and "Traceback" not in result.stderr.str()
    result.stderr.fnmatch_lines([said])
    assert golden_file(pytester).read_bytes() == before
    assert sorted(p.name for p in (pytester.path / "__slam__").iterdir()) == ["gpt-4"]


def test_unpromote_of_an_unknown_baseline_is_one_line(project) -> None:
    pytester, _ = project
    result = pytester.run(*SLAM, "golden", "unpromote", "gpt-4@never")
    assert result.ret == 2 and len(result.stderr.lines) == 1
    result.stderr.fnmatch_lines(["slam golden: *: no baseline named 'gpt-4@never'. Fix: *"])


def test_a_report_of_a_run_that_did_not_finish_is_refused(project) -> None:
    """An interrupted run's answers are a part of the suite: promoting them would mix two
    references in the goldens, so promote refuses, as prune does."""
    pytester, _ = project
    assert run(pytester, "--slm-record=new", "--slm-report=run.json").ret == 0
    report = json.loads((pytester.path / "run.json").read_text())
    report["gate"].update(status="incomplete", incomplete="the run was interrupted")
    (pytester.path / "run.json").write_text(json.dumps(report))
    before = golden_file(pytester).read_bytes()
    result = pytester.run(*SLAM, "golden", "promote", "mini", "--report", "run.json")
    assert result.ret == 2 and len(result.stderr.lines) == 1
    result.stderr.fnmatch_lines(["slam golden: run.json is from a run that did not finish (the run "
                                 "was interrupted)*Fix: run the suite to its end*"])  # fmt: skip
    assert golden_file(pytester).read_bytes() == before
    assert sorted(p.name for p in (pytester.path / "__slam__").iterdir()) == ["gpt-4"]
