"""Golden files recorded apart (CI shards, branches) merged into the file one serial run writes.

Entries are keyed by request, so most merges are unions. The rule for one key, over the sides that
hold it (and the common ancestor, ``base``, when there is one):

- answers: the sides' answer lists are compared as a re-record compares them
  (``reference.same_answer``: text, model, finish reason, tool calls, tokens, fingerprint, never
  when nor how fast). One distinct answer list: it is kept, in the copy recorded first (earliest
  ``recorded_at``), which is the one a serial run keeps, since its later tests replay it. Several:
  a side whose answers equal the base's did not re-record, so it yields; if more than one distinct
  answer list is left, the key is a real conflict (the reference answered the same request
  differently on two sides) and nothing decides it for the user.
- ``tests`` and ``turns`` (the places a conversation asked the request): the union, as a serial run
  writes every test that visited the entry, each test's call positions sorted.
- ``judge`` (cached verdicts on these answers): the union over the sides holding the kept answers,
  the kept copy's verdict first; verdicts on answers that were replaced are dropped.
- an entry the base has and one side removed (a prune) stays removed unless another side changed it.

The result is written by the store's own writer (``fileformat.dump_golden``: same order, same
layout, scrubbed of secrets) so it is byte for byte what a serial recording writes. Every input is
read (and checked: JSON, schema, one reference) before anything is written.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.golden.fileformat import (
    GoldenError,
    GoldenFile,
    dump_golden,
    entry_text,
    parse_golden,
    unreadable,
)
from pytest_slam.golden.journal import Transaction
from pytest_slam.golden.reference import same_answer
from pytest_slam.golden.turns import merged_turns
from pytest_slam.records import GoldenAnswer, GoldenRecord
from pytest_slam.util import textcodec
from pytest_slam.util.files import atomic_write


@dataclass
class Conflict:
    """One key answered differently on several sides: each side's record, in input order."""

    key: str
    records: list[GoldenRecord]
    sides: list[Path]

    def describe(self, labels: Mapping[Path, str] | None = None) -> str:
        """One line: the key, its tests, each side's answer (sides named by ``labels``)."""
        tests = sorted({t for rec in self.records for t in rec.tests})
        asked = f" (asked by {', '.join(tests)})" if tests else ""
        texts = ", ".join(
            f"{_short(rec.answers[0].text if rec.answers else '')!r} in "
            f"{(labels or {}).get(side, str(side))}"
            for rec, side in zip(self.records, self.sides, strict=True)
        )
        return f"entry {self.key}{asked} was answered differently: {texts}"


@dataclass
class Merged:
    """A merge of one golden file: the entries resolved, and the keys that could not be."""

    golden: GoldenFile
    conflicts: list[Conflict] = field(default_factory=list)


def _short(text: str, width: int = 40) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."


def same_answers(one: Sequence[GoldenAnswer], other: Sequence[GoldenAnswer]) -> bool:
    """The same answer samples, whenever and however fast they were recorded."""
    return len(one) == len(other) and all(map(same_answer, one, other))


def _first_recorded(rec: GoldenRecord) -> str:
    return min((a.recorded_at or "" for a in rec.answers), default="")


def merge_record(
    versions: Sequence[GoldenRecord], base: GoldenRecord | None
) -> GoldenRecord | list[int]:
    """One key's merged record, or the indexes (into ``versions``) of the sides that conflict."""
    changed = [
        i
        for i, v in enumerate(versions)
        if base is None or not same_answers(v.answers, base.answers)
    ]
    candidates = changed or list(range(len(versions)))
    distinct: list[int] = []
    for i in candidates:
        if not any(same_answers(versions[i].answers, versions[j].answers) for j in distinct):
            distinct.append(i)
    if len(distinct) > 1:
        return distinct
    winners = [v for v in versions if same_answers(v.answers, versions[distinct[0]].answers)]
    kept = min(winners, key=_first_recorded)  # stable: the first input wins a tie
    judge = dict(kept.judge)
    for other in winners:
        judge = {**other.judge, **judge}
    tests = sorted({t for v in versions for t in v.tests})
    turns = merged_turns(*(v.turns for v in versions))
    return dataclasses.replace(kept, tests=tests, turns=turns, judge=judge)


def _removed(key: str, sides: Sequence[GoldenFile], base: GoldenFile | None) -> bool:
    """A base entry one side removed, that every side still holding it left as it was."""
    if base is None or key not in base.entries:
        return False
    old = base.entries[key]
    held = [side.entries[key] for side in sides if key in side.entries]
    return len(held) < len(sides) and all(rec == old for rec in held)


