"""``slam calibrate`` end to end through ``slam``'s own entry point: labels in, certified bands
written into every form of pyproject.toml, read back by ``--evaluate`` on other labels; every bad
input one line, exit 2, nothing written."""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import pytest

from pytest_slam.cli import main
from pytest_slam.config import EquivalenceTable

FUZZY = ["--scorers", "token_sort_ratio,token_set_ratio,ratio", "--resamples", "200"]
WORDS = (
    "river",
    "bridge",
    "garden",
    "engine",
    "violin",
    "harbor",
    "glacier",
    "market",
    "tower",
    "lantern",
    "meadow",
    "canyon",
    "orchard",
    "compass",
    "quarry",
    "beacon",
)


def labelled_rows(
    n: int, seed: int, module: str = "", close_good: float = 0.99, identical: bool = True
) -> list[dict[str, object]]:
    """Pairs whose fuzzy score tells the label at both ends and nothing in the middle: a close
    paraphrase is acceptable, an unrelated answer is not, a half-changed one is a coin. A close
    one may come out identical (settled before the bands); ``identical`` false changes its last
    word instead, so every pair reaches the bands."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ref_words = rng.sample(WORDS, 10)
        kind = rng.random()
        if kind < 0.4:
            cand, label = [*ref_words[:9], rng.choice(WORDS)], rng.random() < close_good
            if cand == ref_words and not identical:  # a paraphrase, not the same answer
                cand[9] = cand[9][::-1]
        elif kind < 0.7:
            cand, label = [w[::-1] for w in rng.sample(WORDS, 10)], rng.random() < 0.02
        else:
            cand, label = [*ref_words[:5], *(w[::-1] for w in ref_words[5:])], rng.random() < 0.5
        row = {"candidate": " ".join(cand), "reference": " ".join(ref_words), "label": label,
               "unit": f"{seed}-{i // 2}"}  # fmt: skip
        rows.append({**row, "module": module} if module else row)
    return rows


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", labelled_rows(900, 1, identical=False))  # bands: 900
    write_jsonl(tmp_path / "b.jsonl", labelled_rows(600, 2))
    return tmp_path


def equivalence(path: Path) -> dict[str, object]:
    return tomllib.loads(path.read_text(encoding="utf-8"))["tool"]["slam"]["equivalence"]


def test_round_trip_calibrate_writes_bands_evaluate_reads_them_back(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = project / "pyproject.toml"
    pyproject.write_text('[tool.slam]\nreference = "openai:gpt-4"\n'
                         'equivalence = { by = "fuzzy", at_least = 0.7, then = ["judge"] }\n')  # fmt: skip
    assert main(["calibrate", "--labels", "a.jsonl", *FUZZY]) == 0
    out = capsys.readouterr().out
    assert out.count("[tool.slam.equivalence]") == 1  # printed once
    assert "#   plain  fuzzy token_sort_ratio >= 0.7: pass error 0." in out
    assert "from 900 labelled pairs (450 prompts): pass error <= 0.05 and fail error <= 0.1" in out
    table = equivalence(pyproject)
    assert table["by"] == "fuzzy" and table["then"] == ["judge"]  # the user's cascade is kept
    assert 0.5 < table["at_least"] <= 1 and 0 < table["fail_below"] < table["at_least"]
    # the certified errors as data, read by every run (Score.error): within the targets
    band_error = table["band_error"]
    assert isinstance(band_error, dict) and band_error["n"] == 900
    assert 0 <= band_error["pass"] <= band_error["pass_upper"] <= 0.05 + 0.05
    assert 0 <= band_error["fail"] <= band_error["fail_upper"]
    EquivalenceTable.model_validate(table)  # what the run's configuration accepts
    assert main(["calibrate", "--evaluate", "b.jsonl", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) == {
        "pairs",
        "decided",
        "equivalent",
        "different",
        "undecided",
        "pass_error",
        "fail_error",
        "evidence",
        "judge_unset",
        "outside_domain",
        "verdicts",
        "scope_unknown",  # labels without a module: the bands' features are unknown
    }
    # no [tool.slam] judge: the cascade stops there; identical answers are exact, as in a run
    assert set(result["evidence"]) == {"exact", "bands"}
    assert len(result["verdicts"]) == 600
    assert result["judge_unset"] == result["undecided"]
    assert result["pairs"] == 600
    assert result["equivalent"] + result["different"] + result["undecided"] == 600
    assert result["equivalent"] > 150 and result["different"] > 100 and result["undecided"] > 50
    passed = result["pass_error"]
    assert passed["of"] == result["equivalent"] and passed["value"] <= 0.05
    assert passed["low"] <= passed["value"] <= passed["high"] < 0.08
    assert result["fail_error"]["value"] <= 0.10
    assert main(["calibrate", "--evaluate", "b.jsonl"]) == 0  # text by default
    text = capsys.readouterr().out
    assert text.startswith("600 labelled pairs: ") and "(95% Clopper-Pearson intervals)" in text


FORMS = {
    "none": '[project]\nname = "x"\n\n[tool.slam]\nreference = "openai:gpt-4"\n',
    "inline": '[tool.slam]\nreference = "openai:gpt-4"\nequivalence = { by = "semantic" }\n'
              '\n[tool.ruff]\nline-length = 99\n',
    "table": '[tool.slam]\nreference = "openai:gpt-4"\n\n# chosen by `slam calibrate` from 3 pairs\n'
             '#   old figures\n[tool.slam.equivalence]\nby = "fuzzy"\nat_least = 0.7\n'
             'then = ["review"]\n\n[tool.slam.equivalence.modules."tests/test_old.py"]\n'
             'by = "fuzzy"\nat_least = 0.9\n\n[tool.ruff]\nline-length = 99\n',
    "absent": None,
}  # fmt: skip


@pytest.mark.parametrize("form", FORMS)
def test_every_form_of_equivalence_is_replaced_and_the_rest_kept(
    project: Path, form: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pyproject = project / "other.toml"
    if FORMS[form] is not None:
        pyproject.write_text(FORMS[form])
    before = tomllib.loads(FORMS[form] or "")
    for _ in range(2):  # again: replaced, not duplicated
        assert main(["calibrate", "--labels", "a.jsonl", "--pyproject", "other.toml", *FUZZY]) == 0
    text = pyproject.read_text()
    after = tomllib.loads(text)
    assert text.count("[tool.slam.equivalence]") == 1 and text.count("# chosen by") == 1
    assert "old figures" not in text and "test_old.py" not in text
    assert after["tool"]["slam"]["equivalence"]["at_least"] > 0.5
    kept = after["tool"]["slam"]["equivalence"].get("then")
    assert kept == (["review"] if form == "table" else None)
    after["tool"]["slam"].pop("equivalence")
    before.get("tool", {}).get("slam", {}).pop("equivalence", None)
    assert after == (before or {"tool": {"slam": {}}})  # every other setting as it was
    capsys.readouterr()


def test_a_module_with_labels_enough_gets_its_own_bands(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(5)
    noise = [{**r, "label": rng.random() < 0.5} for r in labelled_rows(300, 3)]  # nothing holds
    write_jsonl(project / "m.jsonl", labelled_rows(900, 4, module="tests/test_qa.py") + noise)
    (project / "tests").mkdir()
    (project / "tests" / "test_qa.py").write_text("")
    assert main(["calibrate", "--labels", "m.jsonl", *FUZZY]) == 0
    out = capsys.readouterr().out
    table = equivalence(project / "pyproject.toml")
    own = table["modules"]["tests/test_qa.py"]
    assert own["at_least"] > 0.5 and own["fail_below"] > 0
    assert own["band_error"]["domain"]["modules"] == ["tests/test_qa.py"]  # its feature only
    assert "at_least" not in table  # the other 300 pairs certify nothing: no verdict there
    assert "no band certified: similarity is reported" in out
    write_jsonl(project / "e.jsonl", labelled_rows(300, 6, module="tests/test_qa.py") + noise)
    assert main(["calibrate", "--evaluate", "e.jsonl", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["pairs"] == 600 and result["undecided"] >= 300  # the noise is never decided
    assert result["pass_error"]["value"] <= 0.05


def test_labels_parse_strictly_whatever_their_spelling(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ "0" and "false" are not acceptable (``bool("0")`` is True): spelled any allowed way, the
    same labels give the same evaluation; a UTF-8 byte order mark is accepted."""
    rows = labelled_rows(600, 2)
    (project / "pyproject.toml").write_text(
        '[tool.slam.equivalence]\nby = "fuzzy"\nat_least = 0.85\nfail_below = 0.3\n'
    )
    spellings = [(True, False), ("true", "false"), ("1", "0"), (1, 0), ("win", "loss"),
                 ("tie", "both_bad"), (" TRUE ", "False")]  # fmt: skip
    outputs = set()
    for k, (yes, no) in enumerate(spellings):
        mixed = [{**r, "label": yes if r["label"] else no} for r in rows]
        path = write_jsonl(project / f"s{k}.jsonl", mixed)
        if k == 1:
            path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
        assert main(["calibrate", "--evaluate", path.name, "--format", "json"]) == 0
        outputs.add(capsys.readouterr().out)
    assert len(outputs) == 1
    assert json.loads(outputs.pop())["pass_error"]["value"] < 0.05


