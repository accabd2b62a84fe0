"""One swapped call, traced: the pytest_slam functions it runs from the product's client to the
candidate and back (run by bench_size.py with ``PYTHONPATH`` set to the tree to trace).

    BENCH_TRACE_OUT=trace.json python bench/_trace_call.py CANDIDATE_URL REFERENCE_URL

A one-test suite (the benches' product) runs twice under pytest, recording its golden answers, then
replaying them as a CI run does (the traced run: no paid call on the path); its test makes one call
untraced (the process's first: its imports and the golden file's index, once a run), then wraps the
product's ``client.chat.completions.create`` in ``sys.setprofile`` and ``threading.setprofile``
(threads started during the call), so only a warm call counts, as every later call of a run is:
the test's set-up, its checks after it and the report do not. Each Python function entered whose
file is in ``pytest_slam`` is a hop; the files are listed in the order the call first reaches them.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _suite import write_suite

TRACED_TEST = """
import json, os, sys, threading

import product

def test_one_call(slm_model):
    hops = []

    def seen(frame, event, arg):
        if event == "call" and "pytest_slam" in frame.f_code.co_filename:
            hops.append([frame.f_code.co_filename, frame.f_code.co_name, threading.get_ident()])

    assert "billing" in product.triage(1)  # the first call: warms the process, not traced
    threading.setprofile(seen)
    sys.setprofile(seen)
    try:
        answer = product.triage(0)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert "billing" in answer
    with open(os.environ["BENCH_TRACE_OUT"], "w") as out:
        json.dump(hops, out)
"""


def main(argv: list[str]) -> int:
    candidate, reference = argv
    root = Path(tempfile.mkdtemp(prefix="slam-bench-trace-"))
    write_suite(root, candidate, reference)
    (root / "tests" / "test_triage.py").write_text(TRACED_TEST)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"]
    for extra in (["--slm-record=new"], []):  # the second run's trace is the one kept
        proc = subprocess.run([*cmd, *extra], cwd=root, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stdout[-3000:] + proc.stderr[-3000:])
            return proc.returncode
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
