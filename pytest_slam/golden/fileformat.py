"""The golden file: one JSON file per test module and reference, written to read well in a diff.

Layout: ``{"schema": SCHEMA, "reference": "openai:gpt-4", "entries": {key: record}}``, where a
record is ``GoldenRecord.as_dict()`` without its key, without null answer fields and without an
empty ``turns`` (``from_dict`` restores them; files written before ``turns`` existed read as they
are). Indent 2, keys sorted below the top level, UTF-8 as is, one trailing newline: the
same answers always give the same bytes, whatever order they came in.
Reading fails with one message naming the file, the line and the fix.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pytest_slam.errors import SlamError
from pytest_slam.golden.redact import scrub
from pytest_slam.records import JSON, GoldenRecord
from pytest_slam.util import textcodec
from pytest_slam.util.gcpause import gc_paused

SCHEMA = "pytest-slam/golden/1"
CONFLICT_MARKERS = ("<<<<<<<", "|||||||", "=======", ">>>>>>>")
REFRESH_HINT = "re-record it with `slam golden refresh`"


class GoldenError(SlamError, kind="golden"):
    """Base of every golden-store error; the message says what to do."""


class GoldenFileError(GoldenError):
    """A golden file that cannot be used; raised only for the module that owns it."""

    def __init__(self, path: Path, line: int | None, problem: str, fix: str) -> None:
        self.path, self.line, self.problem = Path(path), line, problem
        where = f"{path}:{line}" if line else str(path)
        super().__init__(f"{where}: {problem}. Fix: {fix}.")


class GoldenReferenceMismatch(GoldenFileError):
    """A golden file recorded for another reference model than the one configured."""

    def __init__(self, path: Path, found: str, expected: str) -> None:
        self.found, self.expected = found, expected
        super().__init__(
            path,
            None,
            f"recorded for reference {found!r}, but this run's reference is {expected!r}",
            f"move the file under the folder for {found!r}, or configure {found!r} as the "
            f"reference, or {REFRESH_HINT}",
        )


@dataclass
class GoldenFile:
    """The parsed content of one golden file (empty when the file does not exist yet)."""

    path: Path
    reference: str
    entries: Mapping[str, GoldenRecord] = field(default_factory=dict)  # GoldenStore.load: lazy
    exists: bool = False


def _conflict_line(text: str) -> int | None:
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(CONFLICT_MARKERS):
            return number
    return None


def _key_line(text: str, key: str) -> int | None:
    needle = json.dumps(key) + ":"
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith(needle):
            return number
    return None


def _load_json(path: Path, text: str) -> JSON:
    """Parse the text; only a text that is not JSON is searched for merge-conflict markers.

    A line starting with a marker is never valid JSON (a newline inside a JSON string is escaped),
    so valid files skip the line-by-line scan, which took as long as parsing the file itself.
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        error = exc
    line = _conflict_line(text)
    if line is not None:
        raise GoldenFileError(
            path,
            line,
            "unresolved git merge conflict marker",
            "resolve the conflict (keep both sides' entries, and one side of an entry whose key "
            "is on both; `slam golden merge-driver --install` has git merge golden files), or "
            f"delete the file and {REFRESH_HINT}",
        )
    raise GoldenFileError(
        path,
        error.lineno,
        f"not valid JSON, it looks truncated or hand-edited ({error.msg}, column {error.colno})",
        f"restore it with `git checkout -- {path}`, or {REFRESH_HINT}",
    )


def _check_top(path: Path, data: JSON) -> None:
    if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
        raise GoldenFileError(path, 1, "not a golden file (no 'entries' object)", REFRESH_HINT)
    if data.get("schema") != SCHEMA:
        raise GoldenFileError(
            path,
            1,
            f"schema {data.get('schema')!r} is not {SCHEMA!r}",
            f"upgrade pytest-slam if the file is newer, or {REFRESH_HINT}",
        )
    if not isinstance(data.get("reference"), str):
        raise GoldenFileError(path, 1, "'reference' is missing", REFRESH_HINT)


def _record(path: Path, text: str, key: str, entry: JSON) -> GoldenRecord:
    has_request = isinstance(entry, dict) and isinstance(entry.get("request"), dict)
    answers = entry.get("answers") if has_request else None
    if not isinstance(answers, list) or not all(
        isinstance(a, dict) and isinstance(a.get("text"), str) for a in answers
    ):
        problem = f"entry {key!r} needs a 'request' object and an 'answers' list with 'text'"
        fix = f"fix the entry or {REFRESH_HINT}"
        raise GoldenFileError(path, _key_line(text, key), problem, fix)
    return GoldenRecord.from_dict({**entry, "key": key})


