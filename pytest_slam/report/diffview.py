"""Word-level differences between the reference's and the candidate's answers, for the HTML, and
the two sides' tool calls next to each other, for the HTML and the terminal.

Computed by ``compare.tokendiff`` on word and whitespace tokens, so spacing and line breaks survive.
The segments are plain text; the template escapes them and wraps changes in ``<del>``/``<ins>``.
The HTML page computes its diffs itself, when it draws a pair (``templates/worddiff.js``: a port of
``uncut_runs``, checked against it); this module is that port's reference, and the diff of tests
and tools.
Tool calls are shown one per line as ``name({arguments})`` (``answer_text`` appends them to the
answer's text so the word diff covers them too); ``tool_calls_side_by_side`` lines up calls of the
same function in two columns for a failure message.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pytest_slam.compare.tokendiff import Opcode, opcodes, similarity
from pytest_slam.compare.toolcalls import ToolCall, arguments_of, name_of

# a word or a punctuation mark with the whitespace after it: fewer, more telling tokens than
# splitting every space off, so a changed phrase reads as one change
TOKEN = re.compile(r"\s+|\w+\s*|[^\w\s]\s*", re.UNICODE)
MAX_CHARS = 20_000  # longer answers are cut (and say so) to keep the report file reasonable

SegmentKind = Literal[
    "same", "del", "ins"
]  # del: only in the reference; ins: only in the candidate


@dataclass(frozen=True)
class Segment:
    kind: SegmentKind
    text: str


def diff_and_similarity(
    reference: str, candidate: str
) -> tuple[list[Segment], list[Segment], float]:
    """The two sides' segments and the share of words in common (a hint only)."""
    left: list[Segment] = []
    right: list[Segment] = []
    runs, ratio = diff_runs(reference, candidate)
    for k in range(0, len(runs), 3):
        same, deleted, inserted = [*runs[k : k + 3], "", ""][:3]
        both: tuple[tuple[list[Segment], SegmentKind, str], ...] = (
            (left, "del", deleted),
            (right, "ins", inserted),
        )
        for side, kind, text in both:
            if same:
                _add(side, "same", [same])
            if text:
                _add(side, kind, [text])
    return left, right, ratio


def diff_runs(reference: str, candidate: str) -> tuple[list[str], float]:
    """Both sides at once, each text stored once: ``[same, deleted, inserted, same, ...]`` (any
    may be ""); the reference reads same + deleted, the candidate same + inserted. With the share
    of words in common (a hint only). Each text cut at ``MAX_CHARS`` first."""
    return uncut_runs(cut(reference), cut(candidate))


def uncut_runs(reference: str, candidate: str) -> tuple[list[str], float]:
    """``diff_runs`` of two texts already cut: what the HTML page's script computes from the
    texts it carries (``templates/worddiff.js``, a port of this function)."""
    ref_tokens = TOKEN.findall(reference)
    cand_tokens = TOKEN.findall(candidate)
    ops = opcodes(ref_tokens, cand_tokens)
    runs: list[str] = []
    for op, i1, i2, j1, j2 in _absorb_spaces(ops, ref_tokens):
        if op == "equal":
            runs.append("".join(ref_tokens[i1:i2]))
            continue
        if len(runs) % 3 == 0:  # a change first: an empty unchanged run before it
            runs.append("")
        runs += ["".join(ref_tokens[i1:i2]), "".join(cand_tokens[j1:j2])]
    return runs, similarity(ops)


def _absorb_spaces(ops: list[Opcode], tokens: list[str]) -> list[Opcode]:
    """Treat a lone space between two changes as changed, so a changed phrase reads as one."""
    out = list(ops)
    for k in range(1, len(out) - 1):
        op, i1, i2, j1, j2 = out[k]
        between = out[k - 1][0] != "equal" and out[k + 1][0] != "equal"
        if op == "equal" and between and all(t.isspace() for t in tokens[i1:i2]):
            out[k] = ("replace", i1, i2, j1, j2)
    return out


def _add(segments: list[Segment], kind: SegmentKind, tokens: list[str]) -> None:
    if not tokens:
        return
    text = "".join(tokens)
    if segments and segments[-1].kind == kind:
        segments[-1] = Segment(kind, segments[-1].text + text)
    else:
        segments.append(Segment(kind, text))


def cut(text: str) -> str:
    """``text``, or its first ``MAX_CHARS`` characters and how many more there were."""
    if len(text) <= MAX_CHARS:
        return text
    return text[:MAX_CHARS] + f" [... {len(text) - MAX_CHARS} more characters not shown]"


def tool_call_line(call: ToolCall) -> str:
    """``get_weather({"city": "Paris"})``: the function and its arguments, compact and sorted."""
    args = arguments_of(call)
    with contextlib.suppress(ValueError):  # not JSON: shown as the model wrote it
        args = json.dumps(json.loads(args), sort_keys=True, ensure_ascii=False)
    return f"{name_of(call) or '?'}({' '.join(args.split())})"


def answer_text(text: str, tool_calls: Sequence[ToolCall] | None) -> str:
    """An answer as read side by side: its text, then one ``-> call`` line per tool call."""
    lines = [f"-> {tool_call_line(c)}" for c in tool_calls or ()]
    return "\n".join([text, *lines] if text else lines)


def tool_calls_side_by_side(
    reference: Sequence[ToolCall] | None,
    candidate: Sequence[ToolCall] | None,
    width: int = 50,
) -> list[str]:
    """Two columns, reference | candidate, with calls of the same function on one row."""
    rows = _aligned(list(reference or ()), list(candidate or ()))
    cells = [(_cell(r, width), _cell(c, width)) for r, c in rows]
    left = max([len("reference"), *(len(a) for a, _ in cells)])
    lines = [f"{'reference':<{left}} | candidate"]
    lines += [f"{a:<{left}} {'|' if a == b else '≠'} {b}".rstrip() for a, b in cells]
    return lines


def _aligned(
    ref: list[ToolCall], cand: list[ToolCall]
) -> list[tuple[ToolCall | None, ToolCall | None]]:
    """Same-name calls on one row (in the reference's order), then the rest side by side."""
    rows: list[tuple[ToolCall | None, ToolCall | None]] = []
    ref_left: list[ToolCall] = []
    cand_left = list(cand)
    for call in ref:
        match = next((c for c in cand_left if name_of(c) == name_of(call)), None)
        if match is None:
            ref_left.append(call)
        else:
            cand_left.remove(match)
            rows.append((call, match))
    return rows + list(itertools.zip_longest(ref_left, cand_left))


def _cell(call: ToolCall | None, width: int) -> str:
    if call is None:
        return "(no call)"
    line = tool_call_line(call)
    return line if len(line) <= width else line[: width - 3] + "..."
