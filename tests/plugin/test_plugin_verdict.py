"""The three-way verdict in real pytest sessions: no verdict without configuration, structural
comparison of JSON output by default, calibrated bands with the judge and the review queue as the
cascade for undecided pairs, the gate on undecided pairs, scopes, and ``slam rescore``.

The reference (GPT-4), the candidate and the judge are FakeOpenAI servers on loopback: hosted
models, and the candidate's answers must be fixed so that the scores (fuzzy token_sort) are known:
"same" scores 1.0, "near" 0.72 and "far" 0.05 against the reference's answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from html_helpers import report_data
from report_helpers import read_report
from review_helpers import slam
from slam_helpers import said

from pytest_slam.golden.store import GoldenStore
from pytest_slam.review.pairs import answer_text, text_hash
from pytest_slam.review.verdicts import make_verdict, save_verdicts
from pytest_slam.testing import FakeOpenAI

REFERENCE = "The capital of France is Paris."
CANDIDATE = {
    "same": REFERENCE,
    "near": "Paris is the capital city of the French Republic.",  # fuzzy 0.72
    "far": "zzzz qqqq",  # fuzzy 0.05
}
TESTS = """
import pytest

@pytest.mark.slm
@pytest.mark.parametrize("kind", ["same", "near", "far"])
def test_capital(slm_model, kind):
    slm_model.chat(f"Capital of France? ({kind})", max_tokens=20)
"""
BANDS = "equivalence = { at_least = 0.9, fail_below = 0.3 }\n"
CASCADE = 'equivalence = { at_least = 0.9, fail_below = 0.3, then = ["judge"] }\n'


def _kind(request: dict[str, Any]) -> str:
    return str(request["messages"][-1]["content"]).rsplit("(", 1)[1].rstrip(")")


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """The reference, and the candidate whose answer depends on the prompt's kind."""
    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(lambda req: CANDIDATE[_kind(req)], model="cand") as candidate,
    ):
        yield reference, candidate


def _project(pytester: pytest.Pytester, reference: FakeOpenAI, extra: str = "") -> None:
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n{extra}"
    ))  # fmt: skip
    pytester.makepyfile(test_capital=TESTS)


def _run(pytester: pytest.Pytester, candidate: FakeOpenAI, *args: str) -> pytest.RunResult:
    return pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json",
                              *args)  # fmt: skip


def _report(pytester: pytest.Pytester, name: str = "r.json") -> dict[str, Any]:
    return read_report(pytester.path / name)


def _verdicts(report: dict[str, Any]) -> dict[str, tuple[str | None, str | None]]:
    """kind -> (verdict, decided_by) of its one score."""
    out = {}
    for outcome in report["outcomes"]:
        ((score,),) = [pair["scores"] for pair in outcome["pairs"]]
        params = outcome["nodeid"].split("[", 1)[1].rstrip("]").split("-")
        (kind,) = [k for k in CANDIDATE if k in params]
        out[kind] = (score["verdict"], score["decided_by"])
    return out


def _row(report: dict[str, Any]) -> dict[str, Any]:
    (row,) = report["models"]
    return row


def test_without_configuration_no_pair_is_called_anything_and_the_summary_says_how_once(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference)
    result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(passed=3)  # "far" is reported, not failed: similarity is no verdict
    assert result.ret == 0
    report = _report(pytester)
    # the answer identical to the reference is certain; the others are similarity only
    assert _verdicts(report) == {
        "same": ("equivalent", "exact"), "near": (None, None), "far": (None, None),
    }  # fmt: skip
    row = _row(report)
    assert (row["pairs_equivalent"], row["pairs_different"], row["pairs_undecided"]) == (1, 0, 0)
    assert row["pairs_no_verdict"] == 2 and row["equivalence_mean_low"] is not None
    text = said(result)
    assert text.count("no verdict:") == 1 and text.count("to get a verdict:") == 1
    assert "no verdict: 2 pair(s) have fuzzy similarity only" in text
    for how in ("`slam calibrate`", "at_least", 'then = ["judge"]', "`slam review`"):
        assert how in text


