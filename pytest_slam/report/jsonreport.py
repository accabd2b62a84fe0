"""The JSON report, schema ``pytest-slam/report/3`` (every field is documented in SCHEMA.md).

It holds the run settings, the per-model verdict, per-test rows and every outcome with its calls,
so the HTML report and a later baseline comparison can be made from the file alone.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, Outcome, records, utc_now
from pytest_slam.report.aggregate import (
    OutcomeLike,
    PerTestRow,
    Verdict,
    in_order,
    outcome_order,
    sort_outcomes,
)
from pytest_slam.report.packed import outcome_line, record_line
from pytest_slam.report.schema import ReportDocument
from pytest_slam.report.seal import Seal, digest_of, line_text, shard_key, sign
from pytest_slam.report.visits import Visits
from pytest_slam.util.files import atomic_write
from pytest_slam.util.gcpause import gc_paused
from pytest_slam.util.textcodec import for_strict_reader

if TYPE_CHECKING:
    from pydantic import TypeAdapter

SCHEMA_NAME = "pytest-slam/report"
# 2: an outcome's fields at their default are left out of its line; 3: the visits' ``selected``
# too when it is ``collected`` (a version-2 reader would read it as no test run)
SCHEMA_VERSION = 3
OLDEST_READ = 1  # a version-1 report (every field written) reads as it did, a version-2 one too
SCHEMA_ID = f"{SCHEMA_NAME}/{SCHEMA_VERSION}"


class ReportError(SlamError, kind="report"):
    """A report file that cannot be read: missing, not JSON, or another schema version."""


@dataclass
class Report:
    """A loaded report: the verdict as written, and the outcomes it was made from."""

    verdict: Verdict
    outcomes: list[Outcome] = field(default_factory=list)
    schema: str = SCHEMA_ID
    generated_at: str | None = None
    path: str | None = None
    visits: Visits | None = None  # absent from reports written before shards could merge
    digest: str | None = None  # as written (seal.py); checked by ``load_report(sealed=True)``
    signature: str | None = None  # as written (seal.py); verified by ``slam report merge``


def report_document(
    verdict: Verdict, outcomes: Iterable[OutcomeLike], visits: Visits | None = None
) -> ReportDocument:
    """The typed document: the verdict's parts, then every outcome in canonical order."""
    return ReportDocument(
        schema=SCHEMA_ID,
        generated_at=utc_now(),
        run=verdict.run,
        models=verdict.models,
        reference=verdict.reference,
        tests=verdict.tests,
        gate=verdict.gate,
        notes=list(verdict.notes),
        visits=visits,
        outcomes=sort_outcomes(outcomes),
    )


def report_dict(
    verdict: Verdict,
    outcomes: Iterable[OutcomeLike],
    visits: Visits | None = None,
    rows: list[dict[str, JSON]] | None = None,
) -> dict[str, JSON]:
    """The document written to disk, as JSON types (``report.schema.json`` describes it).

    ``rows``: each outcome's ``as_dict``, in the order of ``outcomes`` (records), when the caller
    has them already (the end of a run made them once to scrub secrets): used as they are, not
    made again, which was a sixth of the end of a run of a thousand tests.
    """
    if rows is None:
        return report_document(verdict, outcomes, visits).as_dict()
    listed = records(Outcome, outcomes)
    if len(listed) != len(rows):
        raise ValueError(f"report_dict: {len(rows)} rows for {len(listed)} outcomes")
    document = report_document(verdict, [], visits).as_dict()
    order = sorted(range(len(rows)), key=lambda i: outcome_order(listed[i]))
    document["outcomes"] = [rows[i] for i in order]
    return document