def bad_line(project: Path, line: str) -> list[str]:
    (project / "bad.jsonl").write_text(json.dumps(labelled_rows(1, 0)[0]) + "\n" + line + "\n")
    return ["--labels", "bad.jsonl"]


BAD = {
    "missing labels file": (lambda p: ["--labels", "nope.jsonl"], "--labels nope.jsonl: no such file"),
    "labels a directory": (lambda p: ["--labels", "."], "--labels .: is a directory"),
    "non-JSON line": (lambda p: bad_line(p, "{oops"), "bad.jsonl:2: not JSON"),
    "number line": (lambda p: bad_line(p, "42"), "bad.jsonl:2: a JSON int, not an object"),
    "null candidate": (lambda p: bad_line(p, '{"candidate": null, "reference": "r", "label": 1}'),
                       "bad.jsonl:2: candidate is null, not a string"),
    "unknown label": (lambda p: bad_line(p, '{"candidate": "c", "reference": "r", "label": "yes"}'),
                      'bad.jsonl:2: label "yes" is not a label; use true/false, 1/0'),
    "label 2": (lambda p: bad_line(p, '{"candidate": "c", "reference": "r", "label": 2}'),
                "bad.jsonl:2: label 2 is not a label"),
    "not UTF-8": (lambda p: (p / "bad.jsonl").write_bytes(b"\xff\xfe{}") and ["--labels", "bad.jsonl"],
                  "--labels bad.jsonl: not UTF-8 text"),
    "unparsable pyproject": (lambda p: (p / "broken.toml").write_text("[tool.slam\n") and
                             ["--labels", "a.jsonl", "--pyproject", "broken.toml"],
                             "--pyproject broken.toml: not valid TOML"),
    "resamples 0": (lambda p: ["--labels", "a.jsonl", "--resamples", "0"],
                    "--resamples 0: a 95% bootstrap interval needs at least 100 resamples"),
    "pass error 0": (lambda p: ["--labels", "a.jsonl", "--max-pass-error", "0"],
                     "--max-pass-error 0.0: must be between 0 and 1"),
    "confidence 95": (lambda p: ["--labels", "a.jsonl", "--confidence", "95"],
                      "--confidence 95.0: must be at least 0.5 and below 1"),
    "min count 0": (lambda p: ["--labels", "a.jsonl", "--min-count", "0"],
                    "--min-count 0: must be at least 1"),
    "unknown scorer": (lambda p: ["--labels", "a.jsonl", "--scorers", "jaccard"],
                       "--scorers jaccard: jaccard not available here; choose from"),
    "too few labels": (lambda p: write_jsonl(p / "few.jsonl", labelled_rows(30, 0)) and
                       ["--labels", "few.jsonl"], "needs at least 40 labelled pairs"),
    "report missing": (lambda p: ["--report", "nope.json"], "report not found: nope.json"),
    "evaluate missing": (lambda p: ["--evaluate", "nope.jsonl"], "--evaluate nope.jsonl: no such file"),
    "dotted keys": (lambda p: (p / "pyproject.toml").write_text(
        '[tool.slam]\nequivalence.by = "fuzzy"\n') and ["--labels", "a.jsonl"],
        "could not put the table in place of its equivalence setting"),
    "pyproject in a folder not there": (lambda p: ["--labels", "a.jsonl", "--pyproject",
                                                    "new-dir/x.toml"],
        "--pyproject new-dir/x.toml: its folder new-dir does not exist; nothing was calibrated"),
    "pyproject a folder": (lambda p: ["--labels", "a.jsonl", "--pyproject", "."],
                           "--pyproject .: a folder, not a file; nothing was calibrated"),
    "evaluate a judge, none set": (lambda p: (p / "pyproject.toml").write_text(
        '[tool.slam.equivalence]\nby = "judge"\n') and ["--evaluate", "b.jsonl"],
        "by = 'judge' needs the judge to evaluate it: set [tool.slam] judge to a model spec"),
    "evaluate a judge not running": (lambda p: (p / "pyproject.toml").write_text(
        '[tool.slam]\njudge = "smollm2-135m"\n[tool.slam.equivalence]\nby = "judge"\n')
        and ["--evaluate", "b.jsonl"],
        "judge = 'smollm2-135m' has no running server to ask: start it and name it by URL"),
}  # fmt: skip


