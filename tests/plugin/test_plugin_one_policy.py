"""One verdict policy (issue 42): a run, ``slam rescore`` and ``slam calibrate --evaluate`` decide
the same pairs the same way, because all three call ``compare/policy.decide_pair``.

The reference and the candidate are FakeOpenAI servers on loopback; the candidate's answer depends
on the prompt's kind, so each pair's fuzzy score is known: "same" is the reference's answer
(identical: "exact"), "words" its words in another case (fuzzy 1.0: the bands), "near" 0.72
(between the bands), "far" 0.05 (below the fail band), "empty" nothing at all (certain).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from html_helpers import chromium, report_data
from report_helpers import read_report
from review_helpers import slam
from slam_helpers import needs_chromium

from pytest_slam.testing import FakeOpenAI

REFERENCE = "The capital of France is Paris."
CANDIDATE = {
    "same": REFERENCE,
    "words": REFERENCE.lower(),
    "near": "Paris is the capital city of the French Republic.",
    "far": "zzzz qqqq",
    "empty": "  ",
}
TESTS = """
import pytest

@pytest.mark.slm
@pytest.mark.parametrize("kind", ["same", "words", "near", "far", "empty"])
def test_capital(slm_model, kind):
    slm_model.chat(f"Capital of France? ({kind})", max_tokens=20)
"""
BANDS = "equivalence = { at_least = 0.9, fail_below = 0.3 }\n"


def _kind(text: str) -> str:
    return text.rsplit("(", 1)[1].rstrip(")")


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(
            lambda req: CANDIDATE[_kind(req["messages"][-1]["content"])], model="cand"
        ) as candidate,
    ):
        yield reference, candidate


def _test_kind(nodeid: str) -> str:
    return nodeid.rstrip("]").rsplit("-", 1)[1]


def _by_kind(report: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    out = {}
    for outcome in report["outcomes"]:
        ((score,),) = [pair["scores"] for pair in outcome["pairs"]]
        out[_test_kind(outcome["nodeid"])] = (
            score["verdict"],
            score["decided_by"],
        )
    return out


def test_a_run_a_rescore_and_evaluate_decide_the_same_pairs_identically(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n{BANDS}"
    ))  # fmt: skip
    pytester.makepyfile(test_capital=TESTS)
    ran = pytester.runpytest(
        f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json", "--slm-record=new"
    )
    ran.assert_outcomes(passed=3, failed=2)  # near is undecided; far and empty are different
    report = read_report(pytester.path / "r.json")
    in_run = _by_kind(report)
    assert in_run == {
        "same": ("equivalent", "exact"),
        "words": ("equivalent", "bands"),
        "near": ("undecided", "bands"),
        "far": ("different", "bands"),
        "empty": ("different", "empty"),
    }
    done = slam(pytester.path, "rescore", "r.json", "-o", "new.json")
    assert done.returncode == 1, done.stdout + done.stderr
    assert _by_kind(read_report(pytester.path / "new.json")) == in_run
    # the same pairs as labels: each outcome's candidate answer and its golden answer
    kinds, rows = [], []
    for outcome in report["outcomes"]:
        (pair,) = outcome["pairs"]
        kinds.append(_test_kind(outcome["nodeid"]))
        rows.append({"candidate": outcome["calls"][pair["call_index"]]["text"],
                     "reference": pair["reference_text"], "label": True,
                     "unit": pair["key"], "module": "test_capital.py"})  # fmt: skip
    (pytester.path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    evaluated = slam(pytester.path, "calibrate", "--evaluate", "labels.jsonl", "--format", "json")
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    verdicts = json.loads(evaluated.stdout)["verdicts"]
    by_evaluate = {k: (v["verdict"], v["decided_by"]) for k, v in zip(kinds, verdicts, strict=True)}
    assert by_evaluate == in_run


EMPTY_TESTS = """
import pytest

@pytest.mark.slm
@pytest.mark.parametrize("kind", ["silent", "talks"])
def test_nothing(slm_model, kind):
    slm_model.chat(f"Say nothing ({kind})", max_tokens=20)
