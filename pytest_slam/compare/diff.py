"""A readable side-by-side diff for failure messages: reference left, candidate right.

Answers can be long (pages of prose, big JSON), so inputs are trimmed, equal stretches are
collapsed to a line of context, cells are word-wrapped to fit ~100 columns, and the total
height is capped; every cut says so with a marker. Lines are aligned by ``compare.tokendiff``.
"""

from __future__ import annotations

import itertools
import textwrap

from pytest_slam.compare.tokendiff import opcodes

MARKS = {"equal": " ", "replace": "|", "delete": "<", "insert": ">"}
Row = tuple[str | None, str, str | None]


def trim(text: str, max_chars: int) -> str:
    """``text`` cut to ``max_chars`` with a marker line saying how much was left out."""
    if len(text) <= max_chars:
        return text
    return text[:max_chars] + f"\n[... {len(text) - max_chars:,} more characters trimmed]"


def side_by_side(
    reference: str,
    candidate: str,
    *,
    width: int = 100,
    max_rows: int = 60,
    max_chars: int = 20_000,
    context: int = 2,
) -> str:
    """Two columns, ``reference | candidate``, with a marker column between them.

    Markers: ``|`` changed line, ``<`` only in the reference, ``>`` only in the candidate.
    """
    col = max(20, (width - 3) // 2)
    ref_lines = trim(reference, max_chars).splitlines() or [""]
    cand_lines = trim(candidate, max_chars).splitlines() or [""]
    rows = _rows(ref_lines, cand_lines, context)
    out = [f"{'reference':<{col}}   candidate", f"{'-' * col}   {'-' * col}"]
    for left, mark, right in rows:
        out.extend(_render(left, mark, right, col))
    if len(out) > max_rows + 2:
        hidden = len(out) - (max_rows + 2)
        out = [*out[: max_rows + 2], f"[... {hidden} more diff rows trimmed]"]
    return "\n".join(line.rstrip() for line in out)


def _rows(ref: list[str], cand: list[str], context: int) -> list[Row]:
    rows: list[Row] = []
    for tag, i1, i2, j1, j2 in opcodes(ref, cand):
        if tag == "equal":
            rows.extend(_equal_rows(ref[i1:i2], context))
            continue
        pairs = itertools.zip_longest(ref[i1:i2], cand[j1:j2])
        rows.extend((left, _mark(tag, left, right), right) for left, right in pairs)
    return rows


def _mark(tag: str, left: str | None, right: str | None) -> str:
    if left is None:
        return MARKS["insert"]
    if right is None:
        return MARKS["delete"]
    return MARKS[tag]


def _equal_rows(lines: list[str], context: int) -> list[Row]:
    """Equal lines, with a long stretch collapsed to ``context`` lines at each end."""
    if len(lines) <= 2 * context + 1:
        return [(line, " ", line) for line in lines]
    note = f"[... {len(lines) - 2 * context} equal lines ...]"
    head = [(line, " ", line) for line in lines[:context]]
    tail = [(line, " ", line) for line in lines[len(lines) - context :]]
    return [*head, (note, " ", note), *tail]


def _render(left: str | None, mark: str, right: str | None, col: int) -> list[str]:
    """One diff row as one or more output lines, each cell wrapped to ``col`` characters."""
    left_cells = _wrap(left, col)
    right_cells = _wrap(right, col)
    lines: list[str] = []
    for a, b in itertools.zip_longest(left_cells, right_cells, fillvalue=""):
        lines.append(f"{a:<{col}} {mark} {b}")
    return lines


def _wrap(line: str | None, col: int) -> list[str]:
    if line is None:
        return [""]
    line = line.expandtabs(4)
    return textwrap.wrap(line, col, break_on_hyphens=False, drop_whitespace=False) or [""]