def parse_golden(path: Path, text: str, expected_reference: str | None = None) -> GoldenFile:
    """Parse a golden file's text; ``expected_reference`` None accepts any reference."""
    with gc_paused():
        data = _load_json(path, text)
        _check_top(path, data)
        if expected_reference is not None and data["reference"] != expected_reference:
            raise GoldenReferenceMismatch(path, data["reference"], expected_reference)
        entries = {k: _record(path, text, k, v) for k, v in data["entries"].items()}
    return GoldenFile(path=path, reference=data["reference"], entries=entries, exists=True)


def read_golden(path: Path, expected_reference: str | None = None) -> GoldenFile:
    """Read and parse one file; a missing file is an empty one."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return GoldenFile(path=path, reference=expected_reference or "")
    except UnicodeDecodeError as exc:
        raise GoldenFileError(path, None, f"not UTF-8 text ({exc.reason})", REFRESH_HINT) from None
    return parse_golden(path, text, expected_reference)


def read_scratch_text(path: Path, what: str, fix: str) -> str:
    """The text of a file one command left for another (the stale report, a prune's trash).

    Anything but a readable UTF-8 file raises ``GoldenError``: one line naming the file and ``fix``.
    A byte-order mark (an editor's) is dropped: the text after it is what pytest-slam wrote.
    """
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise GoldenError(f"{path}: {unreadable(exc, what)}. Fix: {fix}") from None


def unreadable(exc: OSError | UnicodeDecodeError, what: str) -> str:
    """Why a file named on the command line could not be read, in words (no errno, no trace)."""
    if isinstance(exc, FileNotFoundError):
        return f"no {what}"
    if isinstance(exc, IsADirectoryError):
        return f"a folder, not a {what}"
    if isinstance(exc, UnicodeDecodeError):
        return f"not a {what}: not UTF-8 text ({exc.reason})"
    return f"cannot read this {what} ({exc.strerror or exc})"


def _sorted(obj: JSON) -> JSON:
    """Dict keys sorted at every level, so the bytes never depend on insertion order."""
    if isinstance(obj, dict):
        return {k: _sorted(obj[k]) for k in sorted(obj)}
    if isinstance(obj, list):
        return [_sorted(v) for v in obj]
    return obj


def _entry(rec: GoldenRecord) -> dict[str, JSON]:
    """A record as stored: no key (it is the entry's name), no null answer fields (less noise)."""
    data = rec.as_dict()
    del data["key"]
    if not data["turns"]:
        del data["turns"]  # files of tests with no recorded place stay as they were
    data["answers"] = [{k: v for k, v in a.items() if v is not None} for a in data["answers"]]
    return data


def entry_as_dict(rec: GoldenRecord) -> dict[str, JSON]:
    """One entry exactly as a golden file stores it (for the prune trash)."""
    entry: dict[str, JSON] = _sorted(_entry(rec))
    return entry


def entry_from_dict(where: Path, key: str, entry: JSON) -> GoldenRecord:
    """The record an ``entry_as_dict`` entry holds; a bad one raises ``GoldenFileError``."""
    return _record(where, "", key, entry)


EntryCache = dict[str, tuple[GoldenRecord, str]]  # key -> (the record, its text in the file)


def entry_text(rec: GoldenRecord) -> str:
    """One entry's JSON as it sits in the file: keys sorted, scrubbed, indented for its place."""
    text = textcodec.dumps(scrub(_sorted(_entry(rec))), indent=2)
    return text.replace("\n", "\n    ")  # a newline inside a JSON string is escaped: never hit


def dump_golden(golden: GoldenFile, cache: EntryCache | None = None) -> str:
    """The file's text: schema and reference first, then entries sorted, scrubbed of secrets.

    The same bytes as ``textcodec.dumps(scrub(doc), indent=2)`` of the sorted
    document, built entry by entry so that a writer recording one answer at a time can keep the
    text of the entries it wrote before (``cache``, checked by record identity) and pay for one.
    """
    parts = []
    for key in sorted(golden.entries):
        rec = golden.entries[key]
        hit = cache.get(key) if cache is not None else None
        text = hit[1] if hit is not None and hit[0] is rec else entry_text(rec)
        if cache is not None:
            cache[key] = (rec, text)
        parts.append(f"    {textcodec.dumps(key)}: {text}")
    if cache is not None and len(cache) > len(golden.entries):
        for key in set(cache) - set(golden.entries):
            del cache[key]
    entries = "{\n" + ",\n".join(parts) + "\n  }" if parts else "{}"
    reference = textcodec.dumps(scrub(golden.reference))
    return f'{{\n  "schema": {json.dumps(SCHEMA)},\n  "reference": {reference},\n  "entries": {entries}\n}}\n'
