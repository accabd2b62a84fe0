"""Scoring the swap's pairs in real pytest sessions: one scorer per test, the LLM judge with its
verdicts cached in the golden files, and ``assert_equivalent``'s failure output and obtained answers.

The reference (GPT-4) and the judge are FakeOpenAI servers on loopback, as they are hosted models.
The judge tests also use a FakeOpenAI candidate: a verdict is cached by the exact candidate text, and
what is under test is the judge's path, so the candidate's answer must not vary between runs.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from report_helpers import read_report

from pytest_slam.testing import FakeOpenAI

COUNTING = """
from pytest_slam.compare.scorer import Scorer

BUILT = []

class Counting(Scorer):
    name = "counting"

    def __init__(self):
        BUILT.append(self)
        self.serial, self.pairs = len(BUILT), 0

    def score(self, candidate, reference):
        self.pairs += 1
        return self.verdict(1.0, f"scorer #{self.serial} pair {self.pairs}")
"""
COUNTING_CONFTEST = """
from pytest_slam.compare.named import SCORERS

def pytest_configure(config):
    SCORERS["counting"] = "counting:Counting"

def pytest_unconfigure(config):
    SCORERS.pop("counting", None)
"""


def _report(pytester: pytest.Pytester, name: str = "report.json") -> list[dict]:
    return read_report(pytester.path / name)["outcomes"]


def _scores(outcomes: list[dict]) -> list[dict]:
    return [score for o in outcomes for pair in o["pairs"] for score in pair["scores"]]


def test_one_scorer_per_configuration_scores_every_pair(
    pytester: pytest.Pytester, smollm2_endpoint: str, fake_gpt4: FakeOpenAI
) -> None:
    pytester.makepyfile(counting=COUNTING)
    pytester.makeconftest(COUNTING_CONFTEST)
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\nequivalence = {{ by = 'counting' }}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_pairs="""
        import pytest

        pytestmark = pytest.mark.slm

        def test_three(slm_model):
            for word in ("one", "two", "three"):
                slm_model.chat(f"Say {word}", max_tokens=3)

        def test_two(slm_model):
            for word in ("four", "five"):
                slm_model.chat(f"Say {word}", max_tokens=3)
        """)  # fmt: skip
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "--slm-record=new",
                                "--slm-report=report.json")  # fmt: skip
    result.assert_outcomes(passed=2)
    by_test = {o["test"].split("::")[-1]: [s["explanation"] for s in _scores([o])]
               for o in _report(pytester)}  # fmt: skip
    # Both tests ask for the same scorer and options: it is built once and scores all five pairs.
    assert by_test == {
        "test_three": [f"scorer #1 pair {n}" for n in (1, 2, 3)],
        "test_two": [f"scorer #1 pair {n}" for n in (4, 5)],
    }


# -- the judge ---------------------------------------------------------------------------------------

JUDGE_TEST = """
import pytest

@pytest.mark.slm
def test_capital(slm_model):
    slm_model.chat([
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi! How can I help?"},
        {"role": "user", "content": "What is the capital of France?"},
    ])
