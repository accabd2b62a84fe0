"""A golden file read lazily: index where each entry sits, parse an entry only when it is asked for.

A run that replays a few answers from a big golden file should not pay for parsing all of it. The
files keep their one layout on disk (``fileformat.dump_golden``: indent 2, entries sorted, one
trailing newline), in which every entry starts on a line ``    "KEY": {`` and ends on a line
``    }`` followed by a comma, except the last (a newline in a JSON string is always escaped, so
these lines are never inside a string). ``index_golden`` checks the header and the end of the
file, looks once for a git conflict marker, finds every key line that follows the header or the
closing line of the entry before (a regular-expression pass over each megabyte read, in C, no
Python loop per entry), and keeps only each key's byte offset and the file's signature; the text
itself is dropped as it is read.
``LazyEntries`` reads an entry's bytes back (seek and read) and parses it the first time it is
asked for, so memory grows with what the run touches; once a quarter of the file has been read it
keeps the file's bytes instead (about a third of its records parsed) and keeps no record it parses.
``each`` parses every entry one at a time, keeping none (the fetch plan's scan).

Nothing is trusted that was not checked: an entry is used only if its bytes are the closing line
before it, its key line, one whole JSON value and the separator after it, which means they are
exactly that entry in the document. Anything else falls back to the full parse
(``fileformat.parse_golden``), whose messages name the file and the line: a file in another layout
(hand-written, another indent), a git conflict (found at load, as before), a truncated file (its
end is checked at load), and an entry that does not parse (found when it is read: a lookup, a
write, stale detection when a test failed). If the file was replaced since it was indexed (another
xdist worker wrote it), it is indexed again before an entry is read.
"""

from __future__ import annotations

import json
import operator
import os
import re
from collections.abc import ItemsView, Iterator, Mapping, ValuesView
from pathlib import Path
from typing import BinaryIO

from pytest_slam.golden.fileformat import (
    REFRESH_HINT,
    SCHEMA,
    GoldenFile,
    GoldenFileError,
    GoldenReferenceMismatch,
    _record,
    parse_golden,
)
from pytest_slam.records import GoldenRecord
from pytest_slam.util.gcpause import gc_paused

_STRING = rb'"(?:[^"\\\n]|\\.)*"'
_HEADER = re.compile(
    rb'\{\n  "schema": (' + _STRING + rb'),\n  "reference": (' + _STRING + rb'),\n  "entries": '
)
# A key line of the entries object (the key's pattern unrolled: a run of plain bytes is one step),
# and the same after the closing line of the entry before it and its comma.
_KEY_LINE = rb'\n    "([^"\\\n]*(?:\\.[^"\\\n]*)*)": \{\n'
_ENTRY = re.compile(_KEY_LINE)
_NEXT_ENTRY = re.compile(rb"\n    \}," + _KEY_LINE)
_CONFLICT = b"\n>>>>>>>"  # git closes every conflict with it; a line of ours never starts so
_EMPTY_END = b"{}\n}\n"
_END = b"\n    }\n  }\n}\n"
_ENTRY_END = b"\n    }"
_AFTER_ENTRY = _ENTRY_END + b","
_GROUP_1 = operator.methodcaller("group", 1)

# Reading one entry (open, check, seek, read, parse) costs about twice what the full parse pays per
# entry (bench/bench_golden.py), so once a quarter of a file has been read one entry at a time its
# bytes are read at once and kept, and each entry is parsed from them as it is read, kept by no one
# here: the records of every entry at once were 3 KiB an entry against 1 KiB of its text (issue
# 53). A small file is left lazy for its first reads (a broken entry nobody reads stays unread).
WHOLE_AFTER = 4
WHOLE_MIN = 32

# What the index reads of a file at once (``_index``).
CHUNK = 1 << 20

Signature = tuple[int, ...]


def _signature(st: os.stat_result) -> Signature:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _keys(raw: list[bytes]) -> list[str]:
    joined = b"\n".join(raw)  # a key line holds no newline: one decode and split for all
    if b"\\" not in joined:
        return joined.decode("utf-8").split("\n") if raw else []
    return [json.loads(b'"' + k + b'"') for k in raw]


