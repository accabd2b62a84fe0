"""Progress while a run works: its engine's start and a heartbeat of each long model call.

Real pytest runs of a product whose opted-in test calls two candidates: the embedded SmolLM2
engine, which the plugin starts (and names: where the model is, starting, ready), and a slow
loopback model (FakeOpenAI) whose answer takes a few seconds, so the heartbeat (every second
here) names it while it runs. ``-q`` silences both; under xdist the controller prints the
workers' heartbeats.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from pytest_slam.testing import FakeOpenAI

SLOW_S = 2.6
SUITE = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

def test_ask():
    question = "Which plan includes priority support for enterprise customers?"
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], max_tokens=6)
    assert r.choices[0].message.content
"""


@pytest.fixture(autouse=True)
def wide(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wide terminal: these tests read whole lines (tests/test_plugin_progress_pty.py: 80)."""
    monkeypatch.setenv("COLUMNS", "300")


@pytest.fixture
def slow() -> Iterator[FakeOpenAI]:
    """A model whose answer streams in over ``SLOW_S`` seconds, a word at a time."""
    answer = "The Enterprise plan includes priority support, with a four hour response time."
    with FakeOpenAI(answer, latency_s=SLOW_S, ttft_s=0.3) as fake:
        yield fake


def project(pytester: pytest.Pytester, slow: FakeOpenAI, reference: str = "none") -> None:
    pytester.makepyfile(test_slow=SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["smollm2-135m", "slow"]
reference = "{reference}"

[tool.slam.models.slow]
base_url = "{slow.base_url}"
""")  # fmt: skip


ENGINE_LINES = [
    "pytest-slam: engine smollm2-135m: model file *SmolLM2-135M-Instruct*.gguf (* MB)",
    "pytest-slam: engine smollm2-135m (llama.cpp, * of * tokens) starting ...",
    "pytest-slam: engine smollm2-135m ready in * s on http://127.0.0.1:*/v1",
]


@pytest.mark.engine
def test_engine_lines_and_heartbeats_and_none_with_q(
    pytester: pytest.Pytester, slow: FakeOpenAI
) -> None:
    reference = FakeOpenAI("Enterprise includes priority support.", latency_s=SLOW_S).start()
    try:
        project(pytester, slow, f"{reference.base_url}#gpt-4")
        result = pytester.runpytest_subprocess("--slm-heartbeat=1", "--slm-record=new")
        result.assert_outcomes(passed=2)
        result.stdout.fnmatch_lines(ENGINE_LINES)
        result.stdout.fnmatch_lines(  # recorded while the first test runs
            ["pytest-slam: * of 2 tests, test_slow.py::test_ask[[]*] 1 s: *gpt-4 (reference)*"]
        )  # fmt: skip
        result.stdout.fnmatch_lines(  # named again at twice its age
            [
                "pytest-slam: * of 2 tests, test_slow.py::test_ask[[]slow[]] 1 s: slow (candidate), "
                "* tok",
                "pytest-slam: * of 2 tests, test_slow.py::test_ask[[]slow[]] 2 s: slow (candidate), "
                "* tok",
            ]
        )
        beats = [line for line in result.outlines if "slow (candidate), " in line]
        tokens = [int(re.search(r"slow \(candidate\), (\d+) tok", b)[1]) for b in beats]  # type: ignore[index]
        assert tokens[-1] > tokens[0] > 0, beats  # counted as they stream in
        assert not any(" 3 s: slow (candidate)" in b for b in beats), beats  # 1 s, 2 s, then 4 s

        quiet = pytester.runpytest_subprocess("--slm-heartbeat=1", "-q")
        quiet.assert_outcomes(passed=2)
        assert slow.hits == 2  # the slow call ran again, long enough for a heartbeat
        assert "pytest-slam: engine" not in quiet.stdout.str()
        assert "in flight" not in quiet.stdout.str()
    finally:
        reference.stop()


@pytest.mark.engine
def test_under_xdist_the_controller_speaks_for_its_workers(
    pytester: pytest.Pytester, slow: FakeOpenAI
) -> None:
    project(pytester, slow)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--slm-heartbeat=1")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(ENGINE_LINES)  # started by the controller, before its workers
    # one line for the run, each worker's call after its own test (the two may share the line)
    result.stdout.fnmatch_lines(
        [
            "pytest-slam: * of 2 tests, *[[]gw?[]] test_slow.py::test_ask[[]slow[]] * s: "
            "slow (candidate), * tok*"
        ]
    )


