"""``slam calibrate``: labelled pairs in, a justified threshold out, or a refusal that says why.

Labels come from judge verdicts cached in real golden files (written with the golden file format
itself) or from human verdicts in JSON Lines.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from pytest_slam.cli import main
from pytest_slam.cli.calibrate_labels import pairs_from_goldens
from pytest_slam.compare.bandselect import Targets, sequence_start
from pytest_slam.compare.calibrate import (
    MIN_PAIRS,
    LabelledPair,
    available_scorers,
    calibrate,
    verdict_label,
)
from pytest_slam.golden.fileformat import GoldenFile, dump_golden
from pytest_slam.records import GoldenAnswer, GoldenRecord

FUZZY = ["--scorers", "token_sort_ratio,ratio", "--resamples", "100"]
TOPICS = ["river", "bridge", "garden", "engine", "violin", "harbor", "glacier", "market"]


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, n: int) -> Path:
    """A project whose golden file holds ``n`` requests, each with one cached judge verdict."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\nreference = "openai:gpt-4"\n')
    golden = GoldenFile(tmp_path / "fixtures/slam/openai-gpt-4/test_x.json", "openai:gpt-4")
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        ref = f"The {topic} number {i} is long, old and well known in the region for its history."
        good = i % 2 == 0
        cand = ref.replace("well known", "famous") if good else f"No idea about {topic} {i}."
        verdict = {"value": 0.9 if good else 0.1, "grade": 9.1 if good else 1.9, "mode": "grade",
                   "explanation": "judged", "candidate": cand}  # fmt: skip
        golden.entries[f"k{i}"] = GoldenRecord(
            f"k{i}", {"messages": [{"role": "user", "content": f"Tell me about {topic} {i}"}]},
            [GoldenAnswer(text=ref)], judge={f"judge-{i}": verdict},
        )  # fmt: skip
    golden.path.parent.mkdir(parents=True)
    golden.path.write_text(dump_golden(golden))
    return tmp_path / "pyproject.toml"


