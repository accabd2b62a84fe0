"""Benchmark the answer diffs, by hand: ``python bench/bench_diff.py [--chars N] [--repeats R]``.

Times the two diffs a failing long answer goes through, on one pair of similar answers of about
20,000 characters: the HTML report's word diff (``report.diffview.diff_and_similarity``) and the
failure message's line diff (``compare.diff.side_by_side``). Each is timed with the current code
(``compare.tokendiff``, rapidfuzz's ``Indel.opcodes``) and, as the baseline in the same run, with
the same functions running on ``difflib.SequenceMatcher`` as they did before. The pair comes from
a fixed seed: prose from a small vocabulary, the candidate with a few words replaced, inserted and
deleted, so every machine times the same work.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import sys
from collections.abc import Callable, Hashable, Sequence
from types import ModuleType
from unittest import mock

from _common import Sample, footer, header, ratio, table, timed

from pytest_slam.compare import diff as line_diff
from pytest_slam.report import diffview

_VOCABULARY = (
    "the model answer returns a short summary of each ticket with priority owner status and next "
    "step for billing login crash export search timeout refund invoice customer error page user "
    "team release fix bug feature request report slow fails when after update on mobile web it "
    "should we can not be is are was in to from by this that"
)
VOCABULARY = _VOCABULARY.split()
TARGET_MS = 50.0


def prose_pair(chars: int, edits: int, seed: int = 0) -> tuple[str, str]:
    """A reference of ``chars`` characters of prose; the candidate with ``edits`` words changed."""
    rng = random.Random(seed)
    words: list[str] = []
    size = 0
    while size < chars:
        word = rng.choice(VOCABULARY)
        if rng.random() < 0.08:
            word += rng.choice((".", ",", ".\n"))
        words.append(word)
        size += len(word) + 1
    candidate = list(words)
    for _ in range(edits):
        at = rng.randrange(len(candidate))
        kind = rng.choice(("replace", "insert", "delete"))
        if kind == "replace":
            candidate[at] = rng.choice(VOCABULARY)
        elif kind == "insert":
            candidate.insert(at, rng.choice(VOCABULARY))
        else:
            del candidate[at]
    return " ".join(words)[:chars], " ".join(candidate)[:chars]


def json_pair(chars: int, edits: int, seed: int = 0) -> tuple[str, str]:
    """An indented JSON answer of ``chars`` characters (a list of records, as a model lists
    tickets); the candidate with ``edits`` values changed. Punctuation tokens repeat thousands of
    times here, which is what made difflib slow."""
    rng = random.Random(seed)
    records = [
        {"id": i, "owner": rng.choice(VOCABULARY), "score": round(rng.random(), 2),
         "tags": rng.sample(VOCABULARY, 2)}
        for i in range(chars // 50)
    ]  # fmt: skip
    changed = json.loads(json.dumps(records))
    for record in rng.sample(changed, edits):
        record["score"] = round(rng.random(), 2)
    return json.dumps(records, indent=2)[:chars], json.dumps(changed, indent=2)[:chars]


def difflib_opcodes(
    a: Sequence[Hashable], b: Sequence[Hashable]
) -> list[tuple[str, int, int, int, int]]:
    """The code before ``compare.tokendiff``: difflib's matcher, no junk heuristic; patched in for
    ``opcodes`` (same shape; difflib types its tags as plain strings)."""
    return difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()


def measure(run: Callable[[], object], repeats: int) -> Sample:
    sample = Sample()
    for _ in range(repeats):
        sample.add(timed(run) * 1000)
    return sample


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--chars", type=int, default=20_000, help="Length of each answer")
    parser.add_argument("--edits", type=int, default=8, help="Words changed in the candidate")
    parser.add_argument("--repeats", type=int, default=5, help="Runs per measurement")
    args = parser.parse_args(argv)
    command = "python bench/bench_diff.py " + " ".join(sys.argv[1:] if argv is None else argv)
    header("Answer diffs on long answers", command.strip())
    pairs = {"prose": prose_pair(args.chars, args.edits), "JSON": json_pair(args.chars, args.edits)}
    rows = []
    for kind, (reference, candidate) in pairs.items():
        words = len(diffview.TOKEN.findall(reference))
        lines = len(reference.splitlines())
        shape = f"{kind}, {len(reference):,} chars, {words:,} words, {lines:,} lines"
        diffs: list[tuple[str, Callable[[], object], ModuleType]] = [
            ("word diff (HTML report)",
             lambda r=reference, c=candidate: diffview.diff_and_similarity(r, c), diffview),
            ("line diff (failure message)",
             lambda r=reference, c=candidate: line_diff.side_by_side(r, c), line_diff),
        ]  # fmt: skip
        for name, run, module in diffs:
            new = measure(run, args.repeats)
            with mock.patch.object(module, "opcodes", difflib_opcodes):
                old = measure(run, args.repeats)
            under = "yes" if new.median < TARGET_MS else "no"
            rows.append([shape, name, new.show(), old.show(), ratio(old.median, new.median), under])
    print(f"#### One pair each, {args.edits} edits, ms; median (min-max) of {args.repeats} runs\n")
    table(["answers", "diff", "rapidfuzz Indel (now)", "difflib (before)", "speedup (before / now)",
           f"< {TARGET_MS:.0f} ms"], rows)  # fmt: skip
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