def test_heartbeat_ini_option_and_off(pytester: pytest.Pytester, slow: FakeOpenAI) -> None:
    pytester.makepyfile(test_slow=SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]
slm_heartbeat = "1"

[tool.slam]
candidates = ["slow"]
reference = "none"

[tool.slam.models.slow]
base_url = "{slow.base_url}"
""")  # fmt: skip
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["pytest-slam: 0 of 1 tests, test_slow.py::test_ask[[]slow[]] 1 s: slow (candidate)*"]
    )

    off = pytester.runpytest_subprocess("--slm-heartbeat=0")  # the option wins over the ini
    off.assert_outcomes(passed=1)
    assert "in flight" not in off.stdout.str()

    bad = pytester.runpytest_subprocess("--slm-heartbeat=-1")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["*--slm-heartbeat: '-1' is not a number of seconds (at least 0)"])


def test_a_bad_ini_heartbeat_is_one_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject="""
[tool.pytest.ini_options]
slm_heartbeat = "soon"

[tool.slam]
reference = "none"
""")  # fmt: skip
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: pytest-slam: ini option slm_heartbeat: 'soon' is not a number of seconds "
            "(at least 0); 0 turns the heartbeat off"
        ]
    )
    assert "Traceback" not in result.stderr.str()


HOSTILE = """
import socket
import pytest
from openai import OpenAI
from pytest_slam.run.workers.datagram import MAX_BYTES, seal

pytestmark = pytest.mark.slm


def test_ask(request):
    channel = request.config.workerinput["slam_progress"]  # what any local user could guess
    to, secret = ("127.0.0.1", channel["port"]), channel["secret"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"[" * 60000, to)  # nested: json.loads would raise RecursionError
        s.sendto(b'{"secret": "%s", "worker": "gw0", "text": "%s"}' % (secret.encode(), b"["), to)
        s.sendto(seal(secret, "gw0", "big " * 5000)[:MAX_BYTES] + b"x" * 40000, to)  # oversized
        s.sendto(seal("not-the-secret", "gw0", "forged line"), to)
        once = seal(secret, "gw0", "sealed once")
        s.sendto(once, to)
        s.sendto(once, to)  # replayed
        s.sendto(seal(secret, "gw0", "bell\\x07 \\x1b[2Jcleared \\u202eevil"), to)
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": "Which plan?"}], max_tokens=6)
    assert r.choices[0].message.content
"""


def test_a_hostile_datagram_never_stops_the_listener(
    pytester: pytest.Pytester, slow: FakeOpenAI
) -> None:
    pytester.makepyfile(test_slow=HOSTILE)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["slow"]
reference = "none"

[tool.slam.models.slow]
base_url = "{slow.base_url}"
""")  # fmt: skip
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "1", "--slm-heartbeat=1")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "forged line" not in out and "big big" not in out and "Traceback" not in out
    assert out.count("sealed once") == 1  # the replay was dropped
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    result.stdout.fnmatch_lines([
        "pytest-slam: [[]gw0[]] sealed once",
        "pytest-slam: [[]gw0[]] bell⟨U+0007⟩ ⟨U+001B⟩[[]2Jcleared ⟨U+202E⟩evil",
        # sent after every hostile datagram: the listener is still there
        "pytest-slam: 0 of 1 tests, [[]gw0[]] test_slow.py::test_ask[[]slow[]] 1 s: "
        "slow (candidate), * tok",
    ])  # fmt: skip


LONG_SUITE = """
import pytest
from openai import OpenAI

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", [1, 2])
def test_a_question_whose_answer_the_model_takes_a_while_to_stream_back(n):
    r = OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": f"Question {n}?"}], max_tokens=6)
    assert r.choices[0].message.content
"""


def long_project(pytester: pytest.Pytester, slow: FakeOpenAI) -> None:
    pytester.makepyfile(test_slow=LONG_SUITE)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["slow"]
reference = "none"

[tool.slam.models.slow]
base_url = "{slow.base_url}"
""")  # fmt: skip


def test_a_ci_log_gets_every_line_whole(
    pytester: pytest.Pytester, slow: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No terminal (stdout a pipe, as in CI) and 80 columns: a heartbeat longer than that is
    printed whole, with the test's full name; nothing of ours ends cut with "..."."""
    monkeypatch.setenv("COLUMNS", "80")
    long_project(pytester, slow)
    result = pytester.runpytest_subprocess("--slm-heartbeat=1")
    result.assert_outcomes(passed=2)
    name = "test_slow.py::test_a_question_whose_answer_the_model_takes_a_while_to_stream_back"
    beats = [ln for ln in result.outlines if ln.startswith("pytest-slam: ") and name in ln]
    assert beats, result.stdout.str()
    assert all(len(ln) > 80 and re.search(r"\] \d+ s: slow \(candidate\), \d+ tok$", ln)
               for ln in beats), beats  # fmt: skip
    assert not [ln for ln in result.outlines if ln.startswith("pytest-slam:") and
                ln.endswith("...")]  # fmt: skip