def test_refuses_with_too_few_labels_and_says_how_many(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = _project(tmp_path, monkeypatch, 12)
    before = pyproject.read_text()
    assert main(["calibrate", *FUZZY]) == 2
    out = capsys.readouterr().err  # a refusal: one line on stderr (cli/exits.py)
    assert f"needs at least {MIN_PAIRS} labelled pairs with 10 of each verdict; found 12 " in out
    assert "(6 equivalent, 6 not)" in out and "--slm-record=new" in out
    assert pyproject.read_text() == before  # nothing written


def test_writes_certified_bands_from_cached_judge_verdicts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = _project(tmp_path, monkeypatch, 800)
    pairs = pairs_from_goldens(tmp_path / "fixtures/slam", "openai:gpt-4")
    assert len(pairs) == 800 and {p.module for p in pairs} == {"test_x.py"}
    assert main(["calibrate", *FUZZY]) == 0
    out = capsys.readouterr().out
    assert "written to pyproject.toml" in out
    text = pyproject.read_text()
    table = tomllib.loads(text)["tool"]["slam"]["equivalence"]
    assert table["by"] == "fuzzy" and table["method"] in ("token_sort_ratio", "ratio")
    assert 0.3 < table["fail_below"] <= table["at_least"] < 0.95
    assert "modules" not in table  # one module holds every label: the top-level table is its
    assert "pass error 0.000 [0.000, 0.009] (0 of 400)" in text  # judged pairs, none wrong


def test_too_few_pairs_for_a_band_write_no_verdict_and_say_what_a_band_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = _project(tmp_path, monkeypatch, 60)
    pyproject.write_text(pyproject.read_text() + "equivalence = { at_least = 0.7 }\n")
    assert main(["calibrate", *FUZZY]) == 0
    needs = sequence_start(0.05, 0.05 / 4, 20)  # two scorers, two bands: delta / 4 each
    assert f"no pass band certified (a band needs {needs}+ pairs" in capsys.readouterr().out
    table = tomllib.loads(pyproject.read_text())["tool"]["slam"]["equivalence"]
    assert table == {"by": "fuzzy", "method": "token_sort_ratio"}  # 0.7 was not earned


def test_verdict_labels() -> None:
    assert verdict_label({"value": 2 / 3, "grade": 7, "candidate": "x"}) == (1, 2 / 3)
    assert verdict_label({"value": 5 / 9, "grade": 6, "candidate": "x"}) == (0, 5 / 9)
    assert verdict_label({"value": 0.5, "mode": "pairwise", "candidate": "x"}) == (1, 0.5)
    assert verdict_label({"value": 0.9, "grade": 9}) is None  # no candidate text: not a pair


def test_human_verdicts_from_slam_review_are_labels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_slam.golden.store import GoldenStore
    from pytest_slam.report.aggregate import RunInfo, aggregate
    from pytest_slam.report.jsonreport import write_json
    from pytest_slam.review.pairs import text_hash
    from pytest_slam.review.verdicts import make_verdict, save_verdicts

    _project(tmp_path, monkeypatch, 0)
    store = GoldenStore(tmp_path / "fixtures/slam", "openai:gpt-4")
    golden = GoldenFile(store.path_for("test_x.py"), store.reference)
    outcomes, verdicts = [], []
    for i in range(44):
        topic = TOPICS[i % len(TOPICS)]
        ref = f"The {topic} number {i} is long, old and well known in the region for its history."
        good = i % 2 == 0
        cand = ref.replace("old", "ancient") if good else f"Sorry, nothing on {topic} {i}."
        request = {"messages": [{"role": "user", "content": f"Tell me about {topic} {i}"}]}
        golden.entries[f"k{i}"] = GoldenRecord(f"k{i}", request, [GoldenAnswer(text=ref)])
        outcomes.append({"nodeid": f"test_x.py::test_{i}[cand]", "test": f"test_x.py::test_{i}",
                         "model": "cand", "calls": [{"role": "candidate", "text": cand,
                         "request": request}], "pairs": [{"call_index": 0, "key": f"k{i}"}]})  # fmt: skip
        verdicts.append(make_verdict(key=f"k{i}", model="cand", answer_hash=text_hash(cand),
                                     reference_hash=text_hash(ref), reviewer="ana",
                                     verdict="tie" if good else "loss"))  # fmt: skip
    golden.path.parent.mkdir(parents=True, exist_ok=True)
    golden.path.write_text(dump_golden(golden))
    save_verdicts(store, "test_x.py", verdicts)
    info = RunInfo(models=[{"name": "cand"}], reference="openai:gpt-4",
                   settings={"reference": "openai:gpt-4"})  # fmt: skip
    write_json(tmp_path / "run.json", aggregate(outcomes, info), outcomes)
    assert main(["calibrate", "--report", "run.json", "--dry-run", *FUZZY]) == 0
    out = capsys.readouterr().out
    assert "from 44 labelled pairs (44 prompts)" in out
    assert "pass error 0.000 [0.000, 0.154] (0 of 22)" in out  # the 0.7 row: every tie above it
    (store.dir / "test_x.review.jsonl").write_text('{"key": "k1", "verdict": "maybe"}\n')
    assert main(["calibrate", "--report", "run.json", *FUZZY]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "test_x.review.jsonl:1: not a review verdict" in lines[0]
    assert not (tmp_path / "pyproject.toml").read_text().count("equivalence")


def _labelled(n: int) -> list[LabelledPair]:
    """``n`` ordinary labelled pairs: half a close paraphrase (acceptable), half a non-answer."""
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        ref = f"The {topic} number {i} is long, old and well known in the region for its history."
        good = i % 2 == 0
        cand = ref.replace("well known", "famous") if good else f"No idea about {topic} {i}."
        out.append(LabelledPair(f"k{i}", cand, ref, int(good), float(good), "test_x.py"))
    return out


def test_bands_are_measured_only_on_pairs_they_decide_not_identical_or_empty_ones() -> None:
    # a run settles an identical answer ("exact") and a blank candidate ("empty") before the
    # bands: labels of such pairs must not move the bands' error or the domain they decide on
    ordinary = _labelled(800)
    settled = [
        *(LabelledPair(f"s{i}", p.reference, p.reference, 1, 1.0, "test_x.py")
          for i, p in enumerate(ordinary[:300])),
        LabelledPair("e", "  ", ordinary[1].reference, 0, 0.0, "test_x.py"),
    ]  # fmt: skip
    scorers = available_scorers(["token_sort_ratio"])
    alone = calibrate(ordinary, Targets(), scorers=scorers)[0]
    mixed = calibrate([*ordinary, *settled], Targets(), scorers=scorers)[0]
    assert alone.chosen is not None and alone.domain is not None
    assert (mixed.pairs, mixed.settled, alone.pairs, alone.settled) == (1101, 301, 800, 0)
    assert mixed.chosen == alone.chosen and mixed.baseline == alone.baseline
    assert mixed.domain == alone.domain
    assert mixed.domain is not None and mixed.domain.length_ratio is not None
    assert mixed.domain.length_ratio[0] > 0.0  # not dragged to 0 by the one empty candidate