def merge_goldens(sides: Sequence[GoldenFile], base: GoldenFile | None = None) -> Merged:
    """Merge parsed golden files of one reference (``check_references`` first) into one."""
    entries: dict[str, GoldenRecord] = {}
    conflicts = []
    for key in sorted({key for side in sides for key in side.entries}):
        if _removed(key, sides, base):
            continue
        holders = [side for side in sides if key in side.entries]
        versions = [side.entries[key] for side in holders]
        old = base.entries.get(key) if base is not None else None
        merged = merge_record(versions, old)
        if isinstance(merged, GoldenRecord):
            entries[key] = merged
        else:
            records = [versions[i] for i in merged]
            conflicts.append(Conflict(key, records, [holders[i].path for i in merged]))
            entries[key] = records[0]
    first = next((side for side in sides if side.exists), sides[0])
    return Merged(dataclasses.replace(first, entries=entries, exists=True), conflicts)


def check_references(sides: Sequence[GoldenFile], base: GoldenFile | None = None) -> None:
    """Golden files of different references are never merged: ``GoldenError`` naming two."""
    files = [f for f in (*sides, *([base] if base else [])) if f.exists]
    for other in files[1:]:
        if other.reference != files[0].reference:
            raise GoldenError(
                f"{other.path} holds answers of reference {other.reference!r}, "
                f"{files[0].path} of {files[0].reference!r}; answers of different references are "
                "never merged. Fix: merge each reference's folder on its own"
            )


def read_side(path: Path) -> GoldenFile:
    """A golden file to merge; an empty file (git's base of a file added on both sides) is
    empty, anything unreadable raises ``GoldenError`` (one line naming it)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenError(f"{path}: {unreadable(exc, 'golden file')}") from None
    if not text.strip():
        return GoldenFile(path=Path(path), reference="")
    return parse_golden(Path(path), text)


def merged_text(merged: Merged, labels: Mapping[Path, str] | None = None) -> str:
    """The merged file's text. Each conflicting entry (two sides: a git merge) is written once per
    side between git conflict markers labelled by ``labels`` (by side path), so the file cannot be
    used (the store refuses it, naming the line) until a person keeps one side of each."""
    text = dump_golden(merged.golden)
    for conflict in merged.conflicts:
        name = f"    {textcodec.dumps(conflict.key)}: "
        ours, theirs = (name + entry_text(rec) for rec in conflict.records[:2])
        comma = "," if ours + ",\n" in text else ""
        label = [(labels or {}).get(p, str(p)) for p in conflict.sides[:2]]
        block = f"<<<<<<< {label[0]}\n{ours}{comma}\n=======\n{theirs}{comma}\n>>>>>>> {label[1]}"
        text = text.replace(ours + comma, block, 1)
    return text


def _sides(paths: Sequence[Path]) -> list[GoldenFile]:
    """Each path's golden file; one a folder does not hold is empty (a store deletes a file whose
    last entry was removed)."""
    return [read_side(p) if p.exists() else GoldenFile(path=p, reference="") for p in paths]


def merge_files(paths: Sequence[Path], base: Path | None = None) -> Merged:
    """Merge golden files (and their common ancestor): every one read and checked first."""
    sides = _sides(paths)
    ancestor = _sides([base])[0] if base is not None else None
    check_references(sides, ancestor)
    return merge_goldens(sides, ancestor)


def _files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*.json") if p.is_file()}


def merge_paths(
    inputs: Sequence[Path], out: Path, base: Path | None = None
) -> list[tuple[Path, Merged]]:
    """What ``slam golden merge`` writes: ``(output file, merge)`` for golden files, or for every
    file by its path under golden folders (store roots, or one reference's folder), nothing
    written yet. Mixed or missing inputs raise ``GoldenError``."""
    for path in [*inputs, *([base] if base else [])]:
        if not path.exists():
            raise GoldenError(f"{path}: no such golden file or folder. Fix: check the path")
    if all(p.is_file() for p in inputs) and (base is None or base.is_file()):
        if out.is_dir():
            raise GoldenError(f"{out}: a folder, but the inputs are files. Fix: name the file -o")
        return [(out, merge_files(inputs, base))]
    if not all(p.is_dir() for p in inputs) or (base is not None and not base.is_dir()):
        raise GoldenError(
            f"{', '.join(map(str, [*inputs, *([base] if base else [])]))}: mixes golden files and "
            "folders. Fix: merge files into a file, or folders into a folder"
        )
    if out.exists() and not out.is_dir():
        raise GoldenError(f"{out}: a file, but the inputs are folders. Fix: name a folder -o")
    names = sorted(set().union(*map(_files_under, inputs)))
    return [
        (out / name, merge_files([p / name for p in inputs], base / name if base else None))
        for name in names
    ]


def write_merged(planned: Sequence[tuple[Path, Merged]], txn: Transaction | None = None) -> None:
    """Write each merge (atomically); a merge left with no entries removes its file, as the store
    does. Called only once every merge is known to be free of conflicts. Inside a store's
    transaction (``txn``), each file is staged: journalled and written at its commit."""
    for out, merged in planned:
        text = merged_text(merged) if merged.golden.entries else None
        if txn is not None:
            txn.stage(out, text)
        elif text is not None:
            atomic_write(out, text)
        else:
            out.unlink(missing_ok=True)
