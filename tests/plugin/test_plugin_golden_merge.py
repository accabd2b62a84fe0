"""Goldens recorded apart merge into the serial recording: CI shards and git branches, end to end.

One product suite (two modules, a request asked by two tests, a two-turn conversation) is recorded
by real pytest runs (``--slm-record=new``) against a FakeOpenAI reference on loopback: whole, in one
copy of the project, and as three shards of disjoint node ids, each in its own copy. The shards'
goldens merged by ``slam golden merge`` are the serial recording's files; two git branches that each
recorded part of the suite merge through the driver set up as the docs say (docs/how-to/shard.md).

A recording stamps each answer with its own clock (``recorded_at``) and its latency (``ttft_ms``,
``e2e_ms``), which no two runs share: those three values are set to one placeholder on both sides
before the bytes are compared; every other byte is compared as written.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from patience import patient
from plugin_golden_helpers import write_project
from slam_helpers import PRODUCT

from pytest_slam.testing import FakeOpenAI

CHAT = """

def chat(question):
    messages = [{"role": "user", "content": question}]
    first = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
    messages += [{"role": "assistant", "content": first.choices[0].message.content},
                 {"role": "user", "content": "And then?"}]
    second = client.chat.completions.create(model="gpt-4", messages=messages, temperature=0)
    return second.choices[0].message.content
"""
HELP_TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_refund():
    assert product.ask("How do I get a refund?")

def test_password():
    assert product.ask("Reset my password")

def test_hours_first():
    assert product.ask("What are your opening hours?")

def test_hours_again():
    assert product.ask("What are your opening hours?")

def test_chat():
    assert product.chat("My order is late")

@pytest.mark.parametrize("n", range(3))
def test_many(n):
    assert product.ask("Question %d" % n)
"""
BILLING_TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

def test_invoice():
    assert product.ask("Where is my invoice?")

def test_vat():
    assert product.ask("Is VAT included?")
"""
HELP, BILLING = "tests/test_help.py", "tests/test_billing.py"
SHARDS = (
    [f"{HELP}::test_refund", f"{HELP}::test_hours_first", f"{BILLING}::test_invoice"],
    [f"{HELP}::test_password", f"{HELP}::test_chat", f"{HELP}::test_many"],
    [f"{HELP}::test_hours_again", f"{BILLING}::test_vat"],
)
GOLDEN = "__slam__/gpt-4/tests/test_help.json"
CLOCK = re.compile(rb'("recorded_at": )"[^"]*"|("(?:ttft|e2e)_ms": )[0-9.]+')
GIT_ENV = {"GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
           "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@example.com"}  # fmt: skip


@pytest.fixture
def mini():
    with FakeOpenAI(lambda req: "mini: " + req["messages"][-1]["content"]) as fake:
        yield fake


@pytest.fixture
def project(pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI) -> Path:
    """The product and its suite, nothing recorded yet."""
    pytester.makepyfile(product=PRODUCT + CHAT)
    pytester.mkdir("tests")
    (pytester.path / HELP).write_text(HELP_TESTS, encoding="utf-8")
    (pytester.path / BILLING).write_text(BILLING_TESTS, encoding="utf-8")
    write_project(pytester, fake_gpt4, mini)
    return pytester.path


def copy_of(project: Path, to: Path) -> Path:
    shutil.copytree(project, to, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache"))
    return to


def record(folder: Path, *node_ids: str) -> None:
    """A real pytest run in ``folder`` that records the reference's answers for ``node_ids``."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--slm-record=new", *node_ids]
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=patient(300))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "golden answers written:" in done.stdout


def unclocked(data: bytes) -> bytes:
    """The file with each answer's own clock readings (time, latency) set to one placeholder."""
    return CLOCK.sub(lambda m: (m.group(1) or m.group(2)) + b"0", data)


def goldens(folder: Path) -> dict[str, bytes]:
    """Every golden file under ``folder/__slam__``, clock readings set aside."""
    root = folder / "__slam__"
    return {p.relative_to(root).as_posix(): unclocked(p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def serial_recording(project: Path, to: Path) -> dict[str, bytes]:
    record(copy_of(project, to))
    serial = goldens(to)
    assert sorted(serial) == ["gpt-4/tests/test_billing.json", "gpt-4/tests/test_help.json"]
    return serial


def test_three_shards_merged_are_the_serial_recording(project, tmp_path, fake_gpt4):
    serial = serial_recording(project, tmp_path / "serial")
    assert fake_gpt4.hits == 10  # each distinct request (the chat's two turns) asked once
    for i, node_ids in enumerate(SHARDS, 1):
        record(copy_of(project, tmp_path / f"shard-{i}"), *node_ids)
    assert fake_gpt4.hits == 10 + 11  # the opening hours asked in shard 1 and in shard 3

    argv = [sys.executable, "-m", "pytest_slam.cli", "golden", "merge", "-o", "merged/__slam__",
            *(f"shard-{i}/__slam__" for i in (1, 2, 3))]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=patient(120))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "merged 3 inputs: 2 golden files, 10 entries -> merged/__slam__\n"
    merged = goldens(tmp_path / "merged")
    assert merged == serial
    shard_3 = goldens(tmp_path / "shard-3")[GOLDEN.removeprefix("__slam__/")]
    assert shard_3 != serial[GOLDEN.removeprefix("__slam__/")]  # no shard alone had it all
    by_prompt = {e["request"]["messages"][-1]["content"]: e
                 for e in json.loads(merged["gpt-4/tests/test_help.json"])["entries"].values()}  # fmt: skip
    hours = by_prompt["What are your opening hours?"]  # the one key two shards recorded
    assert hours["tests"] == [f"{HELP}::test_hours_again", f"{HELP}::test_hours_first"]
    assert hours["turns"] == {f"{HELP}::test_hours_again": [1], f"{HELP}::test_hours_first": [1]}
    assert by_prompt["And then?"]["turns"] == {f"{HELP}::test_chat": [2]}  # the chat's 2nd turn


def git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **GIT_ENV,
        "PATH": f"{repo.parent / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True,
                          timeout=patient(120))  # fmt: skip
    assert done.returncode == 0 or not check, done.stdout + done.stderr
    return done


