"""The report on real recorded answers: AlpacaEval's five small models against GPT-4 Turbo.

Each small model's recorded answer is replayed as a candidate call and scored with the recorded
GPT-4 Turbo judge preference (``preference - 1``: 1 means the small model's answer was preferred).
The verdict's mean equivalence must then equal the win rates the data's README states, and the
HTML and JSON reports must hold 1,249 real answer pairs. Needs ../shared/data.
"""

from __future__ import annotations

import json

import pytest
from html_helpers import report_data, sides
from slam_helpers import SHARED_DATA

from pytest_slam.records import Call, Outcome, Pair, Score
from pytest_slam.report.aggregate import RunInfo, aggregate
from pytest_slam.report.html import render_html
from pytest_slam.report.jsonreport import load_report, write_json
from pytest_slam.report.terminal import render_table

DATA = SHARED_DATA / "alpaca_eval_gpt4_vs_slm"
RECORDS = DATA / "records.jsonl"
# README: win rates over this subset, mean(pref - 1) in %
WIN_RATES = {
    "gemma-2b-it": 3.8,
    "phi-2": 0.75,
    "minichat-3b": 1.6,
    "FuseChat-Llama-3.2-1B-Instruct": 27.75,
    "FuseChat-Llama-3.2-3B-Instruct": 50.15,
}

pytestmark = pytest.mark.skipif(
    not RECORDS.is_file(), reason=f"real recorded data not found at {RECORDS} (../shared/data)"
)


def _outcome(record: dict, model: str) -> dict:
    text = record["slm_outputs"][model]
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": record["instruction"]}]}
    key = f"alpaca-{record['idx']}"
    nodeid = f"tests/test_alpaca.py::test_instruction[{record['idx']}-{model}]"
    common = {"nodeid": nodeid, "test": f"tests/test_alpaca.py::test_instruction[{record['idx']}]",
              "model": model}  # fmt: skip
    if text is None:
        call = Call(model, "candidate", request, error="no output upstream", key=key)
        return Outcome(**common, outcome="error", calls=[call.as_dict()]).as_dict()
    call = Call(model, "candidate", request, text=text, replayed=True, key=key)
    pref = record["gpt4_turbo_judge_preference"][model]
    pair = Pair(0, key, "golden/alpaca.json", record["gpt4_turbo_output"],
                reference_model="gpt-4-1106-preview",
                scores=[Score("gpt4_turbo_judge", pref - 1).as_dict()])  # fmt: skip
    return Outcome(**common, calls=[call.as_dict()], pairs=[pair.as_dict()]).as_dict()


@pytest.fixture(scope="module")
def real():
    records = [json.loads(line) for line in RECORDS.read_text(encoding="utf-8").splitlines()]
    outcomes = [_outcome(r, m) for r in records for m in WIN_RATES]
    info = RunInfo(models=[{"name": m} for m in WIN_RATES], reference="gpt-4-1106-preview")
    return outcomes, aggregate(outcomes, info)


def test_mean_equivalence_reproduces_the_recorded_win_rates(real) -> None:
    _, verdict = real
    measured = {r.model: round(r.equivalence_mean * 100, 2) for r in verdict.models}
    assert measured == WIN_RATES
    phi = verdict.row("phi-2")
    assert (phi.tests_errored, phi.calls_errored, phi.pairs) == (1, 1, 249)


def test_replayed_answers_give_no_latency_and_the_table_says_so(real) -> None:
    _, verdict = real
    assert all(r.latency_samples == 0 and r.e2e_p95_ms is None for r in verdict.models)
    for width in (100, 66):  # 60 once; phi-2's failed call ("0.01 (1f/250)") takes the room
        lines = render_table(verdict, width=width)
        assert max(map(len, lines)) <= width
        rows = [line for line in lines if line.startswith("FuseC")]
        assert len(rows) == 2 and "3B-Instruct" in rows[1] and "0.50" in rows[1]
        assert len({r.split()[0] for r in rows}) == 2  # shortened names stay distinct


def test_reports_hold_every_real_pair(real, tmp_path) -> None:
    outcomes, verdict = real
    report = load_report(write_json(tmp_path / "alpaca.json", verdict, outcomes))
    assert report.verdict.as_dict() == verdict.as_dict()
    assert sum(len(o.pairs) for o in report.outcomes) == 1249
    page = render_html(verdict, outcomes)
    rows, pairs = report_data(page)  # every pair, drawn by the page a (test, model) at a time
    assert len(pairs) == 1249 and sum(r[7] for r in rows["rows"]) == 1249
    assert page.count("<script>") == 1  # answers with code stay text
    shown = [sides(p)[1].replace("<ins>", "").replace("</ins>", "")[:200] for p in pairs]
    assert sorted(shown) == sorted(o["calls"][0]["text"][:200] for o in outcomes if o["pairs"])
