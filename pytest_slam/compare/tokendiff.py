"""The one sequence diff behind every diff the plugin shows: lines in a failure message, words in
the HTML report.

An alignment of two token sequences with the fewest insertions and deletions (a longest common
subsequence), computed by rapidfuzz's bit-parallel ``Indel.opcodes`` in O(n*m/64): two similar
20,000-character answers take milliseconds, where ``difflib.SequenceMatcher`` took seconds. The
opcodes have ``difflib``'s shape, so callers read them the same way: between two equal stretches,
all changes form one block, tagged ``replace`` (both sides changed), ``delete`` or ``insert``.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

Tag = Literal["equal", "replace", "delete", "insert"]
Opcode = tuple[Tag, int, int, int, int]  # tag, a[i1:i2], b[j1:j2], as in difflib


def opcodes(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[Opcode]:
    """How to turn ``a`` into ``b``: equal stretches and, between them, one changed block each."""
    from rapidfuzz.distance import Indel  # imported on use: ``pytest_slam.compare`` stays cheap

    # tokens as small ints, numbered by first appearance: exact equality, no hash collisions
    ids: dict[Hashable, int] = {}
    left = [ids.setdefault(token, len(ids)) for token in a]
    right = [ids.setdefault(token, len(ids)) for token in b]
    out: list[Opcode] = []
    start: tuple[int, int] | None = None  # where the current changed block began
    for op in Indel.opcodes(left, right):
        if op.tag != "equal":
            start = start or (op.src_start, op.dest_start)
            continue
        if start is not None:
            out.append(_changed(*start, op.src_start, op.dest_start))
            start = None
        out.append(("equal", op.src_start, op.src_end, op.dest_start, op.dest_end))
    if start is not None:
        out.append(_changed(*start, len(a), len(b)))
    return out


def _changed(i1: int, j1: int, i2: int, j2: int) -> Opcode:
    tag: Tag = "replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert"
    return (tag, i1, i2, j1, j2)


def similarity(ops: Sequence[Opcode]) -> float:
    """Share of tokens in common, ``2 * matched / (len(a) + len(b))`` (difflib's ratio); 1 for two
    empty sequences."""
    matched = sum(i2 - i1 for tag, i1, i2, _, _ in ops if tag == "equal")
    total = sum(i2 - i1 + j2 - j1 for _, i1, i2, j1, j2 in ops)
    return 2 * matched / total if total else 1.0
