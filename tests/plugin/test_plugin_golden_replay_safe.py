"""A replay never reads a half-changed store and never writes a golden file.

After a promote killed between two of its file replaces (its journal left, one file already on the
candidate's answers), a replay refuses in one line naming the command that recovers, instead of
scoring some pairs against the reference and others against the candidate's own answers; a
recording run recovers first and says so. An append log a killed recording run left is not
folded into a tracked golden file by a replay (the file may have been ``git checkout``-ed since).
Real pytest runs (pytester), FakeOpenAI on loopback, the real ``slam`` command.
"""

from __future__ import annotations

import hashlib
import json

from plugin_golden_helpers import GOLDEN, QUESTIONS, by_test, make_suite, run, slam

from pytest_slam.golden import appendlog
from pytest_slam.golden.journal import JOURNAL_SCHEMA, journal_path
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import GoldenAnswer, GoldenRecord

PRODUCT_FILE = GOLDEN / "test_product.json"


def _half_promote(root) -> bytes:
    """What a promote killed after its first replace leaves: the journal, the file changed."""
    live = GoldenStore(root / "__slam__", "gpt-4")
    path = root / PRODUCT_FILE
    before = path.read_bytes()
    half = before.decode().replace("GPT-4 says: ", "mini says: ")
    files = [
        {
            "path": path.relative_to(live.root).as_posix(),
            "before": before.decode(),
            "after": hashlib.blake2b(half.encode(), digest_size=16).hexdigest(),
        },
        {"path": "gpt-4/other.json", "before": None, "after": "0" * 32},  # not reached yet
    ]
    journal = {"schema": JOURNAL_SCHEMA, "what": "promote", "started": "2026-12-01T12:00:00Z"}
    journal_path(live.root, live.lock_dir).write_text(json.dumps({**journal, "files": files}))
    path.write_text(half, encoding="utf-8")
    return before


def test_a_replay_after_a_killed_promote_refuses_until_it_is_recovered(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    fake_gpt4.stop()
    before = _half_promote(pytester.path)

    refused = run(pytester, "--slm-report=mixed.json")
    assert refused.ret == 4, refused.stdout.str()  # a usage error: nothing ran, nothing scored
    lines = [line for line in refused.stderr.lines if "did not finish" in line]
    assert len(lines) == 1 and "Traceback" not in refused.stderr.str()
    assert "a promote started 2026-12-01T12:00:00Z did not finish (killed?)" in lines[0]
    assert "Fix: run `slam golden stats --recover`" in lines[0]
    assert not (pytester.path / "mixed.json").exists()

    recovered = slam(pytester, "golden", "stats", "--recover")
    assert recovered.returncode == 0, recovered.stderr
    assert recovered.stderr.splitlines() == [
        "slam golden: a promote started 2026-12-01T12:00:00Z did not finish (killed?); rolled "
        "back: those files are as they were before it (2 files)"
    ]
    assert (pytester.path / PRODUCT_FILE).read_bytes() == before
    replayed = run(pytester, "--slm-report=replayed.json")
    replayed.assert_outcomes(passed=3)
    pairs = by_test(pytester.path / "replayed.json").values()
    assert sorted(t for _, p in pairs for _, t in p) == sorted(
        "GPT-4 says: " + q for q in QUESTIONS
    )


def test_a_recording_run_after_a_killed_promote_recovers_first(pytester, fake_gpt4, mini):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    before = _half_promote(pytester.path)
    again = run(pytester, "--slm-record=new")
    again.assert_outcomes(passed=3)
    again.stdout.fnmatch_lines(["*a promote started 2026-12-01T12:00:00Z did not finish "
                                "(killed?); rolled back*(2 files)*"])  # fmt: skip
    assert (pytester.path / PRODUCT_FILE).read_bytes() == before


def test_a_replay_leaves_a_killed_recording_runs_log_and_the_tracked_file_alone(
    pytester, fake_gpt4, mini
):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    fake_gpt4.stop()
    path = pytester.path / PRODUCT_FILE
    committed = path.read_bytes()  # as `git checkout` gives it back after the killed run
    store = GoldenStore(pytester.path / "__slam__", "gpt-4")
    request = {"model": "gpt-4", "messages": [{"role": "user", "content": "never asked"}]}
    killed = GoldenRecord(key="", request=request, answers=[GoldenAnswer(text="left in the log")])
    log = store.log_path("test_product.py")
    appendlog.append(log, store_key(killed))  # what the killed run's last answer left

    replayed = run(pytester)
    replayed.assert_outcomes(passed=3)
    assert path.read_bytes() == committed  # the tracked file: not one byte rewritten
    assert appendlog.pending(log)  # kept for the next recording run
    replayed.stdout.fnmatch_lines(["*answers a killed recording run left in*were not read*"])


def store_key(rec: GoldenRecord) -> GoldenRecord:
    from dataclasses import replace

    from pytest_slam.golden.keys import canonical_request, request_key

    request = canonical_request(rec.request)
    return replace(rec, key=request_key(request), request=request)
