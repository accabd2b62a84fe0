"""Audits while in use (issue 50 item 2), as a user meets them: a run sets aside a seeded sample
of each feature's band-decided pairs, ``slam review --audit`` serves exactly those and stores the
verdicts as audit labels, and the next verdicts (``slam rescore``: the run's own checks) withdraw
the bands on the feature whose audits contradict their stated error, after the three audits the
sequential test needs, while the feature whose audits agree keeps them.

The reference and the candidate are FakeOpenAI servers on loopback; the candidate answers the
reference's words in lower case (fuzzy 1.0: the bands call every pair equivalent) in two
modules, ``test_qa.py`` and ``test_chat.py``, three questions each.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from typing import Any

import pytest
from report_helpers import read_report
from review_helpers import slam

from pytest_slam.cli.review import audit_pairs, load_pairs
from pytest_slam.compare.audit import fewest_audits
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.audits import seed_of
from pytest_slam.review.server import ReviewSession
from pytest_slam.review.verdicts import read_verdicts
from pytest_slam.testing import FakeOpenAI

ANSWERS = {
    "Capital of France?": "The capital of France is Paris.",
    "Capital of Italy?": "The capital of Italy is Rome.",
    "Capital of Spain?": "The capital of Spain is Madrid.",
}
TESTS = "import pytest\n" + "".join(
    f"\n\n@pytest.mark.slm\ndef test_{n}(slm_model):\n    slm_model.chat({q!r}, max_tokens=20)\n"
    for n, q in enumerate(ANSWERS)
)
BANDS = (
    "{ at_least = 0.9, fail_below = 0.3, band_error = { pass = 0.039, pass_upper = 0.047, "
    "n = 400, domain = { modules = ['test_qa.py', 'test_chat.py'], reference_chars = [8, 40], "
    "length_ratio = [0.1, 4.0], values = [0.0, 1.0] } } }"
)


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    def answer(lower: bool) -> Any:
        def reply(req: dict[str, Any]) -> str:
            text = ANSWERS[req["messages"][-1]["content"]]
            return text.lower() if lower else text

        return reply

    with (
        FakeOpenAI(answer(False), model="gpt-4-0613") as reference,
        FakeOpenAI(answer(True), model="cand") as candidate,
    ):
        yield reference, candidate


def _by_module(report: dict[str, Any]) -> dict[str, set[tuple[str, str | None]]]:
    out: dict[str, set[tuple[str, str | None]]] = {}
    for o in report["outcomes"]:
        for p in o["pairs"]:
            s = p["scores"][0]
            out.setdefault(o["nodeid"].split("::")[0], set()).add((s["verdict"], s["decided_by"]))
    return out


def test_audits_withdraw_the_bands_they_contradict_after_three_and_keep_the_rest(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\naudit_per_feature = 3\n"
        f"equivalence = {BANDS}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_qa=TESTS, test_chat=TESTS)
    ran = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json",
                             "--slm-record=new")  # fmt: skip
    report = load_report(pytester.path / "r.json")
    seed = seed_of(report.verdict.run.started)
    text = " ".join(ran.stdout.str().split())
    assert (
        f"audits: 6 pair(s) set aside for review, at most 3 per feature of 2 feature(s) decided "
        f"by bands or the judge (seed {seed}): review them blind with `slam review --audit`"
    ) in text
    assert _by_module(read_report(pytester.path / "r.json")) == {
        "test_qa.py": {("equivalent", "bands")},
        "test_chat.py": {("equivalent", "bands")},
    }

    # slam review --audit: exactly the pairs set aside, each verdict kept as an audit label
    args = argparse.Namespace(root=pytester.path / "__slam__", reference="gpt-4")
    store, pairs, _ = load_pairs(args, report)
    todo = audit_pairs("r.json", report, pairs)
    assert sorted(p.module for p in todo) == ["test_chat.py"] * 3 + ["test_qa.py"] * 3
    session = ReviewSession(store, todo, "ana", audit=True)
    qa = [p for p in todo if p.module == "test_qa.py"]
    for p in todo:  # test_chat's answers are fine; test_qa's are not (a changed feature)
        if p.module == "test_chat.py":
            session.record({"id": p.id, "choice": "tie", "note": ""})
    for p in qa[: fewest_audits(0.047) - 1]:  # two errors: not yet enough to withdraw
        session.record({"id": p.id, "choice": "a" if not p.candidate_is_a else "b", "note": ""})
    saved = read_verdicts(pytester.path / "__slam__/gpt-4/test_qa.review.jsonl")
    assert [(v.verdict, v.audited_by, v.audited_verdict, v.audited_upper) for v in saved] == [
        ("loss", "band_error", "equivalent", "0.0470")
    ] * 2

    done = slam(pytester.path, "rescore", "r.json", "-o", "two.json")
    assert done.returncode == 0, done.stdout + done.stderr
    two = _by_module(read_report(pytester.path / "two.json"))
    assert two["test_qa.py"] == {("equivalent", "bands")}  # 2 errors in 2: the bound stays

    last = qa[fewest_audits(0.047) - 1]
    session.record({"id": last.id, "choice": "a" if not last.candidate_is_a else "b", "note": ""})
    done = slam(pytester.path, "rescore", "r.json", "-o", "three.json")
    assert done.returncode == 6, done.stdout + done.stderr  # undecided pairs fail the gate
    three = read_report(pytester.path / "three.json")
    assert _by_module(three) == {
        "test_qa.py": {("undecided", None)},  # withdrawn after the third error
        "test_chat.py": {("equivalent", "bands")},  # three audits agreed: the bands stay
    }
    why = next(
        p["scores"][0]["why_undecided"]
        for o in three["outcomes"]
        if o["nodeid"].startswith("test_qa.py")
        for p in o["pairs"]
    )
    assert why.startswith(
        "withdrawn by audits: the bands' equivalent verdicts on this feature: audits found 3 "
        "error(s) in 3, stated error 0.039 (<= 0.047)"
    )
    assert "recalibrate with the audit labels" in why
    assert three["models"][0]["undecided_causes"] == {"withdrawn by audits": 3}
    # slam calibrate --evaluate counts the audits like any labels: the bands' 3 errors in 6
    evaluated = slam(pytester.path, "calibrate", "--evaluate", "--report", "r.json",
                     "--format", "json")  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    bands = json.loads(evaluated.stdout)["evidence"]["bands"]["pass_error"]
    assert (bands["wrong"], bands["of"]) == (3, 6)


def test_audit_on_a_run_that_set_none_aside_is_one_line_and_writes_nothing(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\nequivalence = {BANDS}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_qa=TESTS)
    pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json",
                       "--slm-record=new")  # fmt: skip
    done = slam(pytester.path, "review", "--audit", "--report", "r.json", "--no-browser")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "slam review: the run in r.json set no pairs aside for audit ([tool.slam] "
        "audit_per_feature is 0); set audit_per_feature = 2 (pairs per feature) and run the "
        "tests again"
    ]
    assert not list(pytester.path.rglob("*.review.jsonl"))