def _index(
    handle: BinaryIO, size: int, chunk: int = CHUNK
) -> tuple[str, dict[str, int], list[int]] | None:
    """``(reference, {key: its number}, starts)`` of the file open as ``handle`` (``size`` bytes),
    or None when the layout is not ours (or the file is not ``size`` bytes long).

    ``starts[i]`` is where entry i's key line starts (at its newline); the last item is where the
    line after the last entry starts, so entry i's text is ``data[starts[i]:starts[i + 1]]``.
    Read ``chunk`` bytes at a time, not whole: a 52 MB file of 50,000 entries read whole, with a
    match per entry, took 71 MiB at once (issue 53). In each piece, one regular-expression pass
    over its whole lines (in C, no Python loop per entry); a key line and the closing line before
    it are two lines, so the last whole line is read again with the next piece.
    """
    handle.seek(max(0, size - len(_END)))
    tail = handle.read()
    handle.seek(0)
    buf, base, done = b"", 0, False  # ``buf`` holds the file's bytes from ``base`` on

    def more() -> bool:
        nonlocal buf, done
        piece = handle.read(chunk) if not done else b""
        done = not piece
        buf += piece
        return not done

    head = _HEADER.match(buf)
    while head is None and more():
        head = _HEADER.match(buf)
    if head is None:
        return None
    try:
        schema, reference = json.loads(head.group(1)), json.loads(head.group(2))
    except ValueError:
        return None
    pos = head.end()
    if schema != SCHEMA or not isinstance(reference, str):
        return None
    if tail.endswith(_EMPTY_END) and size == pos + len(_EMPTY_END):
        return reference, {}, []
    body_end = size - len(_END) + len(_ENTRY_END)  # the end of the last entry's value
    while len(buf) < pos + 2 and more():
        pass
    if buf[pos : pos + 1] != b"{" or tail != _END or body_end <= pos:
        return None
    while buf.find(b"\n", pos + 2) < 0 and more():  # the first key line, whole
        pass
    first = _ENTRY.match(buf, pos + 1, body_end)
    if first is None:
        return None
    keys: list[str] = []
    starts, scan = [pos + 1], first.end()
    while True:
        if buf.find(_CONFLICT, max(0, pos - base)) >= 0:  # the carried line searched again
            return None
        whole = len(buf) if done else buf.rfind(b"\n", scan - base) + 1  # whole lines to here
        matches = [*_NEXT_ENTRY.finditer(buf, scan - base, max(0, min(whole, body_end - base)))]
        starts.extend(map((base + len(_AFTER_ENTRY)).__add__, map(re.Match.start, matches)))
        try:
            keys.extend(_keys(list(map(_GROUP_1, matches))))
        except ValueError:
            return None
        if done:
            break
        last = buf.rfind(b"\n", scan - base, max(scan - base, whole - 1))  # the last whole line
        keep = last if last >= 0 else scan - base
        base, buf, scan = base + keep, buf[keep:], base + keep
        more()
    if base + len(buf) != size:
        return None
    starts.append(body_end + 1)  # as if a next key line started after the last entry's ","
    try:
        first_key = _keys([first.group(1)])
    except ValueError:
        return None
    keys[:0] = first_key
    return reference, dict(zip(keys, range(len(keys)), strict=True)), starts


def index_golden(path: Path, expected_reference: str | None = None) -> GoldenFile:
    """A golden file whose entries are read when asked for (``LazyEntries``); a file in another
    layout is parsed whole. A missing file is an empty one; a broken one raises, naming its line."""
    try:
        with open(path, "rb") as handle:  # the signature of what is read, checked at each entry
            sig = _signature(os.fstat(handle.fileno()))
            with gc_paused():
                found = _index(handle, sig[1], CHUNK)  # read at call time (a test sets it)
            if found is None:  # not our layout: parsed whole, as read now
                handle.seek(0)
                data = handle.read()
    except FileNotFoundError:
        return GoldenFile(path=path, reference=expected_reference or "")
    if found is None:
        return _parse(path, data, expected_reference)
    reference, numbers, starts = found
    if expected_reference is not None and reference != expected_reference:
        raise GoldenReferenceMismatch(path, reference, expected_reference)
    entries = LazyEntries(path, reference, sig, numbers, starts)
    return GoldenFile(path=path, reference=reference, entries=entries, exists=True)


def _parse(path: Path, data: bytes, expected_reference: str | None) -> GoldenFile:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GoldenFileError(path, None, f"not UTF-8 text ({exc.reason})", REFRESH_HINT) from None
    return parse_golden(path, text, expected_reference)


