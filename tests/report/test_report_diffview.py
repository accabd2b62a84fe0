"""The shared token diff (``compare.tokendiff``) and the word diff the HTML report shows with it."""

from __future__ import annotations

import itertools
import random

from hypothesis import given
from hypothesis import strategies as st

from pytest_slam.compare.diff import side_by_side
from pytest_slam.compare.tokendiff import Opcode, opcodes, similarity
from pytest_slam.report.diffview import Segment, diff_and_similarity


def apply(ops: list[Opcode], a: list[str], b: list[str]) -> list[str]:
    """``a`` turned into ``b`` by ``ops``: equal stretches from ``a``, changed ones from ``b``."""
    out: list[str] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal":
            assert a[i1:i2] == b[j1:j2]
            out += a[i1:i2]
        else:
            out += b[j1:j2]
    return out


tokens = st.lists(st.sampled_from(["a", "b", "c", " ", "\n", "word ", "."]), max_size=60)


@given(tokens, tokens)
def test_applying_the_opcodes_to_the_left_tokens_gives_the_right_ones(
    a: list[str], b: list[str]
) -> None:
    ops = opcodes(a, b)
    assert apply(ops, a, b) == b
    # difflib's shape: contiguous, covering both sides, never two changed blocks in a row
    assert [op[1] for op in ops[1:]] == [op[2] for op in ops[:-1]]
    assert [op[3] for op in ops[1:]] == [op[4] for op in ops[:-1]]
    if ops:
        assert (ops[0][1], ops[0][3], ops[-1][2], ops[-1][4]) == (0, 0, len(a), len(b))
    else:
        assert a == b == []
    assert all("equal" in (x[0], y[0]) for x, y in itertools.pairwise(ops))
    assert 0.0 <= similarity(ops) <= 1.0


def test_one_changed_word_at_the_end_of_2000_words_is_exactly_that_change() -> None:
    rng = random.Random(0)
    words = [
        rng.choice(["the", "model", "answer", "ticket", "refund", "is", "a"]) for _ in range(2000)
    ]
    reference = " ".join(words)
    candidate = " ".join([*words[:-1], "changed"])
    left, right, ratio = diff_and_similarity(reference, candidate)
    assert left == [Segment("same", " ".join(words[:-1]) + " "), Segment("del", words[-1])]
    assert right == [Segment("same", " ".join(words[:-1]) + " "), Segment("ins", "changed")]
    assert 0.99 < ratio < 1.0


def test_tags_are_difflib_s() -> None:
    assert opcodes(["a", "b", "c"], ["a", "x", "c"]) == [
        ("equal", 0, 1, 0, 1), ("replace", 1, 2, 1, 2), ("equal", 2, 3, 2, 3)
    ]  # fmt: skip
    assert opcodes([], ["a"]) == [("insert", 0, 0, 0, 1)]
    assert opcodes(["a"], []) == [("delete", 0, 1, 0, 0)]
    assert opcodes([], []) == [] and similarity([]) == 1.0


def test_a_long_json_answer_diffs_quickly_and_whole() -> None:
    """Punctuation repeated thousands of times: the case that took difflib seconds."""
    reference = "[" + ", ".join(f'{{"id": {i}, "ok": true}}' for i in range(700)) + "]"
    candidate = reference.replace('"id": 699, "ok": true', '"id": 699, "ok": false')
    left, right, _ = diff_and_similarity(reference, candidate)
    assert [s.text for s in left if s.kind == "del"] == ["true"]
    assert [s.text for s in right if s.kind == "ins"] == ["false"]
    assert "false" in side_by_side(reference.replace(", ", ",\n"), candidate.replace(", ", ",\n"))