@pytest.mark.parametrize("case", BAD)
def test_each_bad_input_is_one_line_exit_2_and_nothing_written(
    project: Path, case: str, capsys: pytest.CaptureFixture[str]
) -> None:
    make, expected = BAD[case]
    args = make(project)
    files = {p: p.read_bytes() for p in project.iterdir() if p.is_file()}
    assert main(["calibrate", *FUZZY[:2], *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.splitlines()  # stderr, as every command's refusal (cli/exits.py)
    assert len(lines) == 1 and lines[0].startswith("slam calibrate: ") and expected in lines[0]
    assert captured.out == "" and "Traceback" not in captured.err
    assert {p: p.read_bytes() for p in project.iterdir() if p.is_file()} == files


def test_a_fail_band_alone_is_written_without_a_pass_band_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Labels where a close paraphrase is only a coin: no pass band certifies, the fail band does;
    the table then sets fail_below alone and --evaluate calls nothing equivalent."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", labelled_rows(1600, 4, close_good=0.5))
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\nreference = "openai:gpt-4"\n')
    assert main(["calibrate", "--labels", "a.jsonl", *FUZZY]) == 0
    assert "no pass band certified" in capsys.readouterr().out
    table = equivalence(tmp_path / "pyproject.toml")
    assert "at_least" not in table and 0 < table["fail_below"] < 1
    assert main(["calibrate", "--evaluate", "a.jsonl", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    exact = result["evidence"]["exact"]["equivalent"]  # identical answers: certain, as in a run
    assert result["equivalent"] == exact and result["different"] > 300
    assert result["fail_error"]["value"] <= 0.10


def test_calibrate_records_its_domain_and_evaluate_counts_the_pairs_outside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Bands calibrated on 10-word answers record the lengths they saw; on answers five times as
    long they decide nothing by the bands, and --evaluate says how many pairs fell outside."""
    monkeypatch.chdir(tmp_path)
    write_jsonl(tmp_path / "a.jsonl", labelled_rows(900, 1, identical=False))  # bands: 900
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\nreference = "openai:gpt-4"\n')
    assert main(["calibrate", "--labels", "a.jsonl", *FUZZY]) == 0
    said = " ".join(capsys.readouterr().out.split())
    good = sum(bool(r["label"]) for r in labelled_rows(900, 1))
    assert f"you have 900 labelled pair(s): {good} acceptable, {900 - good} not" in said
    assert "a pass band (3 scorers): needs " in said and "the judge's equivalent: needs 230" in said
    domain = equivalence(tmp_path / "pyproject.toml")["band_error"]["domain"]  # type: ignore[index]
    assert domain["scope"] == "labels a.jsonl"
    low, high = domain["reference_chars"]
    assert 30 <= low <= high <= 120 and len(domain["length_ratio"]) == len(domain["values"]) == 2
    long_rows = [{**r, "candidate": " ".join([str(r["candidate"])] * 5),
                  "reference": " ".join([str(r["reference"])] * 5)}
                 for r in labelled_rows(300, 2)]  # fmt: skip
    write_jsonl(tmp_path / "long.jsonl", long_rows)
    assert main(["calibrate", "--evaluate", "long.jsonl", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    exact = result["evidence"].get("exact", {}).get("decided", 0)
    assert result["outside_domain"] == 300 - exact and "bands" not in result["evidence"]
    assert main(["calibrate", "--evaluate", "long.jsonl"]) == 0
    said = capsys.readouterr().out
    assert f"{300 - exact} pair(s) outside what the bands were measured on" in said


def test_identical_labelled_pairs_are_counted_neither_in_the_bands_error_nor_the_labels_needed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run settles an identical answer before the bands ("exact"): `slam calibrate` says so,
    measures the bands on the rest, and counts only the rest as labels the bands can use."""
    monkeypatch.chdir(tmp_path)
    rows = labelled_rows(900, 1)
    kept = [r for r in rows if r["candidate"] != r["reference"]]
    assert 0 < len(kept) < 900
    write_jsonl(tmp_path / "a.jsonl", rows)
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\nreference = "openai:gpt-4"\n')
    assert main(["calibrate", "--labels", "a.jsonl", "--dry-run", *FUZZY[:2]]) == 0
    said = " ".join(capsys.readouterr().out.split())
    good = sum(bool(r["label"]) for r in kept)
    assert "from 900 labelled pairs" in said
    assert (
        f"measured on the {len(kept)} pairs the bands decide: {900 - len(kept)} identical" in said
    )
    assert f"n = {len(kept)}, " in said
    assert (
        f"you have {len(kept)} labelled pair(s): {good} acceptable, {len(kept) - good} not" in said
    )


def test_bands_hold_on_the_labels_modules_and_those_named(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The top-level bands record the modules their labels came from, and ``--modules`` adds the
    ones the user says are like them; labels without a module record none (scope unknown)."""
    (project / "tests").mkdir()
    for name in ("test_qa.py", "test_faq.py"):
        (project / "tests" / name).write_text("")
    write_jsonl(project / "m.jsonl", labelled_rows(600, 4, module="tests/test_qa.py"))
    assert main(["calibrate", "--labels", "m.jsonl", *FUZZY, "--modules", "tests/test_faq.py"]) == 0
    domain = equivalence(project / "pyproject.toml")["band_error"]["domain"]
    assert domain["modules"] == ["tests/test_faq.py", "tests/test_qa.py"]
    write_jsonl(project / "n.jsonl", labelled_rows(600, 4))
    assert main(["calibrate", "--labels", "n.jsonl", *FUZZY]) == 0
    assert "modules" not in equivalence(project / "pyproject.toml")["band_error"]["domain"]
    capsys.readouterr()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--labels", "m.jsonl", "--modules", "tests/test_nope.py"],
            "slam calibrate: --modules tests/test_nope.py: no such test module in ",
        ),
        (
            ["--labels", "m.jsonl"],
            "slam calibrate: --labels m.jsonl: its labels' modules (tests/test_qa.py) match no "
            "test module in ",
        ),
        (
            ["--evaluate", "m.jsonl"],
            "slam calibrate: --evaluate m.jsonl: its labels' modules (tests/test_qa.py) match no "
            "test module in ",
        ),
    ],
    ids=["a named module that does not exist", "labels of another project", "evaluated so"],
)
def test_a_scope_that_matches_nothing_is_one_line_and_nothing_written(
    project: Path, capsys: pytest.CaptureFixture[str], args: list[str], said: str
) -> None:
    write_jsonl(project / "m.jsonl", labelled_rows(600, 4, module="tests/test_qa.py"))
    pyproject = project / "pyproject.toml"
    pyproject.write_text("[tool.slam]\n")
    assert main(["calibrate", *args, *FUZZY]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(said) and err.count("\n") == 1, err
    assert pyproject.read_text() == "[tool.slam]\n"