def write_json(
    path: str | os.PathLike[str],
    verdict: Verdict,
    outcomes: Iterable[OutcomeLike],
    visits: Visits | None = None,
    *,
    lines: Iterable[str] | None = None,
) -> Path:
    """Write the report with the one atomic writer: a reader never sees half a file.

    The outcomes are streamed, one line each, so a merged run of 300,000 never exists as one
    document or one string; the rest of the document is encoded first, so a value JSON cannot
    hold (NaN) there is refused before anything is written. ``lines``: each outcome's line
    (``packed.outcome_line``) in canonical order, made already (``slam report merge``
    spooled them as it read its shards): written as they come, ``outcomes`` not read.
    """
    with gc_paused():  # what is built here is freed as it is written: no cycle to collect
        # the per-test rows (one per test and model) are encoded one at a time as they are
        # written, not first made into dicts and one string with the rest of the head
        document = report_dict(dataclasses.replace(verdict, tests=[]), [], visits)
        seal, mark = Seal(document.get("visits")), f"slam-digest-{uuid.uuid4().hex}"
        key = shard_key()  # read before anything is written: an unreadable key file is refused
        signed = f"slam-signature-{uuid.uuid4().hex}" if key else None
        rows = iter(verdict.tests)
        head, tail = _frame({**document, "digest": mark, "signature": signed}, rows)
        if lines is None:
            lines = (outcome_line(o) for o in in_order(outcomes))  # read one at a time
        sealed = (seal.add(line) for line in lines)
        pieces = _sealed(_joined(head, sealed, tail), mark, seal, key, signed)
        return atomic_write(path, pieces)


def _sealed(
    pieces: Iterator[str], mark: str, seal: Seal, key: bytes | None, signed: str | None
) -> Iterator[str]:
    """The pieces, the digest (and, with a shard key, its signature) written into the last one
    (the tail: every line is hashed by then)."""
    last = None
    for piece in pieces:
        if last is not None:
            yield last
        last = piece
    if last is not None:
        last = last.replace(f'"{mark}"', json.dumps(seal.text()), 1)
        if key is not None and signed is not None:
            last = last.replace(f'"{signed}"', json.dumps(sign(key, seal.text())), 1)
        yield last


def report_text(document: dict[str, JSON]) -> str:
    """The document as JSON: indented, except that each per-test row and each outcome is one line
    (its fields at their default left out: ``packed.outcome_line``).

    An indent makes ``json`` encode in Python instead of C, which for a thousand outcomes was most
    of a report's cost; one line per outcome keeps a committed baseline's diff one line per test.
    """
    outcomes = document.get("outcomes")
    if not isinstance(outcomes, list):
        return json.dumps(document, indent=2, allow_nan=False) + "\n"
    seal = Seal(document.get("visits"))
    lines = [seal.add(_line(o)) for o in outcomes]
    key = shard_key()
    signature = sign(key, seal.text()) if key else None
    head, tail = _frame({**document, "digest": seal.text(), "signature": signature})
    return "".join(_joined(head, iter(lines), tail))


def _frame(
    document: dict[str, JSON], rows: Iterable[JSON] | None = None
) -> tuple[Iterator[str], str]:
    """The indented text before the outcomes' list, in pieces, and the text after it
    (``outcomes`` is its last key).

    The per-test rows (``rows``, else the document's ``tests``: one per test and model, as many as
    the outcomes) are encoded one line each as the pieces are read; the rest, a few dozen
    lines, by ``json``'s indenting encoder.
    """
    if rows is None:
        found = document.get("tests")
        rows = found if isinstance(found, list) else []
    listed = iter(rows)
    first = next(listed, None)
    keys = ("tests", "outcomes") if first is not None else ("outcomes",)
    marks = {key: f'"slam-{key}-{uuid.uuid4().hex}"' for key in keys}
    text = json.dumps(
        {**document, **{k: m[1:-1] for k, m in marks.items()}}, indent=2, allow_nan=False
    )
    head, tail = text.split(marks["outcomes"], 1)
    if first is None:
        return iter((head,)), tail
    before, after = head.split(marks["tests"], 1)
    return _rows_text(before, first, listed, after), tail


