"""Word-level differences between the reference's and the candidate's answers, for the HTML.

Computed with difflib on word and whitespace tokens, so spacing and line breaks survive. The
segments are plain text; the template escapes them and wraps changes in ``<del>``/``<ins>``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

TOKEN = re.compile(r"\s+|\w+|[^\w\s]", re.UNICODE)
MAX_CHARS = 20_000  # longer answers are cut (and say so) to keep the report file reasonable


@dataclass(frozen=True)
class Segment:
    kind: str  # "same" | "del" (only in the reference) | "ins" (only in the candidate)
    text: str


def word_diff(reference: str, candidate: str) -> tuple[list[Segment], list[Segment]]:
    """Segments for the reference side (same/del) and the candidate side (same/ins)."""
    ref_tokens = TOKEN.findall(_cut(reference))
    cand_tokens = TOKEN.findall(_cut(candidate))
    matcher = difflib.SequenceMatcher(None, ref_tokens, cand_tokens, autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            _add(left, "same", ref_tokens[i1:i2])
            _add(right, "same", cand_tokens[j1:j2])
            continue
        _add(left, "del", ref_tokens[i1:i2])
        _add(right, "ins", cand_tokens[j1:j2])
    return left, right


def similarity(reference: str, candidate: str) -> float:
    """Share of words in common (difflib ratio): a hint shown next to the diff, not a score."""
    a, b = TOKEN.findall(_cut(reference)), TOKEN.findall(_cut(candidate))
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


def _add(segments: list[Segment], kind: str, tokens: list[str]) -> None:
    if not tokens:
        return
    text = "".join(tokens)
    if segments and segments[-1].kind == kind:
        segments[-1] = Segment(kind, segments[-1].text + text)
    else:
        segments.append(Segment(kind, text))


def _cut(text: str) -> str:
    if len(text) <= MAX_CHARS:
        return text
    return text[:MAX_CHARS] + f" [... {len(text) - MAX_CHARS} more characters not shown]"
