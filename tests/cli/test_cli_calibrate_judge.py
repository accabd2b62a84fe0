"""``slam calibrate --evaluate`` measures the judge like any evidence (issue 28): a loopback judge
(FakeOpenAI as ``[tool.slam] judge``, over real HTTP through the run's own judge call) that is wrong
on a known share of prompts, its measured pass error against that share, each pair asked once
(the second evaluation asks nothing), the cascade's error split by evidence and counted by hand,
and an uncertified judge's pairs left undecided."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_slam.cli import main
from pytest_slam.testing.fake_openai import FakeOpenAI

GOOD, BAD = "the answer is right", "the answer is wrong"


def flipped(question: str) -> bool:
    """The prompts the fake judge gets wrong: one in ten, by a hash of the question."""
    return int(hashlib.sha256(question.encode()).hexdigest(), 16) % 10 == 0


def grade(request: dict[str, Any]) -> str:
    """A judge that grades a right answer 9 and a wrong one 2, except on the flipped prompts."""
    prompt = request["messages"][-1]["content"]
    question = re.search(r"\[Question\]\n(.*?)\n\n\[Reference", prompt, re.S).group(1)
    answer = re.search(r"\[Assistant's answer\]\n(.*)$", prompt, re.S).group(1)
    good = answer.startswith(GOOD) != flipped(question)
    return f"Explained.\n\nRating: [[{9 if good else 2}]]"


@pytest.fixture
def judge() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(grade, model="gpt-4-judge") as server:
        yield server


def rows(n: int, start: int = 0) -> list[dict[str, Any]]:
    """Half right answers, half wrong, each with its own question."""
    out = []
    for i in range(start, start + n):
        good = i % 2 == 0
        out.append({"candidate": f"{GOOD if good else BAD} #{i}", "reference": f"reference {i}",
                    "label": good, "question": f"question {i}?", "unit": str(i)})  # fmt: skip
    return out


def project(tmp: Path, judge: FakeOpenAI, equivalence: str, extra: str = "") -> None:
    (tmp / "pyproject.toml").write_text(
        f'[tool.slam]\nreference = "openai:gpt-4"\njudge = "{judge.base_url}#gpt-4-judge"\n'
        f"equivalence = {equivalence}\n{extra}",
        encoding="utf-8",
    )


def write(path: Path, labelled: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in labelled), encoding="utf-8")


def evaluated(capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["calibrate", "--evaluate", "labels.jsonl", "--format", "json", *extra]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    return result


def test_the_judge_s_measured_pass_error_holds_its_true_share_and_is_asked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: FakeOpenAI, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    project(tmp_path, judge, '{ by = "judge" }')
    labelled = rows(600)
    write(tmp_path / "labels.jsonl", labelled)
    result = evaluated(capsys)
    assert len(judge.requests) == 600  # one grade per pair
    by_judge = result["evidence"]["judge"]
    assert by_judge["decided"] == 600
    # by hand: called equivalent = right and not flipped, or wrong and flipped
    calls = [(r["label"] != flipped(r["question"]), r["label"]) for r in labelled]
    passed = [y for eq, y in calls if eq]
    assert by_judge["equivalent"] == len(passed)
    err = by_judge["pass_error"]
    assert err["wrong"] == len(passed) - sum(passed)
    assert err["low"] <= 0.10 <= err["high"] and abs(err["value"] - 0.10) <= 0.05
    assert result["judge"]["asked"] == 600 and result["judge"]["replayed"] == 0
    # 10% wrong is above the 5% target: not certified, so overall its pairs stay undecided
    assert result["judge"]["pass"] is False and result["undecided"] == 600
    assert result["judge"]["left_undecided"] == 600
    # the per-pair list agrees with the totals: every pair undecided, saying why
    listed = result["verdicts"]
    assert [v["verdict"] for v in listed] == ["undecided"] * 600
    assert all(v["decided_by"] is None for v in listed)
    assert all("is not certified" in v["why_undecided"] for v in listed)
    # what a run needs to state the judge's error and leave its uncertified side undecided
    table = result["judge_error"]
    assert (table["pass"], table["pass_upper"]) == (round(err["value"], 4), round(err["high"], 4))
    assert table["n"] == 600 and table["pass_certified"] is False
    assert "labels.jsonl, 600 labelled pairs" in table["measured_on"]
    assert evaluated(capsys)["evidence"] == result["evidence"]  # the same figures...
    assert len(judge.requests) == 600  # ...and the judge was asked nothing
    # the text says how many pairs the judge must have called equivalent: 230 at these targets
    # (the exact smallest count, not 233 from a step grid); it has them, but 10% wrong does not
    # certify, so the count is not called "enough" under "NOT certified"
    assert main(["calibrate", "--evaluate", "labels.jsonl"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    eq, diff = by_judge["equivalent"], by_judge["different"]
    assert eq >= 230
    assert (
        f"the judge's equivalent: needs 230 pairs the judge called equivalent; has {eq}: as many "
        "as the rule needs, yet not certified: its error on them is above the target"
    ) in said
    assert f"has {eq}: enough" not in said
    assert f"the judge's different: needs 114 pairs the judge called different; has {diff}" in said
    assert list((tmp_path / ".slam" / "judge").rglob("judge-*.json"))


def test_a_judge_certified_at_looser_targets_counts_and_the_text_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: FakeOpenAI, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    project(tmp_path, judge, '{ by = "judge" }')
    write(tmp_path / "labels.jsonl", rows(600))
    loose = ["--max-pass-error", "0.2", "--max-fail-error", "0.2"]
    result = evaluated(capsys, *loose)
    assert result["judge"]["pass"] and result["judge"]["fail"]
    assert result["decided"] == 600 == result["evidence"]["judge"]["decided"]
    assert main(["calibrate", "--evaluate", "labels.jsonl", *loose]) == 0
    text = capsys.readouterr().out
    assert "by judge: 600 decided" in text
    assert "judge's equivalent: certified (pass error <= 0.2" in text
    assert "0 call(s) made, 600 pair(s) replayed from its cache" in text
    # the line to paste is one the configuration accepts (config.MeasuredError)
    pasted = text.split("judge_error = ", 1)[1].splitlines()[0]
    assert "pass_certified = true" in pasted and "fail_certified = true" in pasted
    toml = tmp_path / "pyproject.toml"
    inline = '{ by = "judge" }'
    toml.write_text(toml.read_text().replace(inline, f"{inline[:-2]}, judge_error = {pasted} }}"))
    assert main(["config", "check"]) == 0, capsys.readouterr()


def test_the_cascade_splits_the_error_by_evidence_and_the_totals_add_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, judge: FakeOpenAI, capsys: Any
) -> None:
    """Bands decide the pairs whose candidate has the reference's words (fuzzy 1.0) and those with
    nothing in common (below the fail band); the judge grades the rest."""
    monkeypatch.chdir(tmp_path)
    project(tmp_path, judge, '{ by = "fuzzy", at_least = 0.95, fail_below = 0.2, then = ["judge"] }',
            "accept_uncertified_judge = true\n")  # fmt: skip
    labelled = rows(300)
    for i, r in enumerate(labelled[:100]):  # the same words (not identical: an identical answer
        # is exact): equivalent by the bands, 1 in 10 not good
        r["candidate"], r["reference"] = f"same text {i}.", f"same text {i}"
        r["label"] = i % 10 != 0
    for r in labelled[100:160]:  # nothing in common: different by the bands, all truly bad
        r["candidate"], r["reference"], r["label"] = "zzzz", "qqqq qqqq", False
    write(tmp_path / "labels.jsonl", labelled)
    result = evaluated(capsys)
    bands, by_judge = result["evidence"]["bands"], result["evidence"]["judge"]
    assert (bands["equivalent"], bands["different"]) == (100, 60)
    assert bands["pass_error"]["wrong"] == 10 and bands["fail_error"]["wrong"] == 0
    rest = labelled[160:]
    judged_eq = [r for r in rest if r["label"] != flipped(r["question"])]
    assert len(judge.requests) == len(rest) == by_judge["decided"] == 140
    assert by_judge["equivalent"] == len(judged_eq)
    assert by_judge["pass_error"]["wrong"] == sum(not r["label"] for r in judged_eq)
    assert by_judge["fail_error"]["wrong"] == sum(
        r["label"] for r in rest if r["label"] == flipped(r["question"])
    )
    assert result["decided"] == bands["decided"] + by_judge["decided"] == 300
    for side in ("pass_error", "fail_error"):
        for count in ("wrong", "of"):
            assert result[side][count] == bands[side][count] + by_judge[side][count]


def test_by_judge_without_a_judge_is_one_line_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\nequivalence = { by = "judge" }\n')
    write(tmp_path / "labels.jsonl", rows(4))
    assert main(["calibrate", "--evaluate", "labels.jsonl"]) == 2
    said = capsys.readouterr()
    out = said.err  # a refusal is one line on stderr, nothing on stdout (cli/exits.py)
    assert out.count("\n") == 1 and said.out == ""
    assert "by = 'judge' needs the judge to evaluate it: set [tool.slam] judge" in out


def test_a_pair_the_judge_cannot_grade_is_asked_once_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    with FakeOpenAI("I would rather not say.", model="gpt-4-judge") as mute:
        project(tmp_path, mute, '{ by = "judge" }')
        write(tmp_path / "labels.jsonl", rows(3))
        first = evaluated(capsys)
        assert len(mute.requests) == 6  # each pair asked, then reminded once
        assert first["judge"]["unjudged"] == 3 and first["undecided"] == 3
        assert "evidence" in first and not first["evidence"]
        second = evaluated(capsys)
        assert len(mute.requests) == 6 and second["judge"]["replayed"] == 3


def test_the_judge_s_pairs_are_asked_at_once_with_the_same_figures_as_one_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """Issue 41: the pairs the policy sends to the judge are known, so they are asked together
    (the judge's concurrency) and decided in order from the cache: the same verdicts, counts and
    errors as one at a time, and none counted as replayed from an earlier evaluation."""
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "labels.jsonl", rows(40))
    with FakeOpenAI(grade, model="gpt-4-judge", latency_s=0.05) as slow:
        project(tmp_path, slow, '{ by = "judge" }', extra="concurrency = 1\n")
        alone = evaluated(capsys)
        assert slow.peak_in_flight == 1 and len(slow.requests) == 40
    with FakeOpenAI(grade, model="gpt-4-judge", latency_s=0.05) as slow:
        project(tmp_path, slow, '{ by = "judge" }')
        (tmp_path / ".slam" / "judge").rename(tmp_path / "judge-one-at-a-time")
        together = evaluated(capsys)
        assert slow.peak_in_flight > 1 and len(slow.requests) == 40  # each pair once
    assert together["judge"]["asked"] == 40 and together["judge"]["replayed"] == 0
    assert together == alone


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_pair_labelled_twice_is_asked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any, concurrency: int
) -> None:
    """The same pair twice in the labels (the same candidate, reference and question) is one
    judge request, asked together with the others or one at a time: twice in a row, with a judge
    slow enough that the two would be in flight together if both were asked."""
    monkeypatch.chdir(tmp_path)
    labelled = rows(20)
    twice = [row for row in labelled[:5] for row in (row, row)]
    write(tmp_path / "labels.jsonl", twice + labelled[5:])
    with FakeOpenAI(grade, model="gpt-4-judge", latency_s=0.2) as server:
        project(tmp_path, server, '{ by = "judge" }', extra=f"concurrency = {concurrency}\n")
        result = evaluated(capsys)
        assert len(server.requests) == 20
    assert result["pairs"] == 25 and len(result["verdicts"]) == 25
