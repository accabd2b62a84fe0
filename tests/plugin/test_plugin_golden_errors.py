"""What goes wrong with golden files, and what a user sees: broken files (truncated, a real git
merge conflict), goldens of another reference, a failing hosted reference while recording, and
Ctrl-C in the middle of a recording run. Real pytest runs (pytester), as in test_plugin_golden.py,
whose helpers these tests share.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from patience import patient
from plugin_golden_helpers import (
    GOLDEN,
    PRODUCT,
    QUESTIONS,
    SUITE,
    entries,
    run,
    write_project,
)

from pytest_slam.golden.fileformat import read_golden
from pytest_slam.testing import FakeOpenAI

MODULES = {"test_a": ("question a1", "question a2"), "test_b": ("question b",),
           "test_c": ("question c",)}  # fmt: skip


def write_modules(pytester: pytest.Pytester, modules: dict[str, tuple[str, ...]]) -> None:
    suites = {name: SUITE.format(questions=qs) for name, qs in modules.items()}
    pytester.makepyfile(product=PRODUCT, **suites)


def git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    argv = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=patient(60))


def merge_conflict(repo: Path, path: Path, old: str) -> None:
    """Two branches change the same answer; ``git merge`` leaves its markers in the file."""
    assert git(repo, "init", "-q").returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "goldens")
    text = path.read_text(encoding="utf-8")
    git(repo, "checkout", "-q", "-b", "theirs")
    path.write_text(text.replace(old, old + " (theirs)"), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "theirs")
    git(repo, "checkout", "-q", "-")
    path.write_text(text.replace(old, old + " (ours)"), encoding="utf-8")
    git(repo, "commit", "-q", "-am", "ours")
    assert git(repo, "merge", "theirs").returncode != 0  # the conflict


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to make a real merge conflict")
def test_broken_golden_files_fail_only_their_tests_naming_file_and_line(pytester, fake_gpt4, mini):
    write_modules(pytester, MODULES)
    write_project(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=4)
    truncated = pytester.path / GOLDEN / "test_b.json"
    text = truncated.read_text(encoding="utf-8")
    cut = text[: len(text) // 2]
    truncated.write_text(cut, encoding="utf-8")
    conflicted = pytester.path / GOLDEN / "test_c.json"
    merge_conflict(pytester.path, conflicted, "GPT-4 says: question c")
    lines = conflicted.read_text(encoding="utf-8").splitlines()
    marker = next(n for n, line in enumerate(lines, 1) if line.startswith("<<<<<<<"))
    broken = {p: p.read_bytes() for p in (truncated, conflicted)}

    write_modules(pytester, {"test_a": (*MODULES["test_a"], "question a3")})  # one more to record
    result = run(pytester, "--slm-record=new")
    result.assert_outcomes(passed=3, failed=2)
    out = result.stdout.str()
    assert (
        f"{GOLDEN}/test_b.json:{cut.count(chr(10)) + 1}: not valid JSON, it looks truncated" in out
    )
    assert f"{GOLDEN}/test_c.json:{marker}: unresolved git merge conflict marker" in out
    assert "golden files not written" not in out  # test_a's new answer was written; b, c left alone
    assert {p: p.read_bytes() for p in broken} == broken
    assert len(entries(pytester.path / GOLDEN / "test_a.json")) == 3


def test_goldens_of_another_reference_are_named_as_such(pytester, fake_gpt4, mini):
    write_modules(pytester, {"test_a": ("question a1",), "test_b": ("question b",)})
    write_project(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=2)
    turbo = pytester.path / "__slam__" / "gpt-4-turbo"
    turbo.mkdir()
    shutil.copy(pytester.path / GOLDEN / "test_b.json", turbo / "test_b.json")  # copied by hand
    toml = (pytester.path / "pyproject.toml").read_text(encoding="utf-8")
    (pytester.path / "pyproject.toml").write_text(toml.replace("#gpt-4", "#gpt-4-turbo"))

    result = run(pytester)
    result.assert_outcomes(failed=2)
    out = " ".join(result.stdout.str().split())  # the messages wrap in the terminal
    assert (
        "no golden answer of reference 'gpt-4-turbo' for this request" in out
        and "this module has golden answers recorded from another reference "
        f"('gpt-4' in {GOLDEN}/test_a.json), but this run's reference is 'gpt-4-turbo'"
        in out
    )
    assert (
        "__slam__/gpt-4-turbo/test_b.json: recorded for reference 'gpt-4', but this run's "
        "reference is 'gpt-4-turbo'" in out
    )


def test_failing_reference_is_retried_then_fails_the_test_writing_nothing_for_it(pytester, mini):
    # The first request gets 500 four times: failed. The next gets 429 (with Retry-After), 503 and
    # a timeout, then an answer: recorded. The third is answered at once.
    failures = [500, 500, 500, 500, 429, 503, "timeout"]
    with FakeOpenAI(lambda r: "GPT-4 says: " + r["messages"][-1]["content"], fail=failures,
                    timeout_sleep_s=8.0) as reference:  # fmt: skip
        pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
        # Roomy: under load a slow but normal answer must not count as the injected timeout.
        write_project(pytester, reference, mini, "reference_timeout_s = 4", retries=3)
        result = run(pytester, "--slm-record=new")
        assert reference.hits == 4 + 4 + 1
    result.assert_outcomes(passed=2, failed=1)
    out = " ".join(result.stdout.str().split())
    assert (
        f"recording from reference 'gpt-4' at {reference.base_url} failed after 4 attempt(s): "
        "HTTP 500: Injected failure: Internal Server Error. Nothing was written for this request"
    ) in out
    assert "FAILED test_product.py::test_answer[mini-How do I get a refund?]" in out
    recorded = read_golden(pytester.path / GOLDEN / "test_product.json", "gpt-4").entries
    assert sorted(r.answers[0].text for r in recorded.values()) == [
        "GPT-4 says: Error 500 since 9am",
        "GPT-4 says: Reset my password",
    ]
    assert [p.name for p in (pytester.path / GOLDEN).iterdir()] == ["test_product.json"]


SLOW_SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("i", range(40))
def test_ask(i):
    assert product.ask("question %d" % i)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_ctrl_c_while_recording_leaves_every_golden_file_valid(pytester, mini, workers):
    with FakeOpenAI(lambda r: "GPT-4 says: " + r["messages"][-1]["content"],
                    latency_s=0.2) as reference:  # fmt: skip
        pytester.makepyfile(product=PRODUCT, test_slow=SLOW_SUITE)
        write_project(pytester, reference, mini)
        argv = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--slm-record=new",
            *workers,
        ]
        proc = subprocess.Popen(
            argv,
            cwd=pytester.path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # its own process group, as a terminal's foreground job
        )
        deadline = time.monotonic() + patient(300)  # a safety net against a hang, not a speed check
        while reference.hits < 4 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
        out, _ = proc.communicate(timeout=patient(300))
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, out
    assert "stale golden entries not checked: the run was interrupted" in out
    folder = pytester.path / GOLDEN
    files = sorted(p.name for p in folder.iterdir())
    assert files == ["test_slow.json"], files  # no temp file left behind
    recorded = read_golden(folder / "test_slow.json", "gpt-4").entries
    assert 1 <= len(recorded) < 40
    for rec in recorded.values():
        assert rec.answers[0].text == "GPT-4 says: " + rec.request["messages"][0]["content"]


def test_recording_from_a_hosted_reference_with_no_key_says_no_key(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OPENAI_API_KEY unset: the recording is not tried (it would read "unreachable" or 401);
    the test's failure names the missing key and writes nothing."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    pytester.makepyfile(
        test_x="""
import openai, pytest

pytestmark = pytest.mark.slm

def test_x():
    openai.OpenAI(api_key="product-key").chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
"""
    )
    with FakeOpenAI("hello") as mini:
        pytester.makefile(".toml", pyproject="""
[tool.slam]
reference = "openai:gpt-4o"
reference_retries = 0
""")  # fmt: skip
        result = pytester.runpytest(
            "-p", "no:cacheprovider", f"--slm-models={mini.base_url}#mini", "--slm-record=new"
        )  # fmt: skip
    result.assert_outcomes(failed=1)
    out = " ".join(result.stdout.str().split())
    assert "needs its key, and $OPENAI_API_KEY is not set (no key: nothing was asked" in out, out
    assert "unreachable" not in out
    assert not (pytester.path / "__slam__").exists()
