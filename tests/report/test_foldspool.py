"""The merge's verdict reads each model's outcomes back from a file (``report/foldspool.py``): each
is the record ``Outcome.from_dict`` makes of its report line, less the texts the verdict never
reads, in the order the fold added it; a value of another version is read as ``from_dict`` reads
it."""

from __future__ import annotations

import dataclasses
import json

from pytest_slam.records import Outcome
from pytest_slam.report.foldspool import ModelSpools, outcome_of, pair_of, stripped
from pytest_slam.report.packed import outcome_line
from pytest_slam.testing.shards import case_outcomes

CALL_TEXTS: dict[str, object] = {
    "request": {}, "text": "", "tool_calls": None, "logprobs": None, "other_choices": None,
    "usage_details": None,
}  # fmt: skip


def without_texts(outcome: Outcome) -> Outcome:
    """The record less what the verdict never reads: requests, answers, explanations."""
    calls = [dataclasses.replace(c, **CALL_TEXTS) for c in outcome.calls]
    pairs = [
        dataclasses.replace(
            p,
            reference_text=None,
            reference_tool_calls=None,
            scores=[dataclasses.replace(s, explanation="") for s in p.scores],
        )
        for p in outcome.pairs
    ]
    return dataclasses.replace(outcome, calls=calls, pairs=pairs)


def varied() -> list[Outcome]:
    """Outcomes of the generated suite, and ones with the fields a run may add to them."""
    outcomes = [o for case in (0, 7, 25) for o in case_outcomes(case)]
    first = outcomes[0]
    first.repeat = {"runs": 3, "passed": 2, "rate": 2 / 3}
    first.egress = ["api.example.com:443"]
    first.calls[0].tool_calls = [{"id": "t1", "function": {"name": "f", "arguments": "{}"}}]
    first.calls[0].error, first.calls[0].error_kind = "timed out", "timeout"
    first.pairs[0].scores[0].explanation = "close in meaning"
    first.pairs[0].missing = True
    return outcomes


def test_each_outcome_reads_back_as_its_record_less_the_texts_in_order_by_model() -> None:
    outcomes = varied()
    spools = ModelSpools()
    for outcome in outcomes:  # the models interleaved, as the merge folds them
        spools.add(outcome.model, stripped(json.loads(outcome_line(outcome))))

    assert spools.models() == list(dict.fromkeys(o.model for o in outcomes))
    for model in spools.models():
        got = list(spools.take(model))
        assert got == [without_texts(o) for o in outcomes if o.model == model]
    assert list(spools.take(outcomes[0].model)) == []  # taken once: the file is given up


def test_a_value_with_a_key_no_record_has_is_read_as_from_dict_reads_it() -> None:
    outcome = case_outcomes(3)[1]
    data = json.loads(outcome_line(outcome))
    data["calls"][0]["tpot_ms"] = 12.5  # a key ``as_dict`` derives (a version-1 report writes it)
    data["pairs"][0]["scores"][0]["passed"] = True
    data["added_later"] = {"by": "a newer pytest-slam"}

    assert outcome_of(json.loads(json.dumps(data))) == Outcome.from_dict(data)
    assert pair_of(data["pairs"][0]) == Outcome.from_dict(data).pairs[0]
    assert outcome_of(json.loads(outcome_line(outcome))) == outcome


def test_a_suite_encoded_once_seals_as_the_visits_encoded_whole() -> None:
    """The merge encodes the suite its shards share once (``merge._Suite``) and builds the visits'
    text around it: the digest must be the one ``Seal`` makes of the whole value, or every merged
    report's signature would change (odd ids: non-ASCII, quotes, a lone surrogate)."""
    from pytest_slam.report.merge import _Suite
    from pytest_slam.report.seal import Seal
    from pytest_slam.report.visits import Visits

    ids = ["tests/test_a.py::test_é[x]", 'tests/t.py::test_"q"', "t.py::s\ud800", "b.py::z"]
    suite = _Suite()
    for selected in (ids[:2], ids[1:]):
        visits = Visits(collected=list(ids))
        written: dict[str, object] = {"selected": selected, "collected": visits.collected, "z": 1}
        suite.shared(visits, written)
        assert written["collected"] == ids
        assert suite.seal(written).text() == Seal(written).text()