def test_bands_decide_three_ways_and_the_gate_fails_on_undecided_naming_the_fixes(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference, BANDS)
    result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(passed=2, failed=1)  # "near" is undecided: missing evidence, no failure
    result.stdout.fnmatch_lines(["*call 1: equivalence 0.05 < 0.30, the fail band (fuzzy)*"])
    report = _report(pytester)
    assert _verdicts(report) == {
        "same": ("equivalent", "exact"),
        "near": ("undecided", "bands"),
        "far": ("different", "bands"),
    }
    row = _row(report)
    assert (row["pairs_equivalent"], row["pairs_different"], row["pairs_undecided"]) == (1, 1, 1)
    text = said(result)
    assert "verdicts for cand: 1 equivalent, 1 different, 1 undecided (1 no evidence)" in text
    (breach,) = report["gate"]["models"][0]["breaches"]
    assert breach["rule"] == "undecided" and breach["measured"] == 1
    for fix in ("`slam calibrate`", 'then = ["judge"]', "`slam review`", "allow_undecided = true"):
        assert fix in breach["message"]
    # undecided is accepted when the project says so: the gate passes (the far test still fails)
    toml = pytester.path / "pyproject.toml"
    toml.write_text(toml.read_text() + "\n[tool.slam.gate]\nallow_undecided = true\n")
    again = _run(pytester, candidate)
    again.assert_outcomes(passed=2, failed=1)
    assert _report(pytester)["gate"]["models"][0]["breaches"] == []