"""


def test_an_empty_golden_answer_is_flagged_and_decides_no_pair(pytester: pytest.Pytester) -> None:
    """The reference answered nothing: neither an empty candidate nor a talking one is called
    equivalent (two empty answers used to be "equivalent by bands"); the run's summary names the
    golden answer and the fix when it is recorded, and again when it is replayed."""
    with (
        FakeOpenAI("", model="gpt-4-0613") as reference,
        FakeOpenAI(lambda req: "" if "silent" in str(req["messages"]) else "Hello there!",
                   model="cand") as candidate,
    ):  # fmt: skip
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n{BANDS}"
        ))  # fmt: skip
        pytester.makepyfile(test_nothing=EMPTY_TESTS)
        args = (f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json")
        recorded = pytester.runpytest(*args, "--slm-record=new")
        replayed = pytester.runpytest(*args)
    for result, when in ((recorded, "recorded empty in this run"), (replayed, "empty")):
        text = " ".join(result.stdout.str().split())
        assert f"golden answer {when}: test_nothing.py::test_nothing[cand-silent] call 1" in text
        assert "pytest --slm-record=all test_nothing.py::test_nothing[cand-silent]" in text
    report = read_report(pytester.path / "r.json")
    scores = [s for o in report["outcomes"] for p in o["pairs"] for s in p["scores"]]
    assert len(scores) == 2
    for score in scores:
        assert score["verdict"] == "undecided" and score["decided_by"] is None
        assert score["why_undecided"].startswith("the golden answer is empty")


SHORT = "{ pass = 0.039, pass_upper = 0.047, n = 400, domain = { scope = 'short QA', reference_chars = [8, 20], length_ratio = [0.1, 4.0], values = [0.0, 1.0] } }"  # noqa: E501
LEGACY = "{ pass = 0.039, pass_upper = 0.047, n = 400 }"


def test_a_pair_outside_the_calibrated_domain_goes_to_the_judge_or_stays_undecided(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """Bands measured on references of 8-20 characters do not decide a pair whose reference has
    31: with no judge it stays undecided, with the reason in the report and the gate; with the
    judge in the cascade the judge decides it. A calibration without a domain (written before
    domains) still loads: its bands decide, and the summary says the domain is unknown."""
    reference, candidate = servers
    pytester.makepyfile(test_capital=TESTS)
    args = (f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json")

    def run(equivalence: str, extra: str = "") -> tuple[pytest.RunResult, dict[str, Any]]:
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n{extra}"
            f"equivalence = {equivalence}\n"
        ))  # fmt: skip
        result = pytester.runpytest(*args, "--slm-record=new")
        return result, read_report(pytester.path / "r.json")

    result, report = run(f"{{ at_least = 0.9, fail_below = 0.3, band_error = {SHORT} }}")
    verdicts = _by_kind(report)
    assert verdicts["words"] == verdicts["far"] == ("undecided", None)
    assert verdicts["same"] == ("equivalent", "exact") and verdicts["empty"][0] == "different"
    (words,) = [o["pairs"][0]["scores"][0] for o in report["outcomes"] if "words" in o["nodeid"]]
    assert words["why_undecided"] == (
        "outside what the bands were measured on (short QA): reference 31 characters; "
        "calibrated on 8-20"
    )
    text = " ".join(result.stdout.str().split())
    assert "outside the calibrated domain" in text
    with FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge:
        _, report = run(
            f'{{ at_least = 0.9, fail_below = 0.3, then = ["judge"], band_error = {SHORT} }}',
            f"judge = '{judge.base_url}#gpt-4-judge'\n",
        )
    assert _by_kind(report)["words"] == ("equivalent", "judge")
    result, report = run(f"{{ at_least = 0.9, fail_below = 0.3, band_error = {LEGACY} }}")
    assert _by_kind(report)["words"] == ("equivalent", "bands")
    text = " ".join(result.stdout.str().split())
    assert "band_error has no domain" in text and "run `slam calibrate` again" in text


def _pair_view(pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]) -> Path:
    """The HTML report of the five kinds of answer, with a measured pass error and none for fails."""
    reference, candidate = servers
    pytester.makepyfile(test_capital=TESTS)
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
        "equivalence = { at_least = 0.9, fail_below = 0.3, band_error = "
        "{ pass = 0.039, pass_upper = 0.047, domain = { reference_chars = [8, 40] } } }\n"
    ))  # fmt: skip
    pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-html=r.html",
                       "--slm-record=new")  # fmt: skip
    return pytester.path / "r.html"


def test_the_html_pair_view_shows_each_verdicts_error_or_unmeasured_and_why_undecided(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    rows, pairs = report_data(_pair_view(pytester, servers).read_text())
    beside = {_test_kind(rows["tests"][r[0]].replace("[", "-")): r[-2] for r in rows["rows"]}
    assert beside == {"same": "certain (error 0)", "words": "error 0.039 (<= 0.047)",
                      "near": "no evidence", "far": "error unmeasured",
                      "empty": "certain (error 0)"}  # fmt: skip
    shown = {(s[2], s[3]): (s[4], s[5]) for pair in pairs for s in pair[4]}
    assert shown[("equivalent", "exact")] == ("certain (error 0)", None)
    assert shown[("equivalent", "bands")] == ("error 0.039 (<= 0.047)", None)
    assert shown[("different", "bands")] == ("error unmeasured", None)  # no fail error measured
    error, why = shown[("undecided", "bands")]
    assert error is None and why.startswith("no evidence: fuzzy 0.")


@needs_chromium
def test_the_html_pair_view_renders_each_error_in_a_browser(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI], tmp_path: Path
) -> None:
    dom = chromium(f"{_pair_view(pytester, servers).as_uri()}#open=all", "--dump-dom",
                   tmp_path=tmp_path)  # fmt: skip
    assert "error 0.039 (&lt;= 0.047)" in dom and "error unmeasured" in dom
    assert "why undecided: no evidence: fuzzy 0." in dom
    assert "equivalent (error 0.039 (&lt;= 0.047))" in dom and "undecided (no evidence)" in dom


def test_the_gate_names_an_uncertified_judge_and_the_summary_counts_what_it_did(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """The judge answered every pair sent to it, but its "equivalent" is not certified: the gate
    says so (not "missing evidence: send them to the judge"), and the summary counts the pairs the
    judge was asked and left undecided."""
    reference, candidate = servers
    pytester.makepyfile(test_capital=TESTS)
    with FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge:
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            'equivalence = { at_least = 0.9, fail_below = 0.3, then = ["judge"], judge_error = '
            "{ pass = 0.2, pass_upper = 0.3, n = 50, pass_certified = false } }\n"
        ))  # fmt: skip
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    text = " ".join(result.stdout.str().split())
    assert (
        "undecided: 1 pair(s) of cand are undecided: 1 judge not certified: label more pairs"
        in text
    )
    assert "missing evidence" not in text and "send them to the judge" not in text
    assert "judge: 1 pair(s) asked" in text
    assert "0 decided at a measured error, 1 left undecided (not certified)" in text


SECRET_ANSWER = "Paris is the capital city of the French Republic. Authorization: Bearer abc123xyz"


def test_a_rescore_decides_on_the_text_the_run_decided_on_when_a_secret_was_redacted(
    pytester: pytest.Pytester,
) -> None:
    """The candidate's answer quotes an Authorization header: the report keeps it redacted. The
    judge (the cascade, the bands left it undecided) is asked about the texts as the files keep
    them, so ``slam rescore`` of the report finds its cached verdict and decides the same, where
    it said "the judge never saw this pair"; the judge is never shown the header's value."""
    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(SECRET_ANSWER, model="cand") as candidate,
        FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge,
    ):
        pytester.makefile(".toml", pyproject=(
            f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            'equivalence = { at_least = 0.9, fail_below = 0.3, then = ["judge"] }\n'
        ))  # fmt: skip
        pytester.makepyfile(test_capital=TESTS.replace('"same", "words", "near", "far", "empty"',
                                                       '"near"'))  # fmt: skip
        ran = pytester.runpytest(
            f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json", "--slm-record=new"
        )
        asked = [r.json["messages"][-1]["content"] for r in judge.requests]
    ran.assert_outcomes(passed=1)
    assert asked and not any("abc123xyz" in m for m in asked)
    report = read_report(pytester.path / "r.json")
    assert "abc123xyz" not in json.dumps(report)
    in_run = _by_kind(report)
    assert in_run == {"near": ("equivalent", "judge")}
    done = slam(pytester.path, "rescore", "r.json", "-o", "new.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _by_kind(read_report(pytester.path / "new.json")) == in_run