def _rows_text(before: str, first: JSON, rows: Iterator[JSON], after: str) -> Iterator[str]:
    yield f"{before}[\n    {_row_line(first)}"
    for row in rows:
        yield f",\n    {_row_line(row)}"
    yield f"\n  ]{after}"


def _line(outcome: JSON) -> str:
    """An outcome of a document (a hook's keys kept) as its line."""
    if isinstance(outcome, dict):
        return record_line(outcome, Outcome, keep=True)
    return json.dumps(outcome, separators=(",", ":"), allow_nan=False)


def _row_line(row: JSON | PerTestRow) -> str:
    """A per-test row as the report writes it: one line, its fields at their default left out
    (a hook's keys kept), as each outcome."""
    if isinstance(row, PerTestRow | dict):
        return record_line(row, PerTestRow, keep=True)
    return json.dumps(row, separators=(",", ":"), allow_nan=False)


def _joined(head: Iterable[str], lines: Iterator[str], tail: str) -> Iterator[str]:
    """The report's text in pieces: ``head``'s, the outcome lines in a list, ``tail``."""
    yield from head
    first = next(lines, None)
    if first is None:
        yield f"[]{tail}\n"  # as json.dumps writes an empty list
        return
    yield f"[\n    {first}"
    for line in lines:
        yield f",\n    {line}"
    yield f"\n  ]{tail}\n"


def load_report(path: str | os.PathLike[str], *, sealed: bool = False) -> Report:
    """Read a report written by ``write_json``; raise ``ReportError`` saying what is wrong.

    ``sealed``: the file must carry the digest its writer computed, and its values still match it
    (a shard to merge: an edited one is refused).
    """
    with gc_paused():  # every object built here lives on: nothing for the collector to find
        return _load_report(path, sealed)


def _load_report(path: str | os.PathLike[str], sealed: bool = False) -> Report:
    data, text = _read_json(Path(path))
    check_schema(data, str(path))
    if sealed:
        _check_digest(data, str(path))
    wrong = _first_error(text, missing=False)  # a value of the wrong type, anywhere
    try:
        if wrong is None:
            return Report(
                verdict=Verdict.from_dict(data),
                outcomes=records(Outcome, data.get("outcomes") or []),
                schema=data["schema"],
                generated_at=data.get("generated_at"),
                path=str(path),
                visits=Visits.from_dict(data["visits"]) if data.get("visits") else None,
                digest=data.get("digest") if isinstance(data.get("digest"), str) else None,
                signature=_text(data.get("signature")),
            )
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        wrong = _first_error(text, missing=True, named_in=str(exc)) or str(exc)
    raise ReportError(
        f"{path} is not a report as pytest-slam writes it ({wrong}); "
        "pass the file written by --slm-report, unchanged"
    )


OUTCOMES_OPEN = '  "outcomes": [\n'  # write_json's line before the first outcome line
OUTCOMES_CLOSE = ("  ],\n", "  ]\n")
_OPEN = b"\n" + OUTCOMES_OPEN.encode()  # the line, as found in a block of the file
_CLOSE = tuple(close.encode() for close in OUTCOMES_CLOSE)
_BOM = b"\xef\xbb\xbf"  # an editor's, read past (utf-8-sig)
_BLOCK = 1 << 20  # bytes read at a time while the head is looked for


@dataclass
class Streamed:
    """A report read head first (``stream_report``): the document without its outcomes, and its
    outcomes read again from the file, one line at a time, at each ``outcomes()``."""

    path: Path
    head: dict[str, JSON]
    head_text: str
    _held: list[JSON] | None = None  # a report not laid out as write_json writes it: read whole
    _spaced: bool = False  # held, of schema 1: its lines were hashed with json's spaces
    _start: int = 0  # where its first outcome line begins in the file (bytes)

    def lines(self) -> Iterator[str]:
        """Each outcome's JSON text, in file order (``read_value`` reads one)."""
        if self._held is not None:  # each value as its writer hashed it (seal.digest_of)
            for value in self._held:
                yield line_text(value, spaced=self._spaced)
            return
        with self.path.open("rb") as lines:
            lines.seek(self._start)
            for line in lines:
                if line in _CLOSE:
                    return
                yield line.strip().removesuffix(b",").decode()