def test_the_judge_is_asked_exactly_about_the_undecided_pairs_and_its_verdicts_are_cached(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    with FakeOpenAI("Same facts. Rating: [[8]]", model="gpt-4-judge") as judge:
        _project(pytester, reference, f"judge = '{judge.base_url}#gpt-4-judge'\n{CASCADE}")
        result = _run(pytester, candidate, "--slm-record=new")
        result.assert_outcomes(passed=2, failed=1)
        asked = [r.json for r in judge.requests if r.path.endswith("/chat/completions")]
        assert len(asked) == 1  # one undecided pair, one grade; the decided pairs never reach it
        assert CANDIDATE["near"] in asked[0]["messages"][-1]["content"]
        first = _report(pytester)
        assert _verdicts(first) == {
            "same": ("equivalent", "exact"),
            "near": ("equivalent", "judge"),
            "far": ("different", "bands"),
        }
        row = _row(first)
        assert (row["judge_asked"], row["judge_replayed"], row["judge_saved"]) == (1, 0, 2)
        assert row["judge_calls"] == 1 and row["pairs_undecided"] == 0
        assert first["gate"] is None or first["gate"]["models"][0]["breaches"] == []
        assert "judge: 1 pair(s) asked (1 call(s)" in said(result)
        assert "2 saved (decided before the judge)" in said(result)
        # the verdict is in the golden file: a second run asks the judge nothing
        replay = _run(pytester, candidate)
        replay.assert_outcomes(passed=2, failed=1)
        assert len([r for r in judge.requests if r.path.endswith("/chat/completions")]) == 1
    again = _report(pytester)
    assert _verdicts(again)["near"] == ("equivalent", "judge")
    row = _row(again)
    assert (row["judge_asked"], row["judge_replayed"], row["judge_saved"]) == (0, 1, 2)
    ((entry,),) = [
        [e for e in read_report(p)["entries"].values() if e.get("judge")]
        for p in (pytester.path / "__slam__").rglob("test_capital.json")
    ]
    assert len(entry["judge"]) == 1


def test_a_stored_review_verdict_decides_what_the_bands_left_undecided(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    review = 'equivalence = { at_least = 0.9, fail_below = 0.3, then = ["review"] }\n'
    _project(pytester, reference, review)
    first = _run(pytester, candidate, "--slm-record=new")
    assert _verdicts(_report(pytester))["near"] == ("undecided", "bands")
    assert first.ret == 1  # the far test failed; the gate also named the undecided pair
    (outcome,) = [o for o in _report(pytester)["outcomes"] if "near" in o["nodeid"]]
    (pair,) = outcome["pairs"]
    store = GoldenStore(pytester.path / "__slam__", "gpt-4")
    answer = answer_text(CANDIDATE["near"], None)
    save_verdicts(store, "test_capital.py", [make_verdict(
        key=pair["key"], model="cand", answer_hash=text_hash(answer),
        reference_hash=text_hash(REFERENCE), verdict="loss", reviewer="ana",
    )])  # fmt: skip
    second = _run(pytester, candidate)
    second.assert_outcomes(passed=1, failed=2)  # the reviewer found "near" worse
    second.stdout.fnmatch_lines(
        ["*call 1: review says different (fuzzy 0.72 was undecided)*ana: loss*"]
    )
    assert _verdicts(_report(pytester))["near"] == ("different", "review")
    assert _row(_report(pytester))["pairs_undecided"] == 0


def test_module_scope_overrides_the_top_level_and_a_mark_overrides_the_module(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference, (
        "[tool.slam.equivalence]\nat_least = 0.99\n"
        '[tool.slam.equivalence.modules."test_capital.py"]\nat_least = 0.7\n'
    ))  # fmt: skip
    pytester.makepyfile(test_marked="""
        import pytest

        @pytest.mark.slm
        @pytest.mark.slm_equivalence(at_least=0.5, fail_below=0.1)
        def test_far(slm_model):
            slm_model.chat("Capital of France? (far)", max_tokens=20)
        """)  # fmt: skip
    _run(pytester, candidate, "--slm-record=new").assert_outcomes(passed=2, failed=2)
    report = _report(pytester)
    capital = [o for o in report["outcomes"] if o["nodeid"].startswith("test_capital.py")]
    verdicts = _verdicts({"outcomes": capital})
    # the module's threshold (0.7), not the top level's 0.99: "near" (0.72) passes
    assert verdicts == {
        "same": ("equivalent", "exact"),
        "near": ("equivalent", "threshold"),
        "far": ("different", "threshold"),
    }
    (marked,) = [o for o in report["outcomes"] if o["nodeid"].startswith("test_marked.py")]
    ((score,),) = [p["scores"] for p in marked["pairs"]]
    assert (score["verdict"], score["threshold"], score["fail_below"]) == ("different", 0.5, 0.1)
    assert marked["equivalence"] == {"at_least": 0.5, "fail_below": 0.1}  # for slam rescore


JSON_PRODUCT = """
from openai import OpenAI
from pydantic import BaseModel

client = OpenAI()


class Ticket(BaseModel):
    category: str
    urgent: bool


def triage(text):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": text}],
        response_format={"type": "json_object"})
    return r.choices[0].message.content


def triage_parsed(text):
    r = client.chat.completions.parse(
        model="gpt-4", messages=[{"role": "user", "content": text}], response_format=Ticket)
    return r.choices[0].message.parsed
"""
JSON_TESTS = """
import json
import pytest
from product import triage, triage_parsed

pytestmark = pytest.mark.slm

def test_json_object():
    assert "category" in json.loads(triage("My card was charged twice"))

def test_parse():
    assert triage_parsed("My parcel never came").category
"""


def test_json_output_is_compared_structurally_with_no_configuration(
    pytester: pytest.Pytester,
) -> None:
    ref = {"category": "billing", "urgent": True}
    cand = {"category": "billing", "urgent": False}  # one field off: fuzzy text would pass it
    with (
        FakeOpenAI(json.dumps(ref), model="gpt-4-0613") as reference,
        FakeOpenAI(json.dumps(cand, indent=2), model="cand") as candidate,
    ):
        pytester.makefile(
            ".toml", pyproject=f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
        )
        pytester.makepyfile(product=JSON_PRODUCT, test_triage=JSON_TESTS)
        result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*call 1: equivalence 0.50 < 1.00 (json): 1/2 leaves match; $.urgent expected true, got false*",
        "*call 1: equivalence 0.50 < 1.00 (json+json_schema): fields 0.50: 1/2 leaves match*"
        "schema 1.00: valid against the schema*",
    ])  # fmt: skip
    for outcome in _report(pytester)["outcomes"]:
        ((score,),) = [p["scores"] for p in outcome["pairs"]]
        assert (score["verdict"], score["decided_by"]) == ("different", "structure")
    (parsed,) = [o for o in _report(pytester)["outcomes"] if "test_parse" in o["nodeid"]]
    assert parsed["calls"][0]["request"]["response_format"]["type"] == "json_schema"


