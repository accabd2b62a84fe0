"""A compact fold's outcomes, by model, in a temporary file each: what the verdict reads of them.

``slam report merge`` folds 300,000 outcomes of 20 shards (issue 53); the verdict reads each
model's outcomes once, as records, after every one was added. Kept as the report's lines and read
back by their place, each cost a seek, a JSON parse, a walk to share its strings and a record
built through ``from_dict``: about 0.1 ms an outcome, a third of the merge. Here an outcome's JSON
value (a line's, its defaults left out) is stored without the texts the verdict never reads
(answers, requests, explanations), as ``marshal`` bytes (a fifth of a JSON parse to read back),
in its model's file, in the order added; read back, each is the record ``Outcome.from_dict``
makes of that value, built straight from it. Its repeated names (model, role, scorer, verdict,
golden file) are interned before they are written, so the records of one model share them.
"""

from __future__ import annotations

import contextlib
import marshal
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pytest_slam.records import JSON, Call, Outcome, Pair, Score
from pytest_slam.util.files import WriteFailed, writing

# Texts the verdict never reads: left out (each field's default is what the record reads back).
_CALL_TEXTS = ("request", "text", "tool_calls", "logprobs", "other_choices", "usage_details")
_PAIR_TEXTS = ("reference_text", "reference_tool_calls")
# Names whose values repeat from outcome to outcome (a few a run): interned, so shared.
_OUTCOME_NAMES = ("model", "outcome")
_CALL_NAMES = ("model", "role", "endpoint", "finish_reason", "response_model", "error_kind")
_PAIR_NAMES = ("golden_file", "reference_model")
_SCORE_NAMES = ("scorer", "verdict", "decided_by")
# What ``Outcome.from_dict`` fills in a call or a pair that leaves it out.
_CALL_NEEDS: dict[str, JSON] = {"model": "", "role": "candidate", "request": {}}
_PAIR_NEEDS: dict[str, JSON] = {
    "call_index": -1,
    "key": "",
    "golden_file": "",
    "reference_text": None,
}
_SIZE = 4  # bytes of each value's length before it


def stripped(data: dict[str, Any]) -> dict[str, Any]:
    """An outcome's JSON value without the texts the verdict never reads, its repeated names
    interned (changed in place)."""
    _interned(data, _OUTCOME_NAMES)
    for call in data.get("calls") or ():
        for name in _CALL_TEXTS:
            call.pop(name, None)
        _interned(call, _CALL_NAMES)
    for pair in data.get("pairs") or ():
        for name in _PAIR_TEXTS:
            pair.pop(name, None)
        _interned(pair, _PAIR_NAMES)
        for score in pair.get("scores") or ():
            score.pop("explanation", None)
            _interned(score, _SCORE_NAMES)
    return data


def _interned(data: dict[str, Any], names: tuple[str, ...]) -> None:
    for name in names:
        value = data.get(name)
        if type(value) is str:
            data[name] = sys.intern(value)


def outcome_of(data: dict[str, Any]) -> Outcome:
    """``Outcome.from_dict(data)``, built straight from a value that holds only the records'
    own fields (a report line's); any other value through ``from_dict``."""
    try:
        return _built(data)
    except TypeError:  # a key no record has (another version's, a derived one): read as ever
        return Outcome.from_dict(data)


def pair_of(data: dict[str, Any]) -> Pair:
    """A pair of an outcome's JSON value as ``Outcome.from_dict`` reads it, built straight from
    it where it holds only the records' own fields."""
    try:
        return _pair(data)
    except TypeError:
        return Outcome.from_dict({"nodeid": "", "test": "", "model": "", "pairs": [data]}).pairs[0]


def _built(data: dict[str, Any]) -> Outcome:
    calls = data.get("calls")
    pairs = data.get("pairs")
    if calls or pairs:
        data = dict(data)
        if calls:
            data["calls"] = [Call(**{**_CALL_NEEDS, **call}) for call in calls]
        if pairs:
            data["pairs"] = [_pair(pair) for pair in pairs]
    return Outcome(**data)


def _pair(data: dict[str, Any]) -> Pair:
    scores = data.get("scores")
    found = {**_PAIR_NEEDS, **data}
    if scores:
        found["scores"] = [Score(**score) for score in scores]
    return Pair(**found)


class ModelSpools:
    """Each model's outcomes (``stripped`` values) in a temporary file, in the order added. A
    full temporary folder is ``WriteFailed`` naming it (nothing of the merge is written yet)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.gettempdir())
        self._files: dict[str, tuple[IO[bytes], list[int]]] = {}  # model -> file, [count]

    def add(self, model: str, data: dict[str, JSON]) -> None:
        """Keep ``data`` (a ``stripped`` value: not changed here) as the next of ``model``."""
        self.add_packed(model, marshal.dumps(data))

    def add_packed(self, model: str, encoded: bytes) -> None:
        """Keep a ``stripped`` value, as ``marshal.dumps`` made it, as the next of ``model``."""
        found = self._files.get(model)
        if found is None:
            with writing(self._folder):
                found = self._files[model] = (tempfile.TemporaryFile("w+b"), [0])  # noqa: SIM115 (closed once read)
        try:  # not ``writing``: a context a line was a tenth of this
            found[0].write(len(encoded).to_bytes(_SIZE, "little") + encoded)
        except OSError as exc:
            self._discard()
            raise WriteFailed(self._folder, exc) from exc
        found[1][0] += 1

    def models(self) -> list[str]:
        return list(self._files)

    def take(self, model: str) -> Iterator[Outcome]:
        """The model's outcomes as records, in the order added; its file closed once read."""
        found = self._files.pop(model, None)
        if found is None:
            return
        spool, (count,) = found
        try:
            with writing(self._folder):  # the seek writes what is still buffered
                spool.seek(0)
        except WriteFailed:
            self._discard(spool)
            raise
        with spool:
            read = spool.read
            for _ in range(count):
                size = int.from_bytes(read(_SIZE), "little")
                yield outcome_of(marshal.loads(read(size)))

    def _discard(self, *more: IO[bytes]) -> None:
        """Every file closed, what is still buffered dropped: the folder is full, and a close
        that flushes would raise the same error over the one the merge reports."""
        for spool in [*more, *(spool for spool, _ in self._files.values())]:
            with contextlib.suppress(OSError):
                spool.close()
        self._files.clear()