def stream_report(path: str | os.PathLike[str]) -> Streamed:
    """The report's head (every part but the outcomes), its outcomes left in the file: a merge
    of many shards holds one outcome at a time, not a shard's document. A file not laid out as
    ``write_json`` writes it (one outcome a line) is read whole, as ``load_report`` reads it.

    The head is found a block at a time, not a line at a time: a shard's head names every test
    of the suite, a line each (300,000 lines a shard at 20 x 5,000 x 3, issue 53)."""
    where = Path(path)
    _check_file(where)
    try:
        with where.open("rb") as lines:
            head, start = _head(lines)
            tail = None
            if start is not None:
                lines.seek(start)
                for line in lines:
                    if line in _CLOSE:
                        tail = '  "outcomes": []' + line.decode().removeprefix("  ]")
                        tail += lines.read().decode()
                        break
        text = None if tail is None else head.decode() + tail
    except UnicodeDecodeError as exc:
        raise ReportError(
            f"{where} is not a pytest-slam JSON report: not valid JSON ({exc}); "
            "pass the file written by --slm-report"
        ) from None
    if text is None or start is None:  # no outcome a line: read as a whole
        data, text = _read_json(where)
        held = data.get("outcomes")
        data["outcomes"] = []
        listed = held if isinstance(held, list) else []
        return Streamed(where, data, text, listed, _spaced(data))
    data = read_value(where, text)
    if not isinstance(data, dict):
        raise ReportError(
            f"{where} is not a pytest-slam JSON report: top level is not an object; "
            "pass the file written by --slm-report"
        )
    return Streamed(where, data, text, _start=start)


def _head(file: BinaryIO) -> tuple[bytes, int | None]:
    """The file's text before its outcomes' line (``OUTCOMES_OPEN``), an editor's BOM left out,
    and where its first outcome line begins; None where it has no such line."""
    found = bytearray()
    while True:
        block = file.read(_BLOCK)
        before = len(found)
        found += block
        at = found.find(_OPEN, max(0, before - len(_OPEN)))
        if at >= 0 or not block:
            break
    skip = len(_BOM) if found.startswith(_BOM) else 0
    if at < 0:
        return bytes(found[skip:]), None
    return bytes(found[skip : at + 1]), at + len(_OPEN)


def read_value(path: Path, text: str) -> JSON:
    """One JSON value of a report's text; ``ReportError`` when it is not JSON."""
    try:
        value: JSON = json.loads(text, parse_constant=_not_json)
    except ValueError as exc:  # JSONDecodeError is a ValueError
        raise ReportError(
            f"{path} is not a pytest-slam JSON report: not valid JSON ({exc}); "
            "pass the file written by --slm-report"
        ) from None
    return value


def head_error(text: str) -> str | None:
    """The first value of a wrong type in a report's head (``_first_error``)."""
    return _first_error(text, missing=False)


@functools.cache
def _outcome_type() -> TypeAdapter[Outcome]:
    from pydantic import TypeAdapter

    return TypeAdapter(Outcome)