def test_slam_rescore_gives_the_new_configurations_verdicts_without_any_model(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference)
    _run(pytester, candidate, "--slm-record=new").assert_outcomes(passed=3)
    hits = (reference.hits, candidate.hits)
    assert _verdicts(_report(pytester))["far"] == (None, None)
    toml = pytester.path / "pyproject.toml"
    toml.write_text(toml.read_text() + "\n" + BANDS)
    done = slam(pytester.path, "rescore", "r.json", "-o", "new.json", "--html", "new.html")
    assert done.returncode == 1, done.stdout + done.stderr  # "far" now fails, as in a run
    assert "verdicts for cand: 1 equivalent, 1 different, 1 undecided" in " ".join(
        done.stdout.split()
    )
    assert "undecided: 1 pair(s) of cand are undecided" in done.stdout
    new = _report(pytester, "new.json")
    assert _verdicts(new) == {
        "same": ("equivalent", "exact"),
        "near": ("undecided", "bands"),
        "far": ("different", "bands"),
    }
    page = (pytester.path / "new.html").read_text()
    assert "1 / 1 / 1 / 0" in page  # the models table: equivalent / different / undecided / none
    _, pairs = report_data(page)
    shown = {(score[2], score[3]) for pair in pairs for score in pair[4]}  # (verdict, decided_by)
    assert shown == {("equivalent", "exact"), ("undecided", "bands"), ("different", "bands")}
    assert (reference.hits, candidate.hits) == hits  # no model was called
    # a judge in the cascade: rescore asks it nothing; the pair it never saw stays undecided
    with FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge:
        toml.write_text(toml.read_text().replace(BANDS, CASCADE)
                        + f"judge = '{judge.base_url}#gpt-4-judge'\n")  # fmt: skip
        cascade = slam(pytester.path, "rescore", "r.json")
    assert judge.hits == 0
    assert cascade.returncode == 1 and "undecided: 1 pair(s)" in cascade.stdout
    assert "1 pair(s) the judge has not seen stay undecided" in cascade.stdout
    toml.write_text(toml.read_text() + "\n[tool.slam.gate]\nallow_undecided = true\n")
    accepted = slam(pytester.path, "rescore", "r.json")
    assert accepted.returncode == 1, accepted.stdout  # "far" still fails its test
    assert "undecided: 1 pair(s)" not in accepted.stdout  # the gate accepts the undecided pair
    broken = slam(pytester.path, "rescore", "missing.json")
    assert broken.returncode == 2 and broken.stderr.startswith("slam rescore: pytest-slam report")
    # a tampered pair: an index past the calls is no traceback, -1 scores no other call's answer
    doc = _report(pytester)
    outcome = next(o for o in doc["outcomes"] if o["pairs"])
    for index in (99, -1, len(outcome["calls"])):
        outcome["pairs"][0]["call_index"] = index
        (pytester.path / "tampered.json").write_text(json.dumps(doc))
        done = slam(pytester.path, "rescore", "tampered.json")
        assert (done.returncode, done.stdout) == (2, ""), done.stderr
        assert done.stderr.splitlines() == [
            f"slam rescore: tampered.json: {outcome['nodeid']}: pair 1's call_index {index} is not "
            f"one of its {len(outcome['calls'])} call(s); the report was edited or cut: rescore "
            "the file --slm-report wrote"
        ]


def _by_test(report: dict[str, Any]) -> dict[str, tuple[str, list[str | None]]]:
    """nodeid -> (outcome, its pairs' verdicts)."""
    return {
        o["nodeid"]: (o["outcome"], [s["verdict"] for p in o["pairs"] for s in p["scores"]])
        for o in report["outcomes"]
    }


