"""``slam report merge`` refuses a shard holding a number JSON has no form for (``NaN``,
``Infinity``: Python's json reads them, no writer of a report writes them) in one line, exit 2,
nothing written, whether its digest was left as written or recomputed over the edit (that
recomputation itself crashed on the NaN: a traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import report_helpers as synth

from pytest_slam.cli import main
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.visits import Visits


@pytest.mark.parametrize("number", [float("nan"), float("inf")], ids=["NaN", "Infinity"])
@pytest.mark.parametrize("resealed", [False, True], ids=["digest-as-written", "digest-recomputed"])
def test_a_shard_with_a_nan_latency_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], number: float, resealed: bool
) -> None:
    outcomes = synth.outcomes()
    ran = sorted({o["nodeid"] for o in outcomes})
    shard = tmp_path / "shard.json"
    write_json(shard, aggregate(outcomes, synth.run_info()), outcomes,
               Visits(complete=True, collected=ran, selected=ran))  # fmt: skip
    doc = json.loads(shard.read_text(encoding="utf-8"))
    next(o for o in doc["outcomes"] if o["calls"])["calls"][0]["e2e_ms"] = number
    if resealed:  # a forger's digest over the edited values, as Python's json would write them
        import hashlib

        digest = hashlib.sha256(json.dumps(doc["visits"], sort_keys=True).encode())
        for outcome in doc["outcomes"]:
            digest.update(json.dumps(outcome).encode() + b"\n")
        doc["digest"] = "sha256:" + digest.hexdigest()
    shard.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(shard), "-o", str(out)]) == 2
    captured = capsys.readouterr()
    word = "NaN" if number != number else "Infinity"
    assert captured.err == (
        f"slam report merge: {shard} is not a pytest-slam JSON report: not valid JSON ({word} "
        "is not a number JSON allows); pass the file written by --slm-report\n"
    )
    assert captured.out == "" and not out.exists()
