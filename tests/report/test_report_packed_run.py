"""The end of a run reads its packed outcomes one at a time (report/packed.PackedRun): the same
verdict and the same report bytes as from every outcome as a record, without them all at once."""

from __future__ import annotations

import random
import tracemalloc
from pathlib import Path

import report_helpers as synth

from pytest_slam.records import Outcome
from pytest_slam.report import jsonreport
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.packed import KeptOutcomes, PackedRun, pack, unpack
from pytest_slam.run.end.judge_stage import scrubbed

SECRET = "sk-proj-" + "A1b2C3d4" * 6  # an OpenAI-shaped key quoted in an answer


def _run() -> list[dict[str, object]]:
    """Every kind of outcome of the synthetic run, out of order, with a test that reported twice
    (a call and a teardown error: the verdict keeps the worse) and an answer quoting a key."""
    rows = synth.outcomes()
    rows.append({**rows[0], "outcome": "error", "message": "teardown broke"})
    calls = [{**rows[1]["calls"][0], "text": f"use {SECRET}"}]  # type: ignore[index]
    rows[1] = {**rows[1], "calls": calls}
    random.Random(7).shuffle(rows)
    return rows


def test_a_packed_run_gives_the_verdict_and_the_report_bytes_of_its_records(
    tmp_path: Path,
) -> None:
    rows, info = _run(), synth.run_info()
    listed = [Outcome.from_dict(r) for r in rows]
    packed = KeptOutcomes(rows).run()
    assert isinstance(packed, PackedRun) and len(packed) == len(rows)
    verdict = aggregate(listed, info)
    assert aggregate(packed, info).as_dict() == verdict.as_dict()
    assert any(SECRET in pack(o.as_dict()) for o in packed)  # the scrub has one to replace
    clean_list, _ = scrubbed(listed)
    clean_run, _ = scrubbed(packed)
    assert isinstance(clean_run, PackedRun)
    assert [o.as_dict() for o in clean_run] == [o.as_dict() for o in clean_list]
    assert SECRET not in "".join(pack(o.as_dict()) for o in clean_run)
    a = jsonreport.write_json(tmp_path / "records.json", verdict, clean_list)
    b = jsonreport.write_json(tmp_path / "packed.json", verdict, clean_run)
    assert _undated(a) == _undated(b)


def _undated(path: Path) -> list[str]:
    """The report's lines but the one saying when it was written."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if not line.startswith('  "generated_at": ')]


def test_the_scrub_and_the_json_report_hold_one_outcome_record_at_a_time(
    tmp_path: Path,
) -> None:
    calls = [
        [synth.call("m", f"answer {i} " * 40, 10.0, 20.0, 30, 12, None, key="k_triage")]
        for i in range(400)
    ]
    rows = [synth.outcome("m", f"test_{i}", "passed", c, []) for i, c in enumerate(calls)]
    texts = [pack(r) for r in rows]
    tracemalloc.start()
    every = [unpack(t) for t in texts]  # what the end of a run held before: every record
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del every
    run = PackedRun(texts)
    verdict = aggregate(run, synth.run_info(("m",)))
    tracemalloc.start()
    clean, _ = scrubbed(run)
    jsonreport.write_json(tmp_path / "run.json", verdict, clean)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < held / 4, (peak, held)
    assert (tmp_path / "run.json").read_text().count('"nodeid"') == 400
