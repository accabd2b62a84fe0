"""A finished test's Outcome packed as one string (report/packed.py): the same Outcome read back,
a fraction of the memory, and the run's kept outcomes read as the dicts they were."""

from __future__ import annotations

import json
import tracemalloc

import report_helpers as synth

from pytest_slam.records import Call, Outcome
from pytest_slam.report.packed import KeptOutcomes, outcome_line, pack, unpack
from pytest_slam.run.end.accounting import Accounting
from pytest_slam.run.test.outcomes import keep_final


class _Phase:
    def __init__(self, when: str = "call", outcome: str = "passed") -> None:
        self.when, self.outcome = when, outcome


def test_every_outcome_reads_back_as_the_dict_it_was_packed_from() -> None:
    outcomes = synth.outcomes()
    odd = Call(
        model="m", role="candidate", request={"x": [1, 2.0, None]}, text="\ud800 \u202e",
        ttft_ms=0.0, e2e_ms=0, in_flight=0, error="", capped=True, finish_reason="length", cap=8,
    ).as_dict()  # fmt: skip
    odd_outcome = synth.outcome("m", "test_odd", "failed", [odd], [])
    outcomes.append({**odd_outcome, "duration_s": 0})  # an int where the default is a float
    for data in outcomes:
        packed = pack(data)
        assert unpack(packed).as_dict() == data
        # the same JSON types: an int stays an int where the default is a float
        assert json.dumps(unpack(packed).as_dict()) == json.dumps(data)


def test_an_outcome_s_report_line_is_the_same_from_its_record_and_from_its_dict() -> None:
    """The report writes a record's line without making its whole dict first
    (``packed._slim_record``): the same text as the line of its ``as_dict``, and read back as
    that dict, for every kind of outcome (an int where the default is a float, empty lists,
    text that needs escapes, a required list left empty)."""
    outcomes = synth.outcomes()
    odd = Call(
        model="m", role="candidate", request={"x": [1, 2.0, None]}, text="\ud800 \u202e",
        ttft_ms=0.0, e2e_ms=0, in_flight=0, error="", capped=True, finish_reason="length", cap=8,
    ).as_dict()  # fmt: skip
    outcomes.append({**synth.outcome("m", "test_odd", "failed", [odd], []), "duration_s": 0})
    for data in outcomes:
        record = Outcome.from_dict(data)
        line = outcome_line(record)
        assert line == outcome_line(record.as_dict()) and line.isascii()
        assert Outcome.from_dict(json.loads(line)).as_dict() == record.as_dict()


def test_a_packed_outcome_leaves_out_its_defaults_and_what_is_derived() -> None:
    data = synth.mini_outcomes()[0]
    packed = json.loads(pack(data))
    call = packed["calls"][0]
    assert "tpot_ms" not in call and "cut_by_cap" not in call and "error" not in call
    assert "passed" not in packed["pairs"][0]["scores"][0]
    assert len(pack(data)) < len(json.dumps(data)) * 0.75


def test_kept_outcomes_hold_a_fraction_of_the_dicts_memory() -> None:
    rows = [synth.outcome("m", f"test_{i}", "passed", *_one_call(i)) for i in range(300)]
    text = [json.dumps(r) for r in rows]
    tracemalloc.start()
    as_dicts = [json.loads(t) for t in text]
    dicts, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tracemalloc.start()
    kept = KeptOutcomes(as_dicts)
    packed, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert packed < dicts / 4, (packed, dicts)
    assert list(kept) == rows


def _one_call(i: int) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    c = synth.call("m", f"answer {i}", 10.0, 20.0, 30, 12, None, key="k_triage")
    return [c], [synth.pair(0, "k_triage", ("fuzzy", 0.8))]


def test_the_run_keeps_one_final_outcome_per_test_from_packed_reports() -> None:
    acc = Accounting("serial")
    first, second = synth.mini_outcomes()[:2]
    worse = {**first, "outcome": "error"}
    keep_final(acc.outcomes, pack(first), _Phase())
    keep_final(acc.outcomes, pack(second), _Phase())
    keep_final(acc.outcomes, pack(worse), _Phase("teardown"))  # a failed teardown replaces it
    assert isinstance(acc.outcomes, KeptOutcomes)
    assert [o["nodeid"] for o in acc.outcomes] == [first["nodeid"], second["nodeid"]]
    assert acc.outcomes[0] == worse
    assert [o.nodeid for o in acc.outcomes.records()] == [first["nodeid"], second["nodeid"]]
    assert all(isinstance(o, Outcome) for o in acc.outcomes.records())


def test_a_plain_list_of_outcomes_gets_dicts_from_packed_reports() -> None:
    kept: list[dict[str, object]] = []
    data = synth.mini_outcomes()[0]
    keep_final(kept, pack(data), _Phase())
    assert kept == [data]


def test_having_reads_only_the_outcomes_whose_text_holds_a_field() -> None:
    rows = synth.mini_outcomes()
    diverged = json.loads(json.dumps(rows[0]))
    diverged["pairs"][0]["diverged_at"] = 2
    kept = KeptOutcomes([*rows, diverged])
    assert kept.having('"diverged_at"') == [diverged]
