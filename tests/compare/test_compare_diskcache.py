"""The on-disk cache calibration uses (issue 28): embeddings by model and text hash, read back
identical, so a second calibration embeds nothing; values written atomically, a damaged file a
miss. The embedder is FakeOpenAI's ``/v1/embeddings`` over real HTTP (semantic's endpoint
backend), so what is embedded is counted at the server."""

from __future__ import annotations

from pathlib import Path

from pytest_slam.compare.calibrate import Aids, LabelledPair, score_column
from pytest_slam.compare.diskcache import DiskCache, text_key
from pytest_slam.compare.semantic import SemanticScorer
from pytest_slam.testing.fake_openai import FakeOpenAI

LONG = " ".join(f"word{i}" for i in range(400))  # three chunks of 150 words


def pairs() -> list[tuple[str, str]]:
    return [(f"the cat sat on mat {i}", f"a cat sat on the mat {i}") for i in range(5)] + [
        (LONG, LONG[: len(LONG) // 2])
    ]


def test_a_second_scoring_embeds_nothing_and_gives_the_same_scores(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path / ".slam" / "embeddings")
    with FakeOpenAI() as fake:
        first = SemanticScorer(backend="endpoint", base_url=fake.base_url, model="emb")
        first.cache = cache
        before = [s.value for s in first.score_many(pairs())]
        asked = len(fake.requests)
        assert asked >= 1
        second = SemanticScorer(backend="endpoint", base_url=fake.base_url, model="emb")
        second.cache = cache
        assert [s.value for s in second.score_many(pairs())] == before
        assert len(fake.requests) == asked  # every chunk read back
        uncached = SemanticScorer(backend="endpoint", base_url=fake.base_url, model="emb")
        assert [s.value for s in uncached.score_many(pairs())] == before  # the same result
        other = SemanticScorer(backend="endpoint", base_url=fake.base_url, model="other")
        other.cache = cache
        other.score_many(pairs()[:1])
        assert len(fake.requests) > asked + 1  # another model's embeddings are its own
    assert "*" in (tmp_path / ".slam" / ".gitignore").read_text().splitlines()  # all ignored


def test_progress_is_told_and_the_column_is_unchanged(tmp_path: Path) -> None:
    said: list[str] = []
    labelled = [LabelledPair(str(i), c, r, 1, 1.0) for i, (c, r) in enumerate(pairs())]
    with FakeOpenAI() as fake:
        options = {"backend": "endpoint", "base_url": fake.base_url, "model": "emb"}
        plain = score_column("semantic", options, labelled)
        aids = Aids(DiskCache(tmp_path / "emb"), said.append)
        assert score_column("semantic", options, labelled, aids) == plain
    assert said[0].startswith("semantic: ") and "texts embedded" in said[0]
    assert said[-1] == "semantic: 6 pairs scored"


def test_a_damaged_or_foreign_file_is_a_miss_and_a_put_leaves_no_temporary(tmp_path: Path) -> None:
    cache = DiskCache(tmp_path)
    cache.put("judge-0123456789abcdef", {"value": 1.0})
    assert cache.get("judge-0123456789abcdef") == {"value": 1.0}
    (path,) = tmp_path.rglob("*.json")
    path.write_text("{half", encoding="utf-8")
    assert cache.get("judge-0123456789abcdef") is None
    cache.put("a key / with ../ odd characters", [0.5])
    assert cache.get("a key / with ../ odd characters") == [0.5]
    assert all(p.is_relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert not list(tmp_path.rglob("*.tmp"))


def test_a_text_with_a_lone_surrogate_has_a_key_and_its_value_reads_back(tmp_path: Path) -> None:
    """A model's answer may hold a lone surrogate (a split emoji): it is cached like any text."""
    cache = DiskCache(tmp_path / ".slam" / "embeddings")
    key = text_key("all-MiniLM-L6-v2", "broken \ud800 emoji")
    assert key != text_key("all-MiniLM-L6-v2", "broken \udc00 emoji")
    cache.put(key, {"vector": [0.5], "text": "broken \ud800 emoji"})
    assert cache.get(key) == {"vector": [0.5], "text": "broken \ud800 emoji"}
