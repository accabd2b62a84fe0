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
    return json.loads((pytester.path / name).read_text())


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
    assert _verdicts(report) == dict.fromkeys(CANDIDATE, (None, None))
    row = _row(report)
    assert (row["pairs_equivalent"], row["pairs_different"], row["pairs_undecided"]) == (0, 0, 0)
    assert row["pairs_no_verdict"] == 3 and row["equivalence_mean_low"] is not None
    text = said(result)
    assert text.count("no verdict:") == 1 and text.count("to get a verdict:") == 1
    assert "no verdict: 3 pair(s) have fuzzy similarity only" in text
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
        "same": ("equivalent", "bands"),
        "near": ("undecided", "bands"),
        "far": ("different", "bands"),
    }
    row = _row(report)
    assert (row["pairs_equivalent"], row["pairs_different"], row["pairs_undecided"]) == (1, 1, 1)
    text = said(result)
    assert "verdicts for cand: 1 equivalent, 1 different, 1 undecided (missing evidence)" in text
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
            "same": ("equivalent", "bands"),
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
        [e for e in json.loads(p.read_text())["entries"].values() if e.get("judge")]
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
        "same": ("equivalent", "threshold"),
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
    assert _verdicts(_report(pytester)) == dict.fromkeys(CANDIDATE, (None, None))
    toml = pytester.path / "pyproject.toml"
    toml.write_text(toml.read_text() + "\n" + BANDS)
    done = slam(pytester.path, "rescore", "r.json", "-o", "new.json", "--html", "new.html")
    assert done.returncode == 6, done.stdout + done.stderr  # the gate: one undecided pair
    assert "verdicts for cand: 1 equivalent, 1 different, 1 undecided" in " ".join(
        done.stdout.split()
    )
    assert "undecided: 1 pair(s) of cand are undecided" in done.stdout
    new = _report(pytester, "new.json")
    assert _verdicts(new) == {
        "same": ("equivalent", "bands"),
        "near": ("undecided", "bands"),
        "far": ("different", "bands"),
    }
    page = (pytester.path / "new.html").read_text()
    assert "1 / 1 / 1" in page  # the models table: equivalent / different / undecided
    _, pairs = report_data(page)
    shown = {(score[2], score[3]) for pair in pairs for score in pair[4]}  # (verdict, decided_by)
    assert shown == {("equivalent", "bands"), ("undecided", "bands"), ("different", "bands")}
    assert (reference.hits, candidate.hits) == hits  # no model was called
    # a judge in the cascade: rescore asks it nothing; the pair it never saw stays undecided
    with FakeOpenAI("Rating: [[9]]", model="gpt-4-judge") as judge:
        toml.write_text(toml.read_text().replace(BANDS, CASCADE)
                        + f"judge = '{judge.base_url}#gpt-4-judge'\n")  # fmt: skip
        cascade = slam(pytester.path, "rescore", "r.json")
    assert judge.hits == 0
    assert cascade.returncode == 6
    assert "1 pair(s) the judge has not seen stay undecided" in cascade.stdout
    toml.write_text(toml.read_text() + "\n[tool.slam.gate]\nallow_undecided = true\n")
    assert slam(pytester.path, "rescore", "r.json").returncode == 0
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
