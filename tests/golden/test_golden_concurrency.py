"""Several processes flushing the same golden file under the lock never lose an entry."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from patience import patient

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

MODULE = "tests/test_shared.py"
WORKERS, PER_WORKER, FLUSH_EVERY = 4, 50, 5


def _record_and_flush(root: str, worker: int, barrier) -> None:
    """One xdist-like worker: records its own entries and flushes often, racing the others."""
    store = GoldenStore(Path(root), "openai:gpt-4")
    barrier.wait()
    for i in range(PER_WORKER):
        request = {"model": "gpt-4", "messages": [{"role": "user", "content": f"w{worker} q{i}"}]}
        answer = GoldenAnswer(text=f"answer {worker}/{i}", model="gpt-4-0613")
        record = GoldenRecord(request_key(request), request, [answer])
        store.record(MODULE, record, f"{MODULE}::test_{worker}")
        if (i + 1) % FLUSH_EVERY == 0:
            store.flush()


def test_four_processes_flushing_one_file_keep_all_200_entries(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    root = tmp_path / "golden"
    procs = [
        ctx.Process(target=_record_and_flush, args=(str(root), w, barrier)) for w in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=patient(120))
    assert [p.exitcode for p in procs] == [0] * WORKERS
    path = GoldenStore(root, "openai:gpt-4").path_for(MODULE)
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert len(doc["entries"]) == WORKERS * PER_WORKER
    texts = sorted(e["answers"][0]["text"] for e in doc["entries"].values())
    expected = sorted(f"answer {w}/{i}" for w in range(WORKERS) for i in range(PER_WORKER))
    assert texts == expected
    assert not [p for p in path.parent.iterdir() if p.name != path.name]  # no temp files left
