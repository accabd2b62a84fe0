"""``slam calibrate`` chooses the containment scorer where its labels show it decides the most:
short golden answers listing alternatives, met by sentences that say one of them whole (acceptable)
or a word of each (not). Fuzzy token_set reads both as the same bag of words; containment does
not."""

from __future__ import annotations

import json
import random
import tomllib
from pathlib import Path

import pytest

from pytest_slam.cli import main
from pytest_slam.config import EquivalenceTable

NAMES = ("river", "bridge", "garden", "engine", "violin", "harbor", "glacier", "market", "tower",
         "lantern", "meadow", "canyon", "orchard", "compass", "quarry", "beacon")  # fmt: skip


def short_answers(n: int, seed: int) -> list[dict[str, object]]:
    """A reference "a b/c d"; half the candidates say "c d" in a sentence (acceptable but for 1
    in 50), half say "b c" (a word of each answer: not acceptable but for 1 in 50)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b, c, d = rng.sample(NAMES, 4)
        whole = rng.random() < 0.5
        said = f"{c} {d}" if whole else f"{b} {c}"
        label = whole != (rng.random() < 0.02)
        rows.append({"candidate": f"It is {said}, as far as I know.", "reference": f"{a} {b}/{c} {d}",
                     "label": label, "unit": f"{seed}-{i}"})  # fmt: skip
    return rows


def test_calibrate_chooses_containment_where_it_decides_the_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    for name, rows in (("a.jsonl", short_answers(900, 1)), ("b.jsonl", short_answers(600, 2))):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows))
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.slam]\nreference = "openai:gpt-4"\n')
    scorers = ["--scorers", "token_set_ratio,containment", "--resamples", "100"]
    assert main(["calibrate", "--labels", "a.jsonl", *scorers]) == 0
    capsys.readouterr()
    written = pyproject.read_text()
    # the plain token_sort row says it was not scored (it said "none called; decides 100.0%")
    assert "token_sort_ratio >= 0.7: not scored in this calibration" in written
    assert not [line for line in written.splitlines() if "token_sort" in line and "decides" in line]
    table = tomllib.loads(written)["tool"]["slam"]["equivalence"]
    assert table["by"] == "containment" and "method" not in table  # its defaults, as calibrated
    assert 0.5 < table["at_least"] <= 1.0 and 0.5 <= table["fail_below"] <= table["at_least"]
    EquivalenceTable.model_validate(table)  # what the run's configuration accepts
    assert main(["calibrate", "--evaluate", "b.jsonl", "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["decided"] == 600 and result["evidence"]["bands"]["equivalent"] > 250
    assert result["pass_error"]["value"] <= 0.05 and result["fail_error"]["value"] <= 0.05
