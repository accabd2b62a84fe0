"""The sample files in fixtures/import go through the real `slam golden import` command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.store import GoldenStore

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "import"
MODULE = "tests/test_triage.py"


def slam(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_slam.cli", *args], cwd=cwd,
                          capture_output=True, text=True, check=False)  # fmt: skip


@pytest.mark.parametrize(
    ("name", "imported", "failed"),
    [
        ("openai_log.jsonl", 2, 1),
        ("openai_batch_output.jsonl", 1, 0),
        ("prompt_answer.jsonl", 2, 0),
    ],
)
def test_each_accepted_format_imports(
    tmp_path: Path, name: str, imported: int, failed: int
) -> None:
    done = slam("golden", "import", str(FIXTURES / name), "--module", MODULE, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"imported {imported}, skipped 0 duplicates, {failed} failed calls" in done.stdout
    again = slam("golden", "import", str(FIXTURES / name), "--module", MODULE, cwd=tmp_path)
    assert f"imported 0, skipped {imported} duplicates" in again.stdout


def test_a_logged_streamed_request_is_found_by_the_same_request_unstreamed(tmp_path: Path) -> None:
    slam("golden", "import", str(FIXTURES / "openai_log.jsonl"), "--module", MODULE, cwd=tmp_path)
    logged = [json.loads(line) for line in (FIXTURES / "openai_log.jsonl").read_text().splitlines()]
    request = {k: v for k, v in logged[1]["request"].items() if not k.startswith("stream")}
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    record = store.lookup(MODULE, request_key(request))
    assert record is not None and record.answers[0].text == "technical"
    assert (record.answers[0].prompt_tokens, record.answers[0].model) == (20, "gpt-4-0613")
    stats = slam("golden", "stats", cwd=tmp_path)
    assert "gpt-4-0613" in stats.stdout and "test_triage.json" in stats.stdout