def test_under_xdist_the_run_has_one_heartbeat_for_all_its_workers(
    pytester: pytest.Pytester, slow: FakeOpenAI
) -> None:
    """Two workers, each waiting on a slow call: their heartbeats are printed as one line of the
    run (headed once with the tests done), each worker's calls after its id; never one line per
    worker at each beat."""
    long_project(pytester, slow)
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "--slm-heartbeat=1")
    result.assert_outcomes(passed=2)
    beats = [ln for ln in result.outlines if ln.startswith("pytest-slam: ") and "(candidate)" in ln]
    assert beats, result.stdout.str()
    for line in beats:
        assert re.match(r"pytest-slam: \d of 2 tests, \[gw\d\] ", line), line
        assert line.count(" of 2 tests") == 1, line
    assert any("[gw0]" in ln and "[gw1]" in ln for ln in beats), beats  # both in one line


@pytest.mark.engine
def test_a_ci_log_gets_the_engine_lines_whole(
    pytester: pytest.Pytester, slow: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 80 columns with no terminal, the engine's lines keep the model file's path and the
    engine's address to their ends (they were cut at 79 characters)."""
    monkeypatch.setenv("COLUMNS", "80")
    project(pytester, slow)
    result = pytester.runpytest_subprocess("--slm-heartbeat=0")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(ENGINE_LINES)
    engine = [ln for ln in result.outlines if ln.startswith("pytest-slam: engine ")]
    assert any(len(ln) > 80 for ln in engine), engine  # longer than the width, and whole
    model_file = next(ln for ln in engine if "model file" in ln)
    assert re.search(r"SmolLM2-135M-Instruct\S*\.gguf \(\d+ MB\)$", model_file), model_file


MANY_SUITE = LONG_SUITE.replace("[1, 2]", "range(6)")


def test_calls_fetched_ahead_do_not_flood_the_heartbeat(
    pytester: pytest.Pytester, slow: FakeOpenAI, fake_gpt4: FakeOpenAI
) -> None:
    """Six slow calls fetched ahead two at a time start one pair after another, each named on its
    own schedule: the run said a line at nearly every beat. A line now follows the last no sooner
    than the oldest call it named has run again as long (issue 52)."""
    long_project(pytester, slow)
    pytester.makepyfile(test_slow=MANY_SUITE)
    toml = pytester.path / "pyproject.toml"
    text = toml.read_text().replace('"none"', f'"{fake_gpt4.base_url}#gpt-4"')
    # alone_first = 0: the calls go two at a time from the first (none sent alone before them)
    toml.write_text(text.replace("[tool.slam]\n", "[tool.slam]\nalone_first = 0\n", 1))
    pytester.runpytest_subprocess("--slm-record=new", "--slm-heartbeat=0")  # the goldens
    result = pytester.runpytest_subprocess("--slm-heartbeat=0.5", "--slm-concurrency=2")
    result.assert_outcomes(passed=6)
    beats = [ln for ln in result.outlines if ln.startswith("pytest-slam: ") and "(candidate)" in ln]
    assert beats, result.stdout.str()
    # about 3 x 2.6 s of calls: lines at 0.5, 1, 2 s, then about one a 2.6 s round
    assert len(beats) <= 7, "\n".join(beats)


def test_a_heartbeat_with_vv_reopens_the_tests_line(
    pytester: pytest.Pytester, slow: FakeOpenAI
) -> None:
    """With ``-vv`` pytest 9.2 names a test by a structured node id (``_locationline`` reads its
    ``.path``): a heartbeat that ended the test's line opened it again with the plain string, an
    INTERNALERROR. The test's own line comes back with its result, as with ``-v``."""
    long_project(pytester, slow)
    pytester.makepyfile(test_slow=LONG_SUITE.replace("[1, 2]", "[1]"))
    result = pytester.runpytest_subprocess("--slm-heartbeat=1", "-vv")
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str(), result.stdout.str()
    result.assert_outcomes(passed=1)
    result.stdout.re_match_lines([r"test_slow\.py::test_a_question\S+\[slow-1\] PASSED"])
