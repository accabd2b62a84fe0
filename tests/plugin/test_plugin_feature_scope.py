"""Bands hold by feature (issue 50, item 1): bands and a judge's error measured on one test
module's labels decide only that module's pairs, in a run, ``slam rescore`` and ``slam calibrate
--evaluate`` alike (the one policy); another module's pair is undecided, saying why and what to do.

The reference and the candidate are FakeOpenAI servers on loopback; the candidate answers the
reference's words in lower case (fuzzy 1.0: the bands decide it, length well inside the domain),
in two modules: ``test_qa.py``, whose labels measured the bands, and ``test_chat.py``, another
feature with answers of the same length.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from report_helpers import read_report
from review_helpers import slam

from pytest_slam.testing import FakeOpenAI

REFERENCE = "The capital of France is Paris."
TESTS = """
import pytest

@pytest.mark.slm
def test_capital(slm_model):
    slm_model.chat("Capital of France?", max_tokens=20)
"""
DOMAIN = "reference_chars = [8, 40], length_ratio = [0.1, 4.0], values = [0.0, 1.0]"
MEASURED = "{{ pass = 0.039, pass_upper = 0.047, n = 400, domain = {{ {modules}{domain} }} }}"
OUTSIDE = (
    "outside the features the bands were measured on (test_qa.py); label this feature's answers "
    'or then = ["judge"]'
)


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(REFERENCE.lower(), model="cand") as candidate,
    ):
        yield reference, candidate


def _verdicts(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each module's one score."""
    return {
        o["nodeid"].split("::")[0]: o["pairs"][0]["scores"][0]
        for o in report["outcomes"]
        if o["pairs"]
    }


def _project(pytester: pytest.Pytester, reference: FakeOpenAI, band_error: str) -> None:
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
        f"equivalence = {{ at_least = 0.9, fail_below = 0.3, band_error = {band_error} }}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_qa=TESTS, test_chat=TESTS)


def test_bands_measured_on_one_feature_leave_another_features_pairs_undecided(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(
        pytester, reference, MEASURED.format(modules="modules = ['test_qa.py'], ", domain=DOMAIN)
    )
    args = (f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json")
    ran = pytester.runpytest(*args, "--slm-record=new")
    report = read_report(pytester.path / "r.json")
    verdicts = _verdicts(report)
    qa, chat = verdicts["test_qa.py"], verdicts["test_chat.py"]
    assert (qa["verdict"], qa["decided_by"], qa["error_upper"]) == ("equivalent", "bands", 0.047)
    assert (chat["verdict"], chat["decided_by"]) == ("undecided", None)
    assert chat["why_undecided"] == OUTSIDE
    text = " ".join(ran.stdout.str().split())
    assert "outside the calibrated features" in text  # the gate's cause, with its fix
    # slam rescore: the same policy, the same verdicts
    done = slam(pytester.path, "rescore", "r.json", "-o", "again.json")
    assert done.returncode == 6, done.stdout + done.stderr  # an undecided pair fails the gate
    again = _verdicts(read_report(pytester.path / "again.json"))
    assert {m: (s["verdict"], s["decided_by"]) for m, s in again.items()} == {
        m: (s["verdict"], s["decided_by"]) for m, s in verdicts.items()
    }
    # slam calibrate --evaluate: the pairs as labels, each with its module
    rows = [
        {"candidate": REFERENCE.lower(), "reference": REFERENCE, "label": True, "unit": m,
         "module": m}
        for m in ("test_qa.py", "test_chat.py")
    ]  # fmt: skip
    (pytester.path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evaluated = slam(pytester.path, "calibrate", "--evaluate", "labels.jsonl", "--format", "json")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    by_evaluate = json.loads(evaluated.stdout)["verdicts"]
    assert [(v["verdict"], v["decided_by"]) for v in by_evaluate] == [
        ("equivalent", "bands"),
        ("undecided", None),
    ]
    assert by_evaluate[1]["why_undecided"] == OUTSIDE


def test_bands_without_modules_decide_every_module_and_say_the_scope_is_unknown(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference, MEASURED.format(modules="", domain=DOMAIN))
    ran = pytester.runpytest(
        f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json", "--slm-record=new"
    )
    verdicts = _verdicts(read_report(pytester.path / "r.json"))
    assert {m: s["decided_by"] for m, s in verdicts.items()} == {
        "test_qa.py": "bands",
        "test_chat.py": "bands",
    }
    text = " ".join(ran.stdout.str().split())
    assert (
        "band_error.domain has no modules" in text and "features they hold on are unknown" in text
    )


def test_a_judges_error_measured_on_one_feature_is_not_stated_on_another(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """The judge decides both modules' pairs (no bands); its measured error is stated on the
    feature it was measured on, and the other's verdict is unmeasured."""
    reference, candidate = servers
    judge_error = (
        "{ pass = 0.02, pass_upper = 0.05, n = 300, pass_certified = true, "
        "fail_certified = true, domain = { modules = ['test_qa.py'] } }"
    )
    with FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge:
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            f"equivalence = {{ by = 'judge', judge_error = {judge_error} }}\n"
        ))  # fmt: skip
        pytester.makepyfile(test_qa=TESTS, test_chat=TESTS)
        pytester.runpytest(
            f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json", "--slm-record=new"
        )
    verdicts = _verdicts(read_report(pytester.path / "r.json"))
    qa, chat = verdicts["test_qa.py"], verdicts["test_chat.py"]
    assert (qa["verdict"], qa["decided_by"], qa["error_upper"]) == ("equivalent", "judge", 0.05)
    assert (chat["verdict"], chat["decided_by"], chat["error_upper"]) == (
        "equivalent",
        "judge",
        None,
    )