def test_identical_answers_are_equivalent_with_no_equivalence_configured(
    pytester: pytest.Pytester,
) -> None:
    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(f"  {REFERENCE}\r\n", model="cand") as candidate,  # outer whitespace only
    ):
        _project(pytester, reference)
        result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(passed=3)
    report = _report(pytester)
    assert "equivalence" not in (pytester.path / "pyproject.toml").read_text()
    assert _verdicts(report) == dict.fromkeys(CANDIDATE, ("equivalent", "exact"))
    row = _row(report)
    assert (row["pairs_equivalent"], row["pairs_no_verdict"], row["pairs_undecided"]) == (3, 0, 0)
    assert "no verdict" not in said(result)  # nothing is left to similarity alone
    assert report["notes"] == []


def test_a_rescore_with_new_bands_equals_a_rerun_with_them(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference, "[tool.slam.gate]\nallow_undecided = true\n")
    _run(pytester, candidate, "--slm-record=new").assert_outcomes(passed=3)
    toml = pytester.path / "pyproject.toml"
    # new bands: "far" turns different and fails, "near" undecided; then a pass-rate rule
    text = toml.read_text().replace("[tool.slam]\n", "[tool.slam]\n" + BANDS, 1)
    toml.write_text(text + "\nmin_pass_rate = 0.9\n")
    rescored = slam(pytester.path, "rescore", "r.json", "-o", "rescored.json")
    rerun = _run(pytester, candidate)  # replays the golden files: the same answers
    rerun.assert_outcomes(passed=2, failed=1)
    assert rescored.returncode == rerun.ret == 1, rescored.stdout + rescored.stderr
    new, again = _report(pytester, "rescored.json"), _report(pytester)
    assert _by_test(new) == _by_test(again)
    assert sorted(o for o, _ in _by_test(new).values()) == ["failed", "passed", "passed"]
    (row,), (rerow,) = new["models"], again["models"]
    for key in ("tests_passed", "tests_failed", "pass_rate", "pairs_equivalent",
                "pairs_different", "pairs_undecided", "gate"):  # fmt: skip
        assert row[key] == rerow[key], key
    assert row["pass_rate"] == pytest.approx(2 / 3)
    gate, regate = new["gate"], again["gate"]
    assert (gate["passed"], regate["passed"]) == (False, False)
    rules = [[b["rule"] for b in m["breaches"]] for m in gate["models"]]
    assert rules == [[b["rule"] for b in m["breaches"]] for m in regate["models"]]
    # and back: without the bands the failed test passes again, as a run without them would
    toml.write_text(toml.read_text().replace(BANDS, ""))
    back = slam(pytester.path, "rescore", "rescored.json", "-o", "back.json")
    assert back.returncode == 0, back.stdout  # every test passes, and so does the gate
    assert sorted(o for o, _ in _by_test(_report(pytester, "back.json")).values()) == ["passed"] * 3


