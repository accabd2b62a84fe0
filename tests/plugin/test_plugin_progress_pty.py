"""The heartbeat as a user sees it: a real run in a pseudo-terminal 80 columns wide.

A product whose three tests each wait about 4.5 s on a slow loopback candidate (FakeOpenAI), the
heartbeat every second (ini ``slm_heartbeat``). What the terminal shows keeps pytest's lines whole
(each ``test_slow.py ...  [ 33%]`` line intact, no result on a line of its own), each of ours cut
to the width, headed "k of n tests", and a call named again at twice its age, not every
second. Only the order and shape of the lines are checked, never how long anything took.
"""

from __future__ import annotations

import fcntl
import itertools
import math
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time

import pytest
from patience import patient

from pytest_slam.testing import FakeOpenAI

COLUMNS = 80
SLOW_S = 4.5
SUITE = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", [1, 2, 3])
def test_ask_a_question_that_takes_the_model_a_while(n):
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": f"Question {n}?"}], max_tokens=8)
    assert r.choices[0].message.content
"""
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def run_in_pty(args: list[str], cwd: os.PathLike[str], seconds: float = 300) -> list[str]:
    """The lines a terminal of ``COLUMNS`` columns shows for ``args``, once the run has ended
    (waits for its end, not for a time)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    env = dict(os.environ, COLUMNS=str(COLUMNS), LINES="24", TERM="xterm")
    proc = subprocess.Popen(args, cwd=cwd, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + patient(seconds)
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the run ended: the terminal is closed
                break
            if not chunk:
                break
            out += chunk
        else:
            raise AssertionError(f"the run did not end within {seconds:.0f} s")
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=patient(30))
        os.close(master)
    return ANSI.sub("", out.decode(errors="replace")).replace("\r\n", "\n").split("\n")


def slow_run(pytester: pytest.Pytester, *args: str) -> list[str]:
    """The terminal's lines of the three slow tests' run."""
    pytester.makepyfile(test_slow=SUITE)
    with FakeOpenAI("The plan includes priority support.", latency_s=SLOW_S, ttft_s=0.2) as fake:
        pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]
slm_heartbeat = "1"

[tool.slam]
candidates = ["slow"]
reference = "none"

[tool.slam.models.slow]
base_url = "{fake.base_url}"
""")  # fmt: skip
        return run_in_pty(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], pytester.path
        )


def test_a_slow_run_at_80_columns_keeps_pytests_lines_whole(pytester: pytest.Pytester) -> None:
    lines = slow_run(pytester)
    text = "\n".join(lines)
    assert "3 passed" in text, text
    progress = [ln for ln in lines if ln.startswith("test_slow.py")]
    assert progress, text
    for line in progress:  # each of pytest's lines whole: the file, its results, its progress
        assert re.fullmatch(r"test_slow\.py( \.+)? +\[ *\d+%\]", line), text
    assert progress[-1].endswith("[100%]")
    results = "".join(ln.split()[1] for ln in progress if not ln.split()[1].startswith("["))
    assert results == "..."  # every result once, each on a line with its file
    assert not [ln for ln in lines if re.fullmatch(r"[.FEsx]+( +\[ *\d+%\])?", ln.strip())], text
    beats = [ln for ln in lines if ln.startswith("pytest-slam: ") and "(candidate)" in ln]
    assert beats, text
    for line in beats:  # fit to the width, never wrapped: the test's name's end (the id's
        assert len(line) < COLUMNS, line  # middle clipped), the call's time and the model kept;
        assert re.fullmatch(  # its tokens are what goes first (issue 52)
            r"pytest-slam: [0-3] of 3 tests, \.\.\.\S*_a_while\[slow-\d\] \d+ s: "
            r"slow \(candidate\)(, \d+ tok)?",
            line,
        ), line
    assert any(ln.startswith("pytest-slam: 0 of 3 tests,") for ln in beats)
    assert any(ln.startswith("pytest-slam: 2 of 3 tests,") for ln in beats)
    ages = [int(re.search(r" (\d+) s: slow \(candidate\)", ln).group(1)) for ln in beats]  # type: ignore[union-attr]
    calls: list[list[int]] = [[]]
    for age in ages:  # a new call starts younger than the last one named
        if calls[-1] and age <= calls[-1][-1]:
            calls.append([])
        calls[-1].append(age)
    assert len(calls) == 3, ages
    for named in calls:  # backed off: each time at about twice the age it was last named at
        assert all(b >= 2 * a - 1 for a, b in itertools.pairwise(named)), ages
        # 1, 2, 4 s ... (every second, a 4.5 s call would be named 4 times, a slower one more)
        assert len(named) <= math.log2(max(named[-1], 1)) + 1.5, ages


def test_with_v_each_result_line_is_whole_after_its_heartbeats(pytester: pytest.Pytester) -> None:
    lines = slow_run(pytester, "-v")
    text = "\n".join(lines)
    assert "3 passed" in text, text
    results = [ln for ln in lines if " PASSED " in ln]
    assert len(results) == 3, text
    for line in results:  # the test's name, its result and its progress on one line
        assert re.fullmatch(r"test_slow\.py::\S+ PASSED +\[ *\d+%\]", line), text
    for i, line in enumerate(lines):
        if " PASSED " in line:
            assert lines[i - 1].strip(), text  # no blank line left where a heartbeat ended
    assert any(ln.startswith("pytest-slam: 1 of 3 tests, ...") for ln in lines), text


RUNAWAY_SUITE = """
import json, openai, pytest

pytestmark = pytest.mark.slm

def test_classify():
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Classify as JSON"}],
        response_format={"type": "json_object"})
    assert r.choices[0].message.content
"""


def test_the_structured_cap_summary_line_wraps_at_80_columns(pytester: pytest.Pytester) -> None:
    """A runaway's summary line (hundreds of characters) wraps to the terminal under its indent,
    every word whole, instead of one line the terminal breaks anywhere."""
    pytester.makepyfile(test_json=RUNAWAY_SUITE)
    filler = '{"notes": "' + "and so on " * 5000
    with FakeOpenAI('{"sentiment": "positive"}') as ref, FakeOpenAI(filler) as runaway:
        pytester.makefile(".toml", pyproject=f"""
[tool.slam]
reference = "{ref.base_url}#gpt-4"
""")  # fmt: skip
        lines = run_in_pty(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--slm-record=new",
             f"--slm-models={runaway.base_url}#runaway"],
            pytester.path,
        )  # fmt: skip
    text = "\n".join(lines)
    start = next(i for i, ln in enumerate(lines) if ln.startswith("structured cap: "))
    after = itertools.takewhile(lambda ln: ln.startswith("  "), lines[start + 1 :])
    block = [lines[start], *after]
    assert len(block) > 3, text  # wrapped, not one line of hundreds of characters
    assert all(len(ln) <= COLUMNS for ln in block), block
    joined = " ".join(" ".join(block).split())
    assert "(test_json.py::test_classify[runaway])" in joined  # the test id whole
    assert joined.endswith("[tool.slam] max_tokens_cap = N)"), joined
    # no longer than the generation cap's note beside it (it was 629 characters in one run)
    assert len(joined) - len("(test_json.py::test_classify[runaway])") < 360, len(joined)
