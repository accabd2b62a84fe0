"""``slam calibrate``'s caches on a full disk and in a read-only ``.slam`` (disk_helpers.py).

The judge's verdicts (``.slam/judge``) and the embeddings (``.slam/embeddings``) are kept by
``compare/diskcache.py``, one file per entry. An entry that cannot be written is one line on
stderr naming the file, the error and the fix, exit 2 (a read-only ``.slam`` was a traceback:
the entry's sub-folder was made outside the writer); the entries kept before are as they were,
no temp file is left, and the next run with space asks only for what is not kept yet. The judge
and the embedder are one loopback FakeOpenAI, over real HTTP.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from disk_helpers import (
    READ_ONLY_FS,
    SLAM,
    TOO_LARGE,
    files_under,
    needs_read_only_mount,
    no_traceback,
    run_full,
    run_read_only,
)

from pytest_slam.testing.fake_openai import FakeOpenAI

PAIRS = 16  # the first half is evaluated (and kept) with space, then all of them


def grade(request: dict[str, Any]) -> str:
    """A judge whose verdict is longer than the 100-byte file-size limit once kept."""
    return "The answer says what the reference says, in other words.\n\nRating: [[9]]"


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(grade, model="judge-m") as fake:
        yield fake


def equivalence(cache: str, server: FakeOpenAI) -> str:
    if cache == "judge":
        return f'judge = "{server.base_url}#judge-m"\nequivalence = {{ by = "judge" }}\n'
    return (
        f'equivalence = {{ by = "semantic", backend = "endpoint", base_url = "{server.base_url}",'
        ' model = "emb" }\n'
    )


def asked(server: FakeOpenAI) -> int:
    """What the server was asked: a judge call each, or an embedded text each."""
    texts = [r.json["input"] for r in server.requests if r.path == "/v1/embeddings"]
    calls = [r for r in server.requests if r.path == "/v1/chat/completions"]
    return len(calls) + sum(len(t) if isinstance(t, list) else 1 for t in texts)


def project(root: Path, cache: str, server: FakeOpenAI) -> None:
    rows = [{"candidate": f"the answer is right {i}", "reference": f"reference {i}",
             "label": i % 2 == 0, "question": f"question {i}?", "unit": str(i)}
            for i in range(PAIRS)]  # fmt: skip
    for name, some in (("first.jsonl", rows[: PAIRS // 2]), ("labels.jsonl", rows)):
        (root / name).write_text("".join(json.dumps(r) + "\n" for r in some), encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[tool.slam]\nreference = "openai:gpt-4"\n' + equivalence(cache, server), encoding="utf-8"
    )


def _full(argv: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    return run_full(argv, root, limit=100)


def _read_only(argv: list[str], root: Path) -> subprocess.CompletedProcess[str]:
    return run_read_only(argv, root, [root / ".slam"])


Fault = Callable[[list[str], Path], subprocess.CompletedProcess[str]]
FAULTS: dict[str, tuple[Fault, str]] = {
    "full disk": (_full, TOO_LARGE),
    "read-only .slam": (_read_only, READ_ONLY_FS),
}
EVALUATE = [*SLAM, "calibrate", "--evaluate"]


@pytest.mark.parametrize("cache", ["judge", "embeddings"])
@pytest.mark.parametrize(
    "fault", ["full disk", pytest.param("read-only .slam", marks=needs_read_only_mount)]
)
def test_a_cache_entry_that_cannot_be_written_is_one_line_and_the_kept_ones_stay(
    pytester: pytest.Pytester, server: FakeOpenAI, cache: str, fault: str
) -> None:
    root = pytester.path
    project(root, cache, server)
    first = pytester.run(*EVALUATE, "first.jsonl")
    assert first.ret == 0, first.stderr.str()
    kept = files_under(root / ".slam")
    assert len([k for k in kept if k.startswith(f"{cache}/")]) == asked(server)
    run, error = FAULTS[fault]
    done = run([*EVALUATE, "labels.jsonl"], root)
    no_traceback(done)
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert re.fullmatch(
        rf"slam calibrate: could not write \.slam/{cache}/[0-9a-f]{{2}}/\S+\.json: "
        + re.escape(error),
        line,
    ), line
    assert files_under(root / ".slam") == kept  # every kept entry as it was, no temp file
    before = asked(server)
    again = pytester.run(*EVALUATE, "labels.jsonl")
    assert again.ret == 0, again.stderr.str()
    # only the second half is asked: the first half is read back from the entries kept
    assert asked(server) - before == len(kept) - 1  # (.gitignore is no entry)
