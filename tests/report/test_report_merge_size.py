"""The merge at size (issue 53): twenty generated shards merge into the whole run's report byte for
byte, and the merge streams them: its peak memory stays under a bound the whole-load merge
exceeded (a merge that held every shard's outcomes as records at once).

The shards are written by the real report code (``pytest_slam.testing.shards``), signed as a
shard's job signs them; the merge runs as ``slam report merge`` does (``load_shards``, ``merge``,
``write_json`` in canonical order). Peak memory is tracemalloc's, of a merge whose lazy imports
and caches a first merge made.
"""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import pytest

from pytest_slam.report.jsonreport import write_json
from pytest_slam.report.merge import Trust, load_shards, merge
from pytest_slam.testing.shards import Written, write_shards

KEY = "test-report-merge-size-key"
SHARDS, CASES = 20, 4  # 240 outcomes: 4 a model a shard, as small as a shard of a wide matrix
WORDS = (400, 800)  # answers of a few paragraphs: what a whole-load merge held of every outcome


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Written:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SLAM_SHARD_KEY", KEY)
        return write_shards(tmp_path_factory.mktemp("shards"), SHARDS, CASES, WORDS)


def merged_to(paths: list[Path], out: Path) -> None:
    """``slam report merge``'s work, the shards verified with the key their jobs signed with."""
    result = merge(load_shards(paths, Trust(key=KEY.encode())))
    write_json(out, result.verdict, result.outcomes, result.visits, lines=result.lines)


def comparable(path: Path) -> tuple[str, dict[str, object]]:
    """The report's text without what only a merge has (the shard files it names in its visits,
    so its digest and signature) and the time it was written; and its visits."""
    document = json.loads(path.read_text(encoding="utf-8"))
    visits = document["visits"]
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    start = lines.index('  "visits": {\n')
    end = lines.index("  },\n", start)
    kept = [
        line
        for i, line in enumerate(lines)
        if not (start <= i <= end)
        and not line.startswith(('  "generated_at": ', '  "digest": ', '  "signature": '))
    ]
    return "".join(kept), visits


def test_twenty_shards_merge_into_the_whole_runs_report_byte_for_byte(
    written: Written, tmp_path: Path
) -> None:
    merged_to(written.shards, tmp_path / "merged.json")

    got, got_visits = comparable(tmp_path / "merged.json")
    want, want_visits = comparable(written.whole)
    assert got == want  # run, verdict rows, per-test rows, gate, notes, every outcome line
    assert got_visits.pop("shards") == [str(p) for p in written.shards]
    assert want_visits.pop("shards") == []
    assert got_visits == want_visits
    assert len(got) > 200 * SHARDS * CASES  # the outcomes are there


def test_the_merge_holds_one_shard_at_a_time_not_every_outcome(
    written: Written, tmp_path: Path
) -> None:
    merged_to(written.shards[:1], tmp_path / "warm.json")  # imports, schemas and caches made
    total = sum(p.stat().st_size for p in written.shards)

    tracemalloc.start()
    try:
        merged_to(written.shards, tmp_path / "merged.json")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    # Every shard's outcomes held as records at once took more than the shards' files (measured:
    # 3.8 MB over 3.3 MB of shards); streamed, the merge holds the verdict without the answers, and
    # one line and one file buffer a shard (measured: 2.3 MB).
    bound = 0.85 * total
    assert peak < bound, f"merge peak {peak / 1e6:.1f} MB over {total / 1e6:.1f} MB of shards"