"""


@pytest.fixture
def candidate() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(answer="Paris is the capital of France.", model="cand") as server:
        yield server


def _judge_project(pytester: pytest.Pytester, reference: FakeOpenAI, judge_url: str,
                   by: str = "judge") -> None:  # fmt: skip
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\njudge = '{judge_url}#gpt-4-judge'\n"
        f"equivalence = {{ by = '{by}', at_least = 0.5 }}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_judged=JUDGE_TEST)


def _golden(pytester: pytest.Pytester) -> Path:
    (path,) = (pytester.path / "__slam__").rglob("test_judged.json")
    return path


def _judge_chats(judge: FakeOpenAI) -> list:
    return [r for r in judge.requests if r.path.endswith("/chat/completions")]


def test_judge_verdicts_are_cached_in_the_golden_file_and_replay_without_the_judge(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    with FakeOpenAI(answer="Correct and concise. Rating: [[8]]", model="gpt-4-judge") as judge:
        _judge_project(pytester, fake_gpt4, judge.base_url)
        models = f"--slm-models={candidate.base_url}#cand"
        recorded = pytester.runpytest(models, "--slm-record=new", "--slm-report=first.json")
        recorded.assert_outcomes(passed=1)
        (asked,) = _judge_chats(judge)
    prompt = asked.json["messages"][-1]["content"]
    assert "[Question]\nWhat is the capital of France?\n" in prompt  # the last user message
    assert "[Assistant's answer]\nParis is the capital of France." in prompt
    entries = read_report(_golden(pytester))["entries"]
    ((key, verdict),) = next(iter(entries.values()))["judge"].items()
    assert key.startswith("judge-") and verdict["grade"] == 8
    # The judge is stopped: the replay must take the verdict from the golden file.
    replayed = pytester.runpytest(models, "--slm-report=second.json")
    replayed.assert_outcomes(passed=1)
    (first,), (second,) = (
        _scores(_report(pytester, "first.json")),
        _scores(_report(pytester, "second.json")),
    )
    assert first["value"] == second["value"] == pytest.approx(7 / 9)
    assert second["explanation"].endswith("(cached verdict)")
    assert len(_judge_chats(judge)) == 1


def test_replay_mode_asks_a_missing_verdict_and_says_it_is_not_cached(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    models = f"--slm-models={candidate.base_url}#cand"
    with FakeOpenAI(answer="Rating: [[9]]", model="gpt-4-judge") as judge:
        _judge_project(pytester, fake_gpt4, judge.base_url, by="fuzzy")
        pytester.runpytest(models, "--slm-record=new").assert_outcomes(passed=1)
        golden_before = _golden(pytester).read_bytes()
        _judge_project(pytester, fake_gpt4, judge.base_url)
        asked = pytester.runpytest(models)
        asked.assert_outcomes(passed=1)
        asked.stdout.fnmatch_lines([
            "judge verdicts for test_judged.py were asked but not cached (replay mode, "
            "--slm-record=none); cache them with: pytest --slm-record=new test_judged.py"
        ])  # fmt: skip
        assert len(_judge_chats(judge)) == 1
    assert _golden(pytester).read_bytes() == golden_before  # replay never writes
    # Now the judge is down and nothing is cached: the test fails saying what to do.
    down = pytester.runpytest(models)
    down.assert_outcomes(failed=1)
    down.stdout.fnmatch_lines([
        f"*call 1: scorer 'judge': judge 'gpt-4-judge' failed: model 'gpt-4-judge' at {judge.base_url}"
        " is unreachable*start it or fix ?tool.slam? judge*cache new ones with --slm-record=new*"
    ])  # fmt: skip


def test_a_judge_answering_nonsense_is_unjudged_not_zero_and_its_cost_is_reported(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    with FakeOpenAI(answer="I like turtles.", model="gpt-4") as judge:
        _judge_project(pytester, fake_gpt4, judge.base_url)
        toml = pytester.path / "pyproject.toml"  # a judge the price table knows: gpt-4
        toml.write_text(toml.read_text().replace("#gpt-4-judge'", "#gpt-4'"))
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new",
                                    "--slm-report=report.json")  # fmt: skip
        assert judge.hits == 2  # asked, then asked again with a reminder of the form
    result.assert_outcomes(passed=1)  # no verdict is not a failing verdict of 0
    text = " ".join(result.stdout.str().split())
    assert ("unjudged (left out of the means, not scored 0): test_judged.py::test_capital[cand"
            in text)  # fmt: skip
    assert "judge answered nonsense: 'I like turtles.'" in text
    assert re.search(r"judge for \S+: 2 call\(s\), \$0\.\d+, \d+\+\d+ tokens, E2E p50 \d+ ms; "
                     r"1 pair\(s\) unjudged", text)  # fmt: skip
    report = read_report(pytester.path / "report.json")
    (row,) = report["models"]
    assert row["unjudged"] == 1 and row["judge_calls"] == 2 and row["judge_cost_usd"] > 0
    assert row["equivalence_mean"] is None  # nothing was scored: not a 0
    assert row["calls"] == 1  # the judge's calls are not the candidate's
    (outcome,) = report["outcomes"]
    judged = [c for c in outcome["calls"] if c["role"] == "judge"]
    assert judged[-1]["error"].startswith("unjudged: judge ")
    assert "gave no readable verdict after a retry" in judged[-1]["error"]
    entries = read_report(_golden(pytester))["entries"]
    assert next(iter(entries.values())).get("judge", {}) == {}  # nonsense is never cached


def test_by_judge_without_a_judge_model_says_how_to_configure_one(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, candidate: FakeOpenAI
) -> None:
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\nequivalence = {{ by = 'judge' }}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_judged=JUDGE_TEST)
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*scorer 'judge': by='judge' needs a judge model: set ?tool.slam? judge*"]
    )


# -- assert_equivalent ---------------------------------------------------------------------------------


def test_failing_assert_equivalent_shows_the_diff_and_writes_the_obtained_answer(
    pytester: pytest.Pytester, smollm2_endpoint: str, fake_gpt4: FakeOpenAI
) -> None:
    pytester.makefile(".toml", pyproject=f"[tool.slam]\nreference = '{fake_gpt4.base_url}#gpt-4'\n")
    pytester.makepyfile(test_capital="""
        import pytest
        from pytest_slam.compare import assert_equivalent

        @pytest.mark.slm
        def test_capital(slm_model, gpt4_reference):
            call = slm_model.chat("Name the capital of France in one word.", max_tokens=12)
            assert_equivalent(call, gpt4_reference.answer_for(call), at_least=0.9)
        """)  # fmt: skip
    result = pytester.runpytest(f"--slm-models={smollm2_endpoint}", "--slm-record=new",
                                "--slm-report=report.json")  # fmt: skip
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E*EquivalenceError: candidate is not equivalent to the reference by fuzzy: "
        "score 0.* < at_least 0.900",
        "E*why: token_sort_ratio *",
        "E*reference (* chars) | candidate (* chars):",
        "E*reference * candidate",
        "E*GPT-4 says: Name the capital of France in one * | *",  # the reference also had max_tokens
        "E*obtained answer written to *test_capital.obtained*test_capital?SmolLM2-135M-Instruct?-fuzzy.txt",
    ])  # fmt: skip
    (outcome,) = _report(pytester)
    (obtained,) = (pytester.path / "__slam__").rglob("*.obtained/*.txt")
    assert obtained.read_text() == outcome["calls"][0]["text"]
    assert obtained.parent.parent == _golden_dir_of(pytester, "test_capital.json")
    assert (obtained.parent / ".gitignore").read_text().splitlines()[-1] == "*"
    assert not list(obtained.parent.glob(".*.tmp"))  # written atomically: no temp left behind
    assert ".obtained" not in _git_untracked(pytester.path)


def _golden_dir_of(pytester: pytest.Pytester, name: str) -> Path:
    (golden,) = (pytester.path / "__slam__").rglob(name)
    return golden.parent


def _git_untracked(root: Path) -> str:
    """What ``git status`` would offer to commit: the golden file, never the obtained answers."""
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=root,
                         check=True, capture_output=True, text=True).stdout  # fmt: skip
    assert "test_capital.json" in out
    return out
