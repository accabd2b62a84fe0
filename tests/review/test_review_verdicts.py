"""The review file beside the goldens: sorted lines, one per reviewer and answer, merge-safe."""

from __future__ import annotations

import pytest

from pytest_slam.golden.store import GoldenStore
from pytest_slam.review.verdicts import (
    ReviewError,
    all_verdicts,
    make_verdict,
    read_verdicts,
    review_path,
    save_verdicts,
)


def verdict(key: str, reviewer: str, verdict: str = "win", date: str = "2026-01-01T00:00:00+00:00",
            note: str = "") -> object:  # fmt: skip
    return make_verdict(key=key, model="mini", answer_hash="a1", reference_hash="r1",
                        verdict=verdict, reviewer=reviewer, date=date, note=note)  # fmt: skip


@pytest.fixture
def store(tmp_path) -> GoldenStore:
    return GoldenStore(tmp_path / "fixtures/slam", "openai:gpt-4")


def test_the_file_sits_beside_the_golden_file_and_reads_well(store) -> None:
    path = review_path(store, "tests/llm/test_triage.py")
    assert path == store.dir / "tests/llm/test_triage.review.jsonl"
    save_verdicts(store, "tests/llm/test_triage.py", [verdict("k2", "ben"), verdict("k1", "ana")])
    lines = path.read_text().splitlines()
    assert [line.split('"key": ')[1][:4] for line in lines] == ['"k1"', '"k2"']  # sorted
    assert lines[0] == (
        '{"answer_hash": "a1", "date": "2026-01-01T00:00:00+00:00", "key": "k1", "model": "mini", '
        '"note": "", "reference_hash": "r1", "reviewer": "ana", "verdict": "win"}'
    )
    assert list(all_verdicts(store)) == ["tests/llm/test_triage.py"]
    assert not list(store.dir.rglob("*.lock"))  # locks live in the ignored scratch folder
    assert (store.root.parent / ".slam" / ".gitignore").is_file()


def test_a_reviewer_changing_their_mind_replaces_their_own_line_only(store) -> None:
    save_verdicts(store, "test_x.py", [verdict("k1", "ana"), verdict("k1", "ben", "loss")])
    later = verdict("k1", "ana", "tie", date="2026-02-01T00:00:00+00:00")
    save_verdicts(store, "test_x.py", [later])
    got = {v.reviewer: v.verdict for v in read_verdicts(review_path(store, "test_x.py"))}
    assert got == {"ana": "tie", "ben": "loss"}


def test_a_union_merge_with_conflict_markers_keeps_both_sides(store) -> None:
    path = review_path(store, "test_x.py")
    save_verdicts(store, "test_x.py", [verdict("k1", "ana")])
    ours = path.read_text()
    save_verdicts(store, "test_x.py", [verdict("k2", "ben")])
    theirs = path.read_text().replace(ours, "")
    path.write_text(f"<<<<<<< HEAD\n{ours}=======\n{theirs}>>>>>>> branch\n")
    assert [v.key for v in read_verdicts(path)] == ["k1", "k2"]
    save_verdicts(store, "test_x.py", [])  # the next save writes it clean
    assert "<<<<<<<" not in path.read_text() and len(path.read_text().splitlines()) == 2


def test_a_broken_line_is_named_with_its_fix(store) -> None:
    path = review_path(store, "test_x.py")
    path.parent.mkdir(parents=True)
    path.write_text('{"key": "k1", "verdict": "great"}\n')
    with pytest.raises(ReviewError, match=r"test_x.review.jsonl:1: not a review verdict .*"
                                          r"fix or delete that line"):  # fmt: skip
        read_verdicts(path)


def test_notes_never_carry_a_secret(monkeypatch) -> None:
    monkeypatch.setenv("ACME_API_KEY", "hunter2-very-secret")
    note = verdict(
        "k1", "ana", note=" both quote hunter2-very-secret and sk-proj-abcdefgh1234 "
    ).note
    assert note == "both quote [redacted] and [redacted]"
    with pytest.raises(ValueError, match="is not one of win, tie, loss, both_bad"):
        verdict("k1", "ana", "better")
