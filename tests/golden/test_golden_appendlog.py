"""A recording run's append log (golden/appendlog.py): every answer on disk before its call
returns, the golden file rewritten a logarithmic number of times, nothing lost to a kill, a torn
line or a second process, and the folded file byte-identical to what a buffered flush writes."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

from golden_helpers import MODULE, rec, store_at
from patience import patient

from pytest_slam.golden.store import GoldenStore

ANSWERS = 400
SECRET = "sk-proj-Ab3dEf6hIj9kLmN0pQrStUvWxYz12345"


def durable_at(root: Path) -> GoldenStore:
    return GoldenStore(root / "fixtures" / "slam", "openai:gpt-4", write_through=True)


def entries_on_disk(store: GoldenStore) -> dict:
    return json.loads(store.path_for(MODULE).read_text(encoding="utf-8"))["entries"]


def test_recording_rewrites_the_golden_file_a_logarithmic_number_of_times(tmp_path):
    store = durable_at(tmp_path)
    rewrites, inode = 0, None
    for i in range(ANSWERS):
        store.record(MODULE, rec(f"prompt {i}", f"answer {i}"), "t::x")
        now = os.stat(store.path_for(MODULE)).st_ino  # os.replace: a rewrite is a new inode
        rewrites, inode = rewrites + (now != inode), now
    # Rewriting the file for every answer made recording quadratic; the log keeps it linear.
    assert rewrites < ANSWERS // 5, rewrites
    lagging = ANSWERS - len(entries_on_disk(store))
    assert 0 < lagging <= ANSWERS // 8  # the rest is in the log, fsynced, not yet folded
    assert store.lookup(MODULE, rec(f"prompt {ANSWERS - 1}").key) is not None
    [path] = store.flush()
    assert len(entries_on_disk(store)) == ANSWERS
    assert not store.log_path(MODULE).exists()  # folded, then emptied
    buffered = store_at(tmp_path / "buffered")
    for i in reversed(range(ANSWERS)):
        buffered.record(MODULE, rec(f"prompt {i}", f"answer {i}"), "t::x")
    [same] = buffered.flush()
    assert path.read_bytes() == same.read_bytes()


KILLED = """
import os, signal, sys
sys.path[:0] = [{tests!r}]
from {helpers} import MODULE, rec
from pytest_slam.golden.store import GoldenStore
store = GoldenStore({root!r}, "openai:gpt-4", write_through=True)
for i in range({n}):
    store.record(MODULE, rec(f"prompt {{i}}", f"answer {{i}}"), "t::x")
os.kill(os.getpid(), signal.SIGKILL)  # no flush, no finally: what a CI cancel does
"""


def test_a_run_killed_mid_recording_loses_no_answer_and_the_next_store_folds_the_log(tmp_path):
    root = tmp_path / "fixtures" / "slam"
    helpers = sys.modules[rec.__module__]  # the records' builder, wherever the tests keep it
    where, name = str(Path(helpers.__file__ or "").parent), helpers.__name__
    script = KILLED.format(tests=where, helpers=name, root=str(root), n=ANSWERS // 2)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    store = durable_at(tmp_path)
    assert store.log_path(MODULE).stat().st_size > 0  # the kill left answers only in the log
    assert len(entries_on_disk(store)) < ANSWERS // 2
    for i in range(ANSWERS // 2):
        found = store.lookup(MODULE, rec(f"prompt {i}").key)
        assert found is not None and found.answers[0].text == f"answer {i}"
    assert len(entries_on_disk(store)) == ANSWERS // 2  # opening the module folded the log
    assert not store.log_path(MODULE).exists()


def test_a_torn_last_line_is_skipped_and_every_whole_line_kept(tmp_path):
    store = durable_at(tmp_path)
    for i in range(40):
        store.record(MODULE, rec(f"prompt {i}"), "t::x")
    log = store.log_path(MODULE)
    assert log.exists()
    with open(log, "ab") as handle:
        handle.write(b'{"key": "torn by a kill", "entry": {"answ')  # no newline: cut mid-append
    fresh = durable_at(tmp_path)
    assert all(fresh.lookup(MODULE, rec(f"prompt {i}").key) for i in range(40))
    assert len(entries_on_disk(fresh)) == 40 and not log.exists()


def test_a_logged_line_holds_no_secret(tmp_path):
    store = durable_at(tmp_path)
    for i in range(30):  # enough answers that the last ones stay in the log
        store.record(MODULE, rec(f"prompt {i}", f"use {SECRET} for {i}"), "t::x")
    log = store.log_path(MODULE).read_text(encoding="utf-8")
    assert "for 29" in log and "[redacted]" in log  # the last answer waits in the log, scrubbed
    assert SECRET not in log
    assert SECRET not in store.path_for(MODULE).read_text(encoding="utf-8")


def test_logs_live_in_the_ignored_scratch_folder(tmp_path):
    store = durable_at(tmp_path)
    store.record(MODULE, rec("a"), "t::x")
    scratch = tmp_path / "fixtures" / ".slam"
    assert store.log_path(MODULE).is_relative_to(scratch)
    assert (scratch / ".gitignore").read_text(encoding="utf-8").splitlines()[-1] == "*"


WORKERS, PER_WORKER = 4, 60


def _record_through(root: str, worker: int, barrier) -> None:
    """One xdist-like worker recording as a test run does: write-through, flushed at the end."""
    store = GoldenStore(Path(root), "openai:gpt-4", write_through=True)
    barrier.wait()
    for i in range(PER_WORKER):
        store.record(MODULE, rec(f"w{worker} q{i}", f"answer {worker}/{i}"), f"t::{worker}")
    if worker % 2:  # half the workers end normally; the others are killed before their flush
        store.flush()


def test_four_workers_logging_one_module_keep_every_answer(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(WORKERS)
    root = tmp_path / "fixtures" / "slam"
    procs = [
        ctx.Process(target=_record_through, args=(str(root), w, barrier)) for w in range(WORKERS)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=patient(120))
    assert [p.exitcode for p in procs] == [0] * WORKERS
    store = durable_at(tmp_path)
    texts = sorted(store.lookup(MODULE, rec(f"w{w} q{i}").key).answers[0].text  # type: ignore[union-attr]
                   for w in range(WORKERS) for i in range(PER_WORKER))  # fmt: skip
    assert texts == sorted(f"answer {w}/{i}" for w in range(WORKERS) for i in range(PER_WORKER))
    assert len(entries_on_disk(store)) == WORKERS * PER_WORKER