def test_a_cascade_to_the_judge_without_a_judge_model_says_how_to_configure_one(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    _project(pytester, reference, CASCADE)
    result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines([
        "*scorer 'fuzzy': then = ?\"judge\"? needs a judge model: set ?tool.slam? judge*"
    ])  # fmt: skip


BAND_ERROR = (
    "band_error = { pass = 0.03, pass_upper = 0.05, fail = 0.02, fail_upper = 0.06, n = 400 }"
)
JUDGE_ERROR = "judge_error = { pass = 0.04, pass_upper = 0.07, n = 600, measured_on = 'labels' }"


def test_each_verdict_states_its_evidence_and_measured_error_and_the_gate_can_require_it(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    with FakeOpenAI("Same facts. Rating: [[8]]", model="gpt-4-judge") as judge:
        _project(pytester, reference, (
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            "[tool.slam.equivalence]\nat_least = 0.9\nfail_below = 0.3\nthen = ['judge']\n"
            f"{BAND_ERROR}\n[tool.slam.gate]\nmax_unmeasured = 0\n"
        ))  # fmt: skip
        result = _run(pytester, candidate, "--slm-record=new", "--slm-html=r.html")
    result.assert_outcomes(passed=2, failed=1)
    report = _report(pytester)
    errors = {
        k: (s["decided_by"], s["error"], s["error_upper"]) for k, s in _scores(report).items()
    }
    assert errors == {
        "same": ("exact", 0.0, 0.0),  # certain
        "near": ("judge", None, None),  # the judge: nobody measured it
        "far": ("bands", 0.02, 0.06),  # the bands' fail error
    }
    row = _row(report)
    assert row["verdict_evidence"] == [  # in the order of the tests (far, near, same)
        {"evidence": "bands", "status": "measured", "equivalent": 0, "different": 1,
         "pass_error": None, "pass_error_upper": None, "fail_error": 0.02,
         "fail_error_upper": 0.06},
        {"evidence": "judge", "status": "unmeasured", "equivalent": 1, "different": 0,
         "pass_error": None, "pass_error_upper": None, "fail_error": None,
         "fail_error_upper": None},
        {"evidence": "exact", "status": "certain", "equivalent": 1, "different": 0,
         "pass_error": 0.0, "pass_error_upper": 0.0, "fail_error": None,
         "fail_error_upper": None},
    ]  # fmt: skip
    assert row["pairs_unmeasured"] == 1
    # the interval: 1 wrong pass at most from the unmeasured judge, 0.06 wrong fail over 3 tests
    assert row["pass_rate_verdict_low"] == pytest.approx(max(0.0, row["pass_rate_low"] - 1 / 3))
    assert row["pass_rate_verdict_high"] == pytest.approx(min(1.0, row["pass_rate_high"] + 0.02))
    text = said(result)
    assert (
        "by evidence: bands 1 different (fail error 0.020, <= 0.060); judge 1 equivalent "
        "(unmeasured); exact 1 equivalent (certain); pass rate 67% ["
    ) in text
    assert "counting the verdicts' errors, 1 on unmeasured evidence" in text
    ((breach,),) = [m["breaches"] for m in report["gate"]["models"]]
    assert (breach["rule"], breach["measured"], breach["limit"]) == ("max_unmeasured", 1, 0)
    assert "verdict evidence" in (pytester.path / "r.html").read_text()
    # the judge measured: its verdicts carry its error, and the gate's rule holds
    toml = pytester.path / "pyproject.toml"
    toml.write_text(toml.read_text().replace(BAND_ERROR, f"{BAND_ERROR}\n{JUDGE_ERROR}"))
    _run(pytester, candidate).assert_outcomes(passed=2, failed=1)  # replayed: no judge needed
    again = _report(pytester)
    assert _scores(again)["near"]["error"] == 0.04 and _scores(again)["near"]["error_upper"] == 0.07
    assert _row(again)["pairs_unmeasured"] == 0
    assert again["gate"]["models"][0]["breaches"] == []


def test_a_judge_its_evaluation_could_not_certify_leaves_its_pairs_undecided_unless_accepted(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """``slam calibrate --evaluate`` writes ``pass_certified = false`` for a judge whose equivalent
    it could not certify: the run keeps the judge's reasons but calls the pair undecided (gated),
    until the project sets ``accept_uncertified_judge = true``."""
    reference, candidate = servers
    uncertified = JUDGE_ERROR.replace(" }", ", pass_certified = false, fail_certified = false }")
    with FakeOpenAI("Same facts. Rating: [[8]]", model="gpt-4-judge") as judge:
        _project(pytester, reference, (
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            "[tool.slam.equivalence]\nat_least = 0.9\nfail_below = 0.3\nthen = ['judge']\n"
            f"{BAND_ERROR}\n{uncertified}\n"
        ))  # fmt: skip
        result = _run(pytester, candidate, "--slm-record=new")
    result.assert_outcomes(passed=2, failed=1)  # undecided fails no test of its own
    near = _scores(_report(pytester))["near"]
    assert (near["verdict"], near["decided_by"]) == ("undecided", None)
    assert "the judge's equivalent is not certified" in near["explanation"]
    assert "accept_uncertified_judge = true counts it" in near["explanation"]
    assert _report(pytester)["gate"]["passed"] is False  # undecided pairs are gated
    toml = pytester.path / "pyproject.toml"
    toml.write_text(
        toml.read_text().replace(
            "[tool.slam]\n", "[tool.slam]\naccept_uncertified_judge = true\n", 1
        )
    )
    _run(pytester, candidate).assert_outcomes(passed=2, failed=1)  # the verdict cached: replayed
    near = _scores(_report(pytester))["near"]
    assert (near["verdict"], near["decided_by"], near["error"]) == ("equivalent", "judge", 0.04)


def _scores(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """kind -> its one score."""
    out = {}
    for outcome in report["outcomes"]:
        ((score,),) = [pair["scores"] for pair in outcome["pairs"]]
        out[outcome["nodeid"].split("[", 1)[1].rstrip("]").rsplit("-", 1)[-1]] = score
    return out


def test_a_pairwise_judge_that_prefers_position_a_is_asked_both_ways_and_called_a_tie(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    with FakeOpenAI("Assistant A is better. [[A]]", model="gpt-4-judge") as judge:
        _project(pytester, reference, (
            f"judge = '{judge.base_url}#gpt-4-judge'\n"
            "equivalence = { by = 'judge', mode = 'pairwise' }\n"
        ))  # fmt: skip
        result = _run(pytester, candidate, "--slm-record=new")
        asked = [r.json for r in judge.requests if r.path.endswith("/chat/completions")]
    result.assert_outcomes(passed=3)
    assert len(asked) == 4  # near and far, each in both orders; "same" is certain, never asked
    prompts = [a["messages"][-1]["content"] for a in asked]
    for kind in ("near", "far"):
        ours = [p for p in prompts if CANDIDATE[kind] in p]
        a_slots = [p.split("[Assistant A's answer]")[1].split("[Assistant B's answer]")[0]
                   for p in ours]  # fmt: skip
        assert sorted(CANDIDATE[kind] in a for a in a_slots) == [False, True]  # both orders
    scores = _scores(_report(pytester))
    for kind in ("near", "far"):
        assert scores[kind]["value"] == 0.5  # one win, one loss: a tie, whatever was better
        assert "position bias, a tie" in scores[kind]["explanation"]
    assert scores["same"]["decided_by"] == "exact"


def test_the_judge_models_own_timeout_s_bounds_each_of_its_calls(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """``timeout_s`` in the judge's model table is honoured (it was always 120 s): a judge that
    sends nothing for 5 s, with ``timeout_s = 0.5``, fails its call naming that timeout."""
    reference, candidate = servers
    with FakeOpenAI("Same facts. Rating: [[8]]", model="gpt-4-judge", ttft_s=5) as judge:
        _project(pytester, reference, (
            f"judge = 'grader'\n{CASCADE}\n[tool.slam.models.grader]\n"
            f"base_url = '{judge.base_url}'\nmodel = 'gpt-4-judge'\ntimeout_s = 0.5\n"
        ))  # fmt: skip
        result = _run(pytester, candidate, "--slm-record=new")
    out = result.stdout.str()
    assert (
        "judge 'grader' failed: " in out
        and "nothing for 0.5 s after 0 chunk(s) (its timeout_s)" in out
    ), out
    decided = [
        score["decided_by"]
        for outcome in _report(pytester)["outcomes"]
        for pair in outcome["pairs"]
        for score in pair["scores"]
    ]
    assert "judge" not in decided  # no verdict from a judge past its timeout


def test_a_module_moving_the_bands_does_not_carry_the_error_measured_for_the_top_level_ones(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """band_error was measured for the top level's bands: a module's own bands decide its pairs
    with no measured error (unmeasured), never with the error of bands it does not use."""
    reference, candidate = servers
    _project(pytester, reference, (
        "[tool.slam.equivalence]\nat_least = 0.9\nfail_below = 0.3\n"
        f"{BAND_ERROR}\n"
        '[tool.slam.equivalence.modules."test_capital.py"]\nat_least = 0.7\n'
    ))  # fmt: skip
    _run(pytester, candidate, "--slm-record=new").assert_outcomes(passed=2, failed=1)
    report = _report(pytester)
    errors = {k: (s["verdict"], s["decided_by"], s["error"]) for k, s in _scores(report).items()}
    assert errors == {
        "same": ("equivalent", "exact", 0.0),
        "near": ("equivalent", "bands", None),  # 0.72 >= the module's 0.7: bands never measured
        "far": ("different", "bands", None),
    }
    assert _row(report)["pairs_unmeasured"] == 2
