"""A finished test's Outcome as one compact string: what the run keeps of it until the end.

A run held each finished test's Outcome as plain dicts (a 40-key dict per call, its request, its
pairs and scores): about 9.6 KiB a test, 26 KiB a test over ``-p no:slam`` at 5,000 cases with
the rest of the run (issue 53). Kept as the JSON of its non-default fields instead, it is one
string of about 1 KiB, read back one outcome at a time when the end of the run walks them.

``pack`` drops each field of ``Outcome``, ``Call``, ``Pair`` and ``Score`` that holds its
default (the same value of the same type) and the keys derived from the others (``tpot_ms``,
``passed``...: not fields); ``unpack`` reads it back as the record, whose ``as_dict`` is the dict ``pack``
was given. The string is plain JSON text (``ensure_ascii=False``, so a lone surrogate stays
one: ``run/workers/crossing.py`` carries it across xdist as it carries any model text).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableSequence, Sequence
from typing import Any, overload

from pytest_slam.records import JSON, Call, Outcome, Pair, Record, Score, field_names, plain

_MISSING = object()
# One encoder each, made once: ``json.dumps`` with options builds a new one a call, 2-3 us of a
# line's 15 (a 10,000-case report writes 20,000 lines; a run packs every outcome).
_LINE = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_KEPT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _defaults(cls: type[Record]) -> dict[str, Any]:
    """Each field of ``cls`` that has a default, with that default (a factory's made once)."""
    found: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            found[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            found[f.name] = f.default_factory()
    return found


@dataclasses.dataclass(frozen=True)
class _Kind:
    """How a record kind is slimmed: its defaults, its fields in order (``as_dict``'s, less the
    derived keys), its lists of records, and each field as ``_slim_record`` walks it."""

    defaults: dict[str, Any]
    fields: tuple[str, ...]
    nested: dict[str, type[Record]]
    specs: tuple[tuple[str, Any, type[Record] | None, bool], ...]


# The keys ``as_dict`` derives from the fields: never written, made again when read.
_DERIVED: dict[type[Record], set[str]] = {
    Call: {"tpot_ms", "tokens_per_s", "cut_by_cap"},
    Score: {"passed"},
}
# An Outcome reads its calls and pairs by hand (``Outcome.from_dict``), not through ``NESTED``.
_LISTS: dict[type[Record], dict[str, type[Record]]] = {Outcome: {"calls": Call, "pairs": Pair}}


_KINDS: dict[type[Record], _Kind] = {}


def _kind(cls: type[Record]) -> _Kind:
    kind = _KINDS.get(cls)
    if kind is None:
        defaults, fields = _defaults(cls), field_names(cls)
        nested = {**cls.NESTED, **_LISTS.get(cls, {})}
        shallow = cls is Call  # as Call.as_dict: its values as they are, not made plain
        specs = tuple((n, defaults.get(n, _MISSING), nested.get(n), shallow) for n in fields)
        kind = _KINDS[cls] = _Kind(defaults, fields, nested, specs)
    return kind


def slim(data: Mapping[str, JSON], cls: type[Record], keep: bool = False) -> dict[str, JSON]:
    """``data``'s fields of ``cls`` in the record's order, those at their default left out; a key
    the record does not have (a derived one, one of another version) is not kept, unless
    ``keep``: then a key of its own (a ``pytest_slam_report`` hook's) follows the fields."""
    kind = _kind(cls)
    defaults, nested = kind.defaults, kind.nested
    out: dict[str, JSON] = {}
    for name in kind.fields:
        value = data.get(name, _MISSING)
        if value is _MISSING:
            continue
        default = defaults.get(name, _MISSING)
        if default is not _MISSING and type(value) is type(default) and value == default:
            continue
        inner = nested.get(name)
        if inner is not None and isinstance(value, list):
            value = [slim(v, inner, keep) if isinstance(v, Mapping) else v for v in value]
        out[name] = value
    if keep and len(out) < len(data):
        known = set(kind.fields) | _DERIVED.get(cls, set())
        out.update((k, v) for k, v in data.items() if k not in known)
    return out


def slim_record(record: Record) -> dict[str, JSON]:
    """``slim(record.as_dict(), type(record))`` without the whole dict made first: most of the
    writing of a 10,000-case report was the dicts of every field, most of them then left out."""
    out: dict[str, JSON] = {}
    for name, default, inner, shallow in _kind(type(record)).specs:
        value = getattr(record, name)
        if inner is not None and type(value) is list:
            if value:
                out[name] = [slim_record(v) if isinstance(v, inner) else plain(v) for v in value]
            elif default is _MISSING:
                out[name] = []
            continue
        kind = type(value)
        if not (
            shallow or value is None or kind is str or kind is int or kind is float or kind is bool
        ):
            value = plain(value)  # a container or a record; a scalar is its own plain form
            kind = type(value)
        if kind is type(default) and value == default:  # _MISSING's type is no value's
            continue
        out[name] = value
    return out


def record_line(value: Mapping[str, JSON] | Record, cls: type[Record], keep: bool = False) -> str:
    """A record (or its dict) as the JSON report writes it: one line of its non-default fields,
    ASCII (a lone surrogate an escape, which a UTF-8 file can hold), no spaces; ``ValueError``
    for a value JSON cannot hold (NaN). A reader gets each left-out field's default back
    (``from_dict``; ``jq`` reads a left-out key as null). ``keep``: as ``slim``'s."""
    data = slim_record(value) if isinstance(value, Record) else slim(value, cls, keep)
    return _LINE.encode(data)


def pack(outcome: Mapping[str, JSON]) -> str:
    """An Outcome's dict (``Outcome.as_dict()``) as its compact JSON string."""
    return _KEPT.encode(slim(outcome, Outcome))


def outcome_line(outcome: Mapping[str, JSON] | Outcome) -> str:
    """An Outcome (or its dict) as the report's outcome line (``record_line``)."""
    return record_line(outcome, Outcome)


def unpack(kept: str | Mapping[str, JSON], strings: dict[str, str] | None = None) -> Outcome:
    """The Outcome that ``pack`` was given (a dict, from an older or a hand-made report, as it is).

    ``strings``: the strings read so far; each string read again (a model's name, an endpoint, a
    system prompt, a golden file's path, an answer given twice) is that one object, not a copy."""
    data = json.loads(kept) if isinstance(kept, str) else kept
    return Outcome.from_dict(data if strings is None else _shared(data, strings))


def _shared(value: Any, strings: dict[str, str]) -> Any:
    kind = type(value)
    if kind is str:
        return strings.setdefault(value, value)
    if kind is dict:
        return {k: _shared(v, strings) for k, v in value.items()}
    if kind is list:
        return [_shared(v, strings) for v in value]
    return value


class KeptOutcomes(MutableSequence[dict[str, JSON]]):
    """The run's final outcomes, one packed string each; read as the dicts they were packed from.

    A list of ``Outcome.as_dict()`` to its readers (an item is unpacked when it is read, one at a
    time), so what a run holds while its tests run grows by about a kilobyte a test.
    ``records()`` reads them as Outcome records, without the dict in between.
    """

    def __init__(self, items: Iterable[Mapping[str, JSON] | str] = ()) -> None:
        self._items: list[str] = [_packed(item) for item in items]

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> dict[str, JSON]: ...
    @overload
    def __getitem__(self, index: slice) -> list[dict[str, JSON]]: ...
    def __getitem__(self, index: int | slice) -> dict[str, JSON] | list[dict[str, JSON]]:
        if isinstance(index, slice):
            return [unpack(s).as_dict() for s in self._items[index]]
        return unpack(self._items[index]).as_dict()

    @overload
    def __setitem__(self, index: int, value: Mapping[str, JSON] | str) -> None: ...
    @overload
    def __setitem__(self, index: slice, value: Any) -> None: ...
    def __setitem__(self, index: int | slice, value: Any) -> None:
        if isinstance(index, slice):
            self._items[index] = [_packed(v) for v in value]
        else:
            self._items[index] = _packed(value)

    def __delitem__(self, index: int | slice) -> None:
        del self._items[index]

    def insert(self, index: int, value: Mapping[str, JSON] | str) -> None:
        self._items.insert(index, _packed(value))

    def __iter__(self) -> Iterator[dict[str, JSON]]:
        return (unpack(s).as_dict() for s in self._items)

    def __eq__(self, other: object) -> bool:
        return list(self) == list(other) if isinstance(other, list | KeptOutcomes) else False

    __hash__ = None  # type: ignore[assignment]

    def records(self) -> Iterator[Outcome]:
        """Each kept outcome as its record, in the order kept; the records share their strings
        (the end of a run holds them all at once)."""
        strings: dict[str, str] = {}
        return (unpack(s, strings) for s in self._items)

    def run(self, more: Iterable[Outcome] = ()) -> PackedRun:
        """The kept outcomes (then ``more``) as records read one at a time (``PackedRun``)."""
        return PackedRun([*self._items, *more])

    def having(self, *needles: str) -> list[dict[str, JSON]]:
        """The outcomes whose packed text holds one of ``needles``, as dicts: a field is in the
        text only when it is not its default (``"diverged_at"``, ``"capped":true``), so a reader
        of the few outcomes with one unpacks those alone, not every test of the run."""
        return [unpack(s).as_dict() for s in self._items if any(n in s for n in needles)]


class PackedRun(Sequence[Outcome]):
    """A run's outcomes for the end of the run: each a packed string (or a record), made a record
    only when it is read, and let go by the reader.

    The end of a run read every outcome as a record at once: at 5,000 tests those records (2.7
    KiB each) and the verdict over them were the run's peak memory (issue 53). The verdict, the
    scrub and the JSON report each read the outcomes once, one at a time (``ordered``: in the
    report's order), so no reader here holds them all; one that needs a list makes it itself.
    """

    __slots__ = ("_items", "_order")

    def __init__(self, items: Iterable[str | Outcome]) -> None:
        self._items: list[str | Outcome] = list(items)
        self._order: tuple[Callable[[Outcome], Any], list[int]] | None = None  # key, order

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Outcome: ...
    @overload
    def __getitem__(self, index: slice) -> list[Outcome]: ...
    def __getitem__(self, index: int | slice) -> Outcome | list[Outcome]:
        if isinstance(index, slice):
            return [_record(item) for item in self._items[index]]
        return _record(self._items[index])

    def __iter__(self) -> Iterator[Outcome]:
        return (_record(item) for item in self._items)

    def ordered(self, key: Callable[[Outcome], Any]) -> Iterator[Outcome]:
        """Each outcome as a record, in ``sorted(self, key=key)``'s order (a stable sort, so the
        same order as the list sorted): only the keys are held at once, each record is read
        again when its turn comes. The order is found once (every reader asks the same key)."""
        return (_record(self._items[i]) for i in self._sorted(key))

    def ordered_items(
        self, key: Callable[[Outcome], Any]
    ) -> Iterator[tuple[Outcome, str | Outcome]]:
        """``ordered``, each record with what is kept of it (its packed string, or itself)."""
        items = self._items
        return ((_record(items[i]), items[i]) for i in self._sorted(key))

    def _sorted(self, key: Callable[[Outcome], Any]) -> list[int]:
        if self._order is None or self._order[0] is not key:
            keys = [key(outcome) for outcome in self]
            self._order = key, sorted(range(len(keys)), key=keys.__getitem__)
        return self._order[1]

    def shared(self) -> list[Outcome]:
        """Every outcome as a record at once, sharing their repeated strings (the HTML report)."""
        strings: dict[str, str] = {}
        return [unpack(i, strings) if isinstance(i, str) else i for i in self._items]

    def replaced(self, changes: Mapping[int, Outcome]) -> PackedRun:
        """These outcomes with the one at each index of ``changes`` replaced (packed again): the
        scrub's few rebuilt records, the rest shared, not copied."""
        items = list(self._items)
        for index, outcome in changes.items():
            items[index] = pack(outcome.as_dict())
        run = PackedRun(items)
        if not changes:  # the same outcomes: the same order (a scrubbed id may sort elsewhere)
            run._order = self._order
        return run


def _record(item: str | Outcome) -> Outcome:
    return unpack(item) if isinstance(item, str) else item


def _packed(value: Mapping[str, JSON] | str) -> str:
    return value if isinstance(value, str) else pack(value)