class LazyEntries(Mapping[str, GoldenRecord]):
    """A golden file's entries by key, each parsed the first time it is read.

    Keys, ``len`` and ``in`` come from the index and parse nothing. An entry is read back from the
    file (after checking that the file is still the one indexed) and used only when its text is
    a key line, a value that parses whole, and the separator after it. Otherwise the whole file is
    parsed the slow way, so any error is the one a full parse gives, naming the file and the line.
    """

    def __init__(
        self,
        path: Path,
        reference: str,
        sig: Signature,
        numbers: dict[str, int],
        starts: list[int],
    ) -> None:
        self._path, self._reference = path, reference
        self._sig, self._numbers, self._starts = sig, numbers, starts
        self._parsed: dict[str, GoldenRecord] = {}
        self._whole: Mapping[str, GoldenRecord] | None = None  # set by a fall-back full parse
        self._data: bytes | None = None  # the file's bytes, once a quarter was read (``_hold``)
        self._reads = 0  # entries parsed by lookups (``each`` counts none)

    @property
    def parsed(self) -> int:
        """How many entries lookups parsed so far (all of them after a fall-back)."""
        return len(self._whole) if self._whole is not None else self._reads

    def _keys(self) -> Mapping[str, object]:
        return self._whole if self._whole is not None else self._numbers

    def __len__(self) -> int:
        return len(self._keys())

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._keys()))

    def __contains__(self, key: object) -> bool:
        return key in self._keys()

    def __getitem__(self, key: str) -> GoldenRecord:
        for _ in range(3):  # the file replaced under us again and again: parse it whole
            if self._whole is not None:
                return self._whole[key]
            rec = self._parsed.get(key)
            if rec is not None:
                return rec
            number = self._numbers[key]  # KeyError: not in the file
            start, end = self._span(number)
            data = self._data  # once: release() may drop it from a fetch thread's reader
            text = data[start:end] if data is not None else self._read(start, end)
            if text is None:  # the file was replaced since it was indexed: index it again
                self._reindex()
                continue
            rec = self._checked(key, number, text)
            if rec is None:
                break
            self._reads += 1
            if data is None:
                self._parsed[key] = rec
                count = len(self._parsed)
                if count >= WHOLE_MIN and count * WHOLE_AFTER > len(self._numbers):
                    self._hold()  # reading one by one stopped paying: read the rest at once
            return rec
        self._fall_back()
        return self[key]

    def items(self) -> ItemsView[str, GoldenRecord]:
        """Every entry, by a bulk reader (``at_place``, maybe once a test): the file parsed whole
        once and kept, as the fall-back does (the bytes kept would be parsed at every read)."""
        return self._all().items()

    def values(self) -> ValuesView[GoldenRecord]:
        return self._all().values()

    def _all(self) -> Mapping[str, GoldenRecord]:
        if self._whole is None:
            self._fall_back()
        assert self._whole is not None
        return self._whole

    def each(self) -> Iterator[GoldenRecord]:
        """Every entry, parsed one at a time from one read of the file and kept by no one here
        (a reader that wants a few fields of each); a file replaced since it was indexed, or an
        entry that does not check out, is read as the full parse gives it (or raises its error)."""
        data = None
        if self._whole is None:
            data = self._data if self._data is not None else self._read(0, self._sig[1])
        done: set[str] = set()
        if data is not None:
            for key, number in self._numbers.items():
                start, end = self._span(number)
                rec = self._parsed.get(key) or self._checked(key, number, data[start:end])
                if rec is None:
                    break
                done.add(key)
                yield rec
            else:
                return
        yield from (rec for key, rec in self._all().items() if key not in done)

    def _span(self, number: int) -> tuple[int, int]:
        """Entry ``number``'s bytes: from the end of the entry before (its closing line and comma;
        the first follows the header) to the separator after it."""
        return self._starts[number] - (len(_AFTER_ENTRY) if number else 0), self._starts[number + 1]

    def _checked(self, key: str, number: int, text: bytes) -> GoldenRecord | None:
        """The record in entry ``number``'s bytes (``_span``), or None when they are not one."""
        before = len(_AFTER_ENTRY) if number else 0
        if text[:before] != _AFTER_ENTRY[:before]:
            return None
        return self._entry(key, text[before:], last=number == len(self._numbers) - 1)

    def _entry(self, key: str, text: bytes, last: bool) -> GoldenRecord | None:
        """The record in ``text`` (key line, value, separator), or None when it is not one."""
        head = _ENTRY.match(text)
        if head is None or text[-1:] != (b"\n" if last else b","):
            return None
        try:
            if _keys([head.group(1)]) != [key]:
                return None
            return _record(self._path, "", key, json.loads(text[head.end() - 2 : -1]))
        except (ValueError, TypeError, GoldenFileError):  # UnicodeDecodeError is a ValueError
            return None

    def _read(self, start: int, end: int) -> bytes | None:
        try:
            with open(self._path, "rb") as handle:
                if _signature(os.fstat(handle.fileno())) != self._sig:
                    return None
                handle.seek(start)
                text = handle.read(end - start)
        except FileNotFoundError:
            return None
        return text if len(text) == end - start else None

    def _reindex(self) -> None:
        fresh = index_golden(self._path, self._reference).entries
        if isinstance(fresh, LazyEntries):
            self._sig, self._numbers, self._starts = fresh._sig, fresh._numbers, fresh._starts
            self._parsed, self._data = {}, None
        else:
            self._whole = fresh

    def release(self) -> None:
        """Let go of the bytes and records kept: the run's reads are over (later reads work, from
        the file again)."""
        self._data, self._parsed = None, {}

    def _hold(self) -> None:
        """Keep the file's bytes and no parsed record (a file replaced since: left as it is)."""
        data = self._read(0, self._sig[1])
        if data is not None:
            self._data, self._parsed = data, {}

    def _fall_back(self) -> None:
        """Parse the file whole: raises its error (naming the line), or, should an entry have been
        misread, gives every entry as the full parse sees it."""
        try:
            data = self._path.read_bytes()
        except FileNotFoundError:
            self._whole = {}
            return
        self._whole = _parse(self._path, data, self._reference).entries
