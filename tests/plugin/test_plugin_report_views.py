"""What the run's records hold, shown where people read it: real pytest runs (pytester) write the
terminal summary, the JSON and the HTML report, and the checks read those files.

The reference, the candidates and the judge are FakeOpenAI servers on loopback; the product code
uses the real openai client and never mentions pytest-slam.
"""

from __future__ import annotations

import html
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import AGENT_TEST, agent
from agent_helpers import PRODUCT as AGENT_PRODUCT
from html_helpers import report_data, sides
from review_helpers import make_project, run_suite
from slam_helpers import PRODUCT, TESTS

from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import collect
from pytest_slam.review.verdicts import make_verdict, save_verdicts
from pytest_slam.testing import FakeOpenAI

MOCKED = """
import pytest

@pytest.fixture(autouse=True)
def _offline_refund(request, monkeypatch):
    # a product conftest that mocks one test's model call: the candidate never answers it
    import product

    if request.node.name.startswith("test_refund"):
        monkeypatch.setattr(product, "ask", lambda question: "mocked answer")
"""


def essay(request: dict[str, Any]) -> str:
    """An open-ended reference answer of 160 words."""
    return " ".join(["Details:", *(f"point{i}" for i in range(159))])


def flat(result: pytest.RunResult) -> str:
    """The run's output as one line: long summary lines wrap at the terminal width."""
    return " ".join(result.stdout.str().split())


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def one_line(request: dict[str, Any]) -> str:
    """A candidate's short answer, naming the model so each candidate's answer is its own."""
    return f"{request['model']} says: ask support"


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """The reference answers with long essays; each candidate model answers in one line."""
    with FakeOpenAI(essay, model="gpt-4") as ref, FakeOpenAI(one_line, model="cand") as cand:
        yield ref, cand


def _project(pytester: pytest.Pytester, ref: FakeOpenAI, cand: FakeOpenAI, extra: str = "") -> None:
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    models = "".join(f"\n[tool.slam.models.{m}]\nbase_url = '{cand.base_url}'\nmodel = '{m}'\n"
                     for m in ("small", "tiny"))  # fmt: skip
    pytester.makefile(".toml", pyproject=(
        f"[tool.pytest.ini_options]\npythonpath = ['.']\n\n[tool.slam]\ncandidates = ['small']\n"
        f"reference = '{ref.base_url}#gpt-4'\n{extra}{models}"
    ))  # fmt: skip


def test_similarity_alone_is_no_verdict_said_once_with_why_on_long_answers(
    pytester, servers
) -> None:
    _project(pytester, *servers)
    result = pytester.runpytest("--slm-record=new", "--slm-report=r.json", "--slm-html=r.html")
    result.assert_outcomes(passed=3)
    (note,) = json.loads(read(pytester.path / "r.json"))["notes"]
    assert note.startswith("no verdict: 3 pair(s) have fuzzy similarity only, reported with its "
                           "interval; none is called equivalent or different (median reference "
                           "answer 160 words")  # fmt: skip
    assert flat(result).count("no verdict:") == 1 and note in flat(result)
    assert read(pytester.path / "r.html").count("no verdict:") == 1
    sampled = pytester.runpytest("--slm-record=new", "--slm-samples=3", "--slm-report=r.json")
    sampled.assert_outcomes(passed=3)  # the reference's own variation is now recorded
    (note,) = json.loads(read(pytester.path / "r.json"))["notes"]
    assert note.startswith("no verdict: 3 pair(s)") and "median reference answer" not in note


def test_the_judge_cost_is_one_line_in_the_terminal_and_the_html(pytester, servers) -> None:
    ref, cand = servers
    with FakeOpenAI("Accurate and helpful. Rating: [[8]]", model="gpt-4") as judge:
        _project(pytester, ref, cand, f"judge = '{judge.base_url}#gpt-4'\n"
                                      "equivalence = { by = 'judge', at_least = 0.5 }\n")  # fmt: skip
        result = pytester.runpytest("--slm-models=small,tiny", "--slm-record=new",
                                    "--slm-report=r.json", "--slm-html=r.html")  # fmt: skip
        assert judge.hits == 6  # three tests x two candidates, each answer judged once
    result.assert_outcomes(passed=6)
    report = json.loads(read(pytester.path / "r.json"))
    cost = sum(row["judge_cost_usd"] for row in report["models"])
    assert cost > 0 and report["notes"] == []  # a judge decided: a verdict, no note
    said = flat(result)
    assert said.count("judge for ") == 1
    assert "judge for small, tiny: 6 call(s), $0.0" in said
    assert "not counted in the candidate figures" in said
    page = read(pytester.path / "r.html")
    assert page.count("<li>judge for small, tiny: 6 call(s), $0.0") == 1