def outcome_error(line: str) -> str | None:
    """The first value of a wrong type in one outcome's JSON text, as ``_first_error`` finds it
    in a document."""
    from pydantic import ValidationError

    try:
        _outcome_type().validate_json(for_strict_reader(line), strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            if error["type"] != "missing":
                return ".".join(str(part) for part in ("outcomes", *error["loc"])) + (
                    f": {error['msg']}"
                )
    return None


def _text(value: JSON) -> str | None:
    return value if isinstance(value, str) else None


def _check_digest(data: dict[str, JSON], path: str) -> None:
    written, outcomes = data.get("digest"), data.get("outcomes")
    if not isinstance(written, str):
        raise ReportError(
            f"{path} carries no digest of its outcomes (written by an older pytest-slam, or "
            "edited); run it again with this pytest-slam and pass the file --slm-report wrote"
        )
    spaced = _spaced(data)
    if not isinstance(outcomes, list) or digest_of(data.get("visits"), outcomes, spaced) != written:
        raise ReportError(
            f"{path} was changed after it was written: its outcomes or visits do not match its "
            "digest; pass the file --slm-report wrote, unchanged, or run it again"
        )


@functools.cache
def _document_type() -> TypeAdapter[ReportDocument]:
    from pydantic import TypeAdapter

    return TypeAdapter(ReportDocument)


def _first_error(text: str, *, missing: bool, named_in: str = "") -> str | None:
    """Where the document is not a ``ReportDocument`` (types checked strictly), in one phrase:
    the first value of a wrong type, or (``missing``) the first missing part whose name the
    reader's error (``named_in``) quotes.

    Missing parts are tolerated while the reader does without them: hand-made and older reports
    leave out what the report code never needed.
    """
    from pydantic import ValidationError

    try:
        # the file's text, no second encode (a lone surrogate's escape, which its parser refuses,
        # as U+FFFD: only the types are checked here)
        _document_type().validate_json(for_strict_reader(text), strict=True)
    except ValidationError as exc:
        for error in exc.errors():
            named = repr(str(error["loc"][-1])) in named_in if error["loc"] else False
            if (error["type"] == "missing") == missing and (named or not missing):
                where = ".".join(str(part) for part in error["loc"])
                return f"{where}: {error['msg']}"
    return None


def _not_json(name: str) -> float:
    """``NaN``, ``Infinity``: Python's json reads them, no writer of a report writes them."""
    raise ValueError(f"{name} is not a number JSON allows")


def _check_file(path: Path) -> None:
    if path.is_dir():
        raise ReportError(f"{path} is a folder, not a report; pass the file --slm-report wrote")
    if not path.is_file():
        raise ReportError(
            f"pytest-slam report not found: {path}; write one with `pytest --slm-report={path}`"
        )


def _read_json(path: Path) -> tuple[dict[str, JSON], str]:
    """The document and its text (an editor's BOM left out)."""
    _check_file(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # an editor's BOM is no harm
        data = json.loads(text, parse_constant=_not_json)  # NaN: never written, so an edit
    except (UnicodeDecodeError, ValueError) as exc:  # JSONDecodeError is a ValueError
        raise ReportError(
            f"{path} is not a pytest-slam JSON report: not valid JSON ({exc}); "
            "pass the file written by --slm-report"
        ) from None
    if not isinstance(data, dict):
        raise ReportError(
            f"{path} is not a pytest-slam JSON report: top level is not an object; "
            "pass the file written by --slm-report"
        )
    return data, text


def _spaced(data: dict[str, JSON]) -> bool:
    """Whether a report's outcome lines were written with ``json``'s spaces: schema 1's were."""
    return data.get("schema") == f"{SCHEMA_NAME}/1"


def check_schema(data: dict[str, JSON], where: str) -> int:
    """Return the schema version, or raise ``ReportError`` naming the versions and the fix."""
    schema = data.get("schema")
    name, _, version = str(schema).rpartition("/")
    if name != SCHEMA_NAME or not version.isdigit():
        raise ReportError(
            f"{where} is not a pytest-slam report (schema {schema!r}, "
            f"expected {SCHEMA_ID!r}); pass the file written by --slm-report"
        )
    number = int(version)
    if number < OLDEST_READ:
        raise ReportError(
            f"{where} uses the older schema {schema}; this pytest-slam reads {SCHEMA_ID}. "
            "Re-run the tests with --slm-report to write a current report"
        )
    if number > SCHEMA_VERSION:
        raise ReportError(
            f"{where} uses the newer schema {schema}; this pytest-slam reads {SCHEMA_ID}. "
            "Upgrade pytest-slam to read it: pip install -U pytest-slam"
        )
    return number