def readme_setup() -> tuple[str, list[list[str]]]:
    """The ``.gitattributes`` line and the ``git config`` commands, as the docs give them."""
    page = (Path(__file__).parents[2] / "docs/how-to/shard.md").read_text(encoding="utf-8")
    section = page.split("## Goldens from parallel shards and branches", 1)[1].split("\n## ")[0]
    (attributes,) = re.findall(r"^\S+ merge=slam-golden$", section, re.MULTILINE)
    configs = re.findall(r"^git config merge\.slam-golden\..*$", section, re.MULTILINE)
    assert len(configs) == 2, section
    return attributes, [shlex.split(line)[1:] for line in configs]


def repository(project: Path, tmp_path: Path) -> Path:
    """A git repository of the project (base commit on ``main``), with ``slam`` on the PATH git
    runs drivers with: this interpreter's pytest-slam, as an installed ``slam`` script is."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "slam"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pytest_slam.cli "$@"\n')
    shim.chmod(0o755)
    repo = copy_of(project, tmp_path / "repo")
    (repo / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "checkout", "-q", "-b", "main")
    return repo


def branch_recording(repo: Path, name: str, node_ids: list[str]) -> None:
    git(repo, "checkout", "-q", "-b", name, "main")
    record(repo, *node_ids)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"record {name}")


def test_the_git_driver_merges_two_branches_into_the_serial_recording(project, tmp_path):
    serial = serial_recording(project, tmp_path / "serial")
    repo = repository(project, tmp_path)
    record(repo, f"{HELP}::test_refund", f"{BILLING}::test_invoice")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    # Both branches add entries to tests/test_help.json, the opening hours' on both (two tests).
    branch_recording(repo, "ours", [*SHARDS[1], f"{HELP}::test_hours_first"])
    branch_recording(repo, "theirs", SHARDS[2])
    git(repo, "checkout", "-q", "ours")

    plain = git(repo, "merge", "--no-edit", "theirs", check=False)  # git's line merge
    assert (
        plain.returncode == 1 and f"CONFLICT (content): Merge conflict in {GOLDEN}" in plain.stdout
    )
    git(repo, "merge", "--abort")

    attributes, configs = readme_setup()
    (repo / ".gitattributes").write_text(attributes + "\n", encoding="utf-8")
    git(repo, "add", ".gitattributes")
    git(repo, "commit", "-q", "-m", "golden files merge with slam's driver")
    for config in configs:
        git(repo, *config)
    merged = git(repo, "merge", "--no-edit", "theirs")
    assert "CONFLICT" not in merged.stdout + merged.stderr
    assert git(repo, "status", "--porcelain").stdout == ""
    assert goldens(repo) == serial


def test_the_same_request_answered_differently_on_two_branches_is_left_in_conflict(
    project, tmp_path, fake_gpt4
):
    repo = repository(project, tmp_path)
    record(repo, f"{HELP}::test_password")
    attributes, configs = readme_setup()
    (repo / ".gitattributes").write_text(attributes + "\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for config in configs:
        git(repo, *config)
    branch_recording(repo, "ours", [f"{HELP}::test_refund"])
    fake_gpt4.answer = lambda req: "GPT-4 now says: " + req["messages"][-1]["content"]
    branch_recording(repo, "theirs", [f"{HELP}::test_refund"])
    git(repo, "checkout", "-q", "ours")

    merged = git(repo, "merge", "--no-edit", "theirs", check=False)
    assert merged.returncode == 1
    assert f"CONFLICT (content): Merge conflict in {GOLDEN}" in merged.stdout
    (line,) = [ln for ln in merged.stderr.splitlines() if ln.startswith("slam golden merge-driver")]
    assert re.fullmatch(
        rf"slam golden merge-driver: {GOLDEN}: entry [0-9a-f]{{16}} \(asked by "
        r"tests/test_help.py::test_refund\) was answered differently: 'GPT-4 says: How do "
        r"I get a refund\?' in ours, 'GPT-4 now says: How do I get a refund\?' in theirs; both "
        r"kept between conflict markers\. Fix: .*",
        line,
    )
    assert git(repo, "status", "--porcelain").stdout.splitlines() == [f"UU {GOLDEN}"]
    replay = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", HELP],
                            cwd=repo, capture_output=True, text=True, timeout=patient(300))  # fmt: skip
    assert replay.returncode == 1
    assert f"{GOLDEN}:" in replay.stdout and "unresolved git merge conflict marker" in replay.stdout
