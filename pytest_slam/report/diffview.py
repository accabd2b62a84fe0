"""Word-level differences between the reference's and the candidate's answers, for the HTML.

Computed with difflib on word and whitespace tokens, so spacing and line breaks survive. The
segments are plain text; the template escapes them and wraps changes in ``<del>``/``<ins>``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# a word or a punctuation mark with the whitespace after it: no lone, very common space tokens,
# which make difflib's matching quadratic on long answers
TOKEN = re.compile(r"\s+|\w+\s*|[^\w\s]\s*", re.UNICODE)
MAX_CHARS = 20_000  # longer answers are cut (and say so) to keep the report file reasonable


@dataclass(frozen=True)
class Segment:
    kind: str  # "same" | "del" (only in the reference) | "ins" (only in the candidate)
    text: str


def diff_and_similarity(reference: str, candidate: str) -> tuple[list, list, float]:
    """The two sides' segments and the share of words in common (difflib ratio, a hint only)."""
    ref_tokens = TOKEN.findall(_cut(reference))
    cand_tokens = TOKEN.findall(_cut(candidate))
    matcher = difflib.SequenceMatcher(None, ref_tokens, cand_tokens, autojunk=False)
    left: list[Segment] = []
    right: list[Segment] = []
    for op, i1, i2, j1, j2 in _absorb_spaces(matcher.get_opcodes(), ref_tokens):
        if op == "equal":
            _add(left, "same", ref_tokens[i1:i2])
            _add(right, "same", cand_tokens[j1:j2])
            continue
        _add(left, "del", ref_tokens[i1:i2])
        _add(right, "ins", cand_tokens[j1:j2])
    return left, right, matcher.ratio()


def _absorb_spaces(opcodes: list, tokens: list[str]) -> list:
    """Treat a lone space between two changes as changed, so a changed phrase reads as one."""
    out = list(opcodes)
    for k in range(1, len(out) - 1):
        op, i1, i2, _, _ = out[k]
        between = out[k - 1][0] != "equal" and out[k + 1][0] != "equal"
        if op == "equal" and between and all(t.isspace() for t in tokens[i1:i2]):
            out[k] = ("replace", *out[k][1:])
    return out


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