def test_intervals_and_pairwise_comparisons_in_the_html(pytester, servers) -> None:
    _project(pytester, *servers)
    result = pytester.runpytest("--slm-models=small,tiny", "--slm-record=new",
                                "--slm-report=r.json", "--slm-html=r.html")  # fmt: skip
    result.assert_outcomes(passed=6)
    row = json.loads(read(pytester.path / "r.json"))["models"][0]
    page = read(pytester.path / "r.html")
    low, mean, high = (row[f"equivalence_mean{s}"] for s in ("_low", "", "_high"))
    assert f'<td class="equivalence">{mean:.2f} [{low:.2f}, {high:.2f}]</td>' in page
    # both candidates, 3 of 3 tests each
    assert page.count('<td class="pass-rate">100% (3/3)<br><small>[1.00, 1.00]</small></td>') == 2
    listed = page.split('<ul id="comparisons">')[1].split("</ul>")[0]
    texts = [html.escape(c["text"], quote=True) for c in row["comparisons"]]
    assert [c["metric"] for c in row["comparisons"]] == ["equivalence", "pass rate"]
    assert all(listed.count(f"<li>{t}</li>") == 1 for t in texts)  # small vs tiny, once each


def test_both_sides_tool_calls_are_side_by_side_in_the_html(pytester) -> None:
    with (
        FakeOpenAI(agent("get_weather"), model="gpt-4-0613") as reference,
        FakeOpenAI(agent("delete_account"), model="cand") as candidate,
    ):
        pytester.makefile(
            ".toml", pyproject=f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\n"
        )
        pytester.makepyfile(product=AGENT_PRODUCT, test_agent=AGENT_TEST)
        result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new",
                                    "--slm-html=r.html")  # fmt: skip
    result.assert_outcomes(failed=1)
    shown = [sides(p) for p in report_data(read(pytester.path / "r.html"))[1]]
    assert ('-> <del>get_weather</del>({"city": "Paris"})',
            '-> <ins>delete_account</ins>({"city": "Paris"})') in shown  # fmt: skip


def test_a_test_that_stops_reaching_the_candidate_is_a_regression(pytester, servers) -> None:
    _project(pytester, *servers)
    assert pytester.runpytest("--slm-record=new", "--slm-report=base.json").ret == 0
    pytester.makeconftest(MOCKED)
    result = pytester.runpytest("--slm-baseline=base.json")
    result.assert_outcomes(passed=3)  # the product's assertions still hold on the mock
    lines = result.stdout.lines
    assert "regressions: 1" in lines
    assert "  - small test_product.py::test_refund: outcome passed -> not_swapped" in lines
    assert "gate: FAIL" in lines
    assert any(line.startswith("  small: no_regression: 1 regression(s) vs") for line in lines)


def test_human_review_verdicts_are_in_the_html_report(pytester) -> None:
    project = make_project(pytester)
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs, _ = collect(load_report(project / "slam-report.json").outcomes, store)
    for p in pairs:  # the close candidate ties the reference, the poor one loses
        verdict = "tie" if p.model == "qwen-small" else "loss"
        save_verdicts(store, p.module, [make_verdict(
            key=p.key, model=p.model, answer_hash=p.answer_hash, reference_hash=p.reference_hash,
            verdict=verdict, reviewer="ana")])  # fmt: skip
    run_suite(pytester, "--slm-html=report.html")  # llama-tiny fails its tests: at_least 0.6
    page = read(project / "report.html")
    table = page.split('<table id="review">')[1].split("</table>")[0]
    assert ('<tr data-model="llama-tiny"><td>llama-tiny</td><td>3</td><td>0% [0%-56%]</td>'
            "<td>0% [0%-56%]</td><td>100% [44%-100%]</td>") in table  # fmt: skip
    assert ('<tr data-model="qwen-small"><td>qwen-small</td><td>3</td><td>0% [0%-56%]</td>'
            "<td>100% [44%-100%]</td>") in table  # fmt: skip
    assert "(1 reviewer(s))" in page
