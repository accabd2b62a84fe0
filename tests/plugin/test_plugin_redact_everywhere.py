"""Secrets in no file a run leaves (issue 51 item 3): the planted-secret grep.

An API key in the environment that the product's prompt holds and both models echo, and the key
that signs report shards (``SLAM_SHARD_KEY``), are planted; a recording run and two replays with
every output on (the JSON, HTML and JUnit reports, the GitHub step summary in Markdown, the saved
baseline runs, the answer cache, xdist with heartbeats) leave files that are all read back: the
secrets are in none of them, nor in anything the runs printed. The golden files and reports
scrubbed them before; the answer cache kept the key in clear (red on 0e0bec7).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from plugin_golden_helpers import run, write_project

from pytest_slam.testing import FakeOpenAI

API_KEY = "acme-Planted-k3y-7781"
SHARD_KEY = "shard-Planted-4455"
PRODUCT = """
import os
from openai import OpenAI

client = OpenAI()

def ask(question):
    config = f"ACME_API_KEY={os.environ['ACME_API_KEY']} shard={os.environ['SLAM_SHARD_KEY']}"
    r = client.chat.completions.create(
        model="gpt-4", temperature=0,
        messages=[{"role": "user", "content": f"{question} My config: {config}"}])
    return r.choices[0].message.content
"""
SUITE = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("question", ["Is my key valid?", "Why is billing down?"])
def test_answer(question):
    assert product.ask(question)
"""


def _echo(who: str) -> FakeOpenAI:
    """A model that repeats the prompt, key and all, slowly enough for a heartbeat."""
    return FakeOpenAI(lambda req: f"{who} read: " + req["messages"][-1]["content"], latency_s=0.3)


def _files_holding(root: Path, secrets: tuple[str, ...]) -> list[str]:
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_file()
            and any(s.encode() in p.read_bytes() for s in secrets)]  # fmt: skip


def test_a_planted_key_is_found_in_no_file_the_runs_leave(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACME_API_KEY", API_KEY)
    monkeypatch.setenv("SLAM_SHARD_KEY", SHARD_KEY)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "step-summary.md"))
    pytester.makepyfile(product=PRODUCT, test_product=SUITE)
    outputs = ["--slm-baseline=auto", "--slm-heartbeat=0.1", "-rA", "-v"]
    printed = []
    with _echo("GPT-4") as gpt4, _echo("mini") as mini:
        write_project(pytester, gpt4, mini)
        for name, extra in (("recorded", ["--slm-record=new"]),
                            ("replayed", ["-n", "2", "--slm-cache"]),  # asked, kept
                            ("cached", ["--slm-cache"])):  # answered from the cache  # fmt: skip
            reports = [f"--slm-report={name}.json", f"--slm-html={name}.html"]
            result = run(pytester, *extra, *outputs, *reports, f"--junitxml={name}.xml")
            result.assert_outcomes(passed=2)
            printed.append(result.stdout.str() + result.stderr.str())
    assert "answer cache: 2 answers served from it" in printed[-1]
    left = {
        p.relative_to(pytester.path).as_posix() for p in pytester.path.rglob("*") if p.is_file()
    }
    for kind in ("recorded.json", "cached.html", "replayed.xml", "step-summary.md"):
        assert kind in left
    assert any(p.startswith(".slam/cache/") for p in left)
    assert any(p.startswith(".slam/runs/") for p in left)
    assert any(p.startswith("__slam__/") for p in left)
    assert _files_holding(pytester.path, (API_KEY, SHARD_KEY)) == []  # old code: the cache's
    assert not any(API_KEY in text or SHARD_KEY in text for text in printed)
    assert "[redacted]" in (pytester.path / "cached.json").read_text(encoding="utf-8")
