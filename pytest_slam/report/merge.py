"""Merge the JSON reports of a suite's shards into the report and gate of the whole run.

Nothing is averaged: a shard's report holds every outcome with its calls and pairs, so the merge
takes the union of the outcomes and ``aggregate`` recomputes every figure over all of them (counts,
pass rates, bootstrap intervals over all requests, percentiles over all latency samples), exactly
as for one run of the same calls. The gate is then evaluated on the merged verdict as a run
evaluates it. Shards must be one run cut in parts: the same settings (the candidates selected, the
report paths aside), no test run for the same model in two shards. A shard's word is checked, not
taken: its file must match the digest its run sealed it with (seal.py), it may select only tests it
collected, and hold outcomes only of tests it selected. A digest can be recomputed by whoever edits
the file, so a shard must also carry a signature of it under the shard key the merge holds
(``Trust``); unsigned shards are let in only when the merge is told to (``--unsigned``), and the
merged report says which.

The merge streams (issue 53): it reads one shard at a time and one outcome line at a time, so what
it holds is the fold of the verdict (``aggregate.Fold``: each model's outcomes in a temporary
file, ``foldspool``), the unions of the visits (the suite every shard names, once: ``_Suite``), and
a key per test, never every shard's outcomes as records. It reads each shard once, to check it
(digest, signature, claims), parsing each line once and preparing it for the fold (``Prepared``:
its order, its JSON value and the line the merged report writes for it, as read when it is the
line this version writes: ``as_written``, or a shard signed by a job of this version: ``_ours``);
large shards are checked by worker processes in parallel (``load_shards``), every check of a shard
made before anything of it is used. The fold then merges the prepared shards in canonical order
(each shard's file is in that order), spooling each outcome's line as it goes; the report is
written from the spool, and the verdict reads each model's outcomes back from its file, one model
at a time.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import marshal
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, NamedTuple

from pytest_slam import __version__
from pytest_slam.errors import SlamError
from pytest_slam.metrics.budget import SessionBudget
from pytest_slam.records import JSON, Outcome
from pytest_slam.report.aggregate import (
    ENGINE,
    Fold,
    RunInfo,
    Verdict,
    final_items,
    natural_key,
    outcome_order,
    sort_outcomes,
)
from pytest_slam.report.budgets import session_budget_breaches
from pytest_slam.report.foldspool import stripped
from pytest_slam.report.gate import Gate, apply_gate, evaluate, incomplete_reason
from pytest_slam.report.gate_result import GateResult
from pytest_slam.report.jsonreport import (
    SCHEMA_VERSION,
    Report,
    ReportError,
    Streamed,
    check_schema,
    head_error,
    outcome_error,
    read_value,
    stream_report,
)
from pytest_slam.report.packed import outcome_line, slim_record
from pytest_slam.report.seal import KEY_ENV, KEY_FILE_ENV, Seal, verified
from pytest_slam.report.visits import Visits, VisitsFold
from pytest_slam.util.files import WriteFailed, writing
from pytest_slam.util.gcpause import gc_paused

# Settings a shard may set for itself: the candidates it ran and where it wrote its reports.
PER_SHARD = ("models", "report", "html")
AGREED = ("reference", "plugin_version")  # run fields every shard must share


class MergeError(SlamError, kind="report"):
    """Shards that are not parts of one run (one line: which file, what, the fix)."""


EXIT_INCOMPLETE = 2  # pytest's exit status of an interrupted run: not the whole suite


@dataclass
class Merged:
    """The merged run: its verdict (gate applied), outcomes, visits and exit status before the
    gate; ``gate`` is None when no gate rule applied (as a run's)."""

    verdict: Verdict
    outcomes: Iterable[Outcome]  # read again from the shards at each iteration, in canonical order
    visits: Visits
    gate: GateResult | None
    exitstatus: int
    lines: Iterable[str] | None = None  # each outcome's line, in canonical order (``write_json``)


@dataclass
class Trust:
    """How shards are trusted: ``key`` verifies their signatures (seal.py); ``unsigned`` lets a
    shard that carries no signature, or one this merge has no key for, in unverified (the merged
    report says so). ``unverified``: those let in, filled as the shards are read."""

    key: bytes | None = None
    unsigned: bool = False
    unverified: list[str] = field(default_factory=list)


UNSIGNED_FIX = (
    f"give every shard's job the shard key ({KEY_ENV}, or a file named by {KEY_FILE_ENV}) and "
    f"this merge the same key ({KEY_ENV}, {KEY_FILE_ENV} or --key-file), or pass --unsigned to "
    "merge shards unverified (the merged report then says so)"
)


Order = tuple[tuple[tuple[str | int, ...], str], int, str]  # ``outcome_order``'s


class Read(NamedTuple):
    """An outcome as the merge reads it the second time: its canonical order, its JSON value
    (its fields at their default may be left out) and the line the merged report writes for it
    (``packed.outcome_line``'s). No record is made of it (the verdict reads it back blanked)."""

    order: Order
    data: dict[str, JSON]
    line: str
    packed: bytes | None = None  # prepared: its ``stripped`` value for the fold; ``data`` holds
    # only what the fold reads besides (``_Preparing``), the record is made from ``line``

    @property
    def nodeid(self) -> str:
        return str(self.data["nodeid"])

    @property
    def outcome(self) -> str:
        return str(self.data.get("outcome", "passed"))

    def record(self) -> Outcome:
        """The outcome as a record (all its fields: from its line where ``data`` is the fold's)."""
        return Outcome.from_dict(self.data if self.packed is None else json.loads(self.line))

    @classmethod
    def of(cls, outcome: Outcome) -> Read:
        """An outcome held as a record (an engine's, a held shard's): its line made."""
        return cls(outcome_order(outcome), slim_record(outcome), outcome_line(outcome))


@dataclass
class Shard:
    """One shard as the merge holds it between its reads: its run, its own gate and its engines'
    cold starts, not its outcomes (read again from its prepared file, ``Prepared``)."""

    name: str
    run: RunInfo
    gate: GateResult | None
    engines: list[Outcome]  # an engine's warm-up outcomes (a few a shard), renamed for the merge
    prepared: Prepared | None = None  # None: ``held`` holds its outcomes
    held: list[Outcome] | None = None  # in canonical order, engines left out
    canonical: bool = False  # its lines are written as read, unchecked (``_ours``)

    def outcomes(self) -> Iterator[Outcome]:
        """Its outcomes but the engines', in canonical order."""
        if self.held is not None:
            return iter(self.held)
        return (item.record() for item in self.items())

    def items(self) -> Iterator[Read]:
        """Its outcomes but the engines', in canonical order, each with its JSON value and the
        line the merged report writes for it, as its check prepared them."""
        if self.held is not None:
            return map(Read.of, self.held)
        assert self.prepared is not None
        return self.prepared.items()


class Prepared:
    """A checked shard's outcomes but the engines', in file order, as the merge's second read
    takes them: each its order, its JSON value and its line, ``marshal`` bytes in a temporary
    file written by the check (``_read_outcomes``) from the one JSON parse of each line. The
    second read is then no second parse of the shard (a fifth of a JSON parse to read back), and
    it reads what was checked, not the shard's file again. Made by a worker process where the
    shards are checked in parallel (``load_shards``): then only its path is sent."""

    def __init__(self, path: str, count: int) -> None:
        self.path, self.count = path, count
        self._file: IO[bytes] | None = None

    def __getstate__(self) -> tuple[str, int]:
        return self.path, self.count

    def __setstate__(self, state: tuple[str, int]) -> None:
        self.path, self.count = state
        self._file = None

    def take(self) -> None:
        """Opened and its name removed: the file goes when it is closed, whatever happens."""
        self._file = open(self.path, "rb")  # noqa: SIM115 (held by the shard, read at each items())
        os.unlink(self.path)

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
        else:
            with contextlib.suppress(OSError):
                os.unlink(self.path)

    def items(self) -> Iterator[Read]:
        if self._file is None:
            self.take()
        assert self._file is not None
        self._file.seek(0)
        read, loads = self._file.read, marshal.loads
        for _ in range(self.count):
            size = int.from_bytes(read(_SIZE), "little")
            order, data, line = loads(read(size))
            size = int.from_bytes(read(_SIZE), "little")
            yield Read(order, data, line, read(size))


_SIZE = 4  # bytes of a prepared value's length before it
_FOLD_READS = ("nodeid", "outcome", "model", "pairs")  # of a value, besides its stripped one


class _Preparing:
    """``Prepared``'s file as it is written. A full temporary folder is ``WriteFailed`` naming
    that folder (the merge's own output is not written yet, so nothing was changed)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.gettempdir())
        with writing(self._folder):
            self._file = tempfile.NamedTemporaryFile(  # noqa: SIM115 (closed by ``done``)
                "wb", prefix="slam-merge-", suffix=".shard", delete=False
            )
        self.count = 0

    def add(self, order: Order, data: dict[str, JSON], line: str) -> None:
        """The outcome's order, what the fold reads of its value besides its ``stripped`` value
        (``Fold.add_value``: its node id, outcome, model and pairs), its line, and its
        ``stripped`` value as the fold's file keeps it (``data`` is changed)."""
        fold = {key: data[key] for key in _FOLD_READS if key in data}
        head = marshal.dumps((order, fold, line))
        packed = marshal.dumps(stripped(data))
        size = _SIZE
        try:  # not ``writing``: a context a line was a tenth of this
            self._file.write(len(head).to_bytes(size, "little") + head)
            self._file.write(len(packed).to_bytes(size, "little") + packed)
        except OSError as exc:
            self.drop()
            raise WriteFailed(self._folder, exc) from exc
        self.count += 1

    def done(self) -> Prepared:
        try:
            with writing(self._folder):
                self._file.close()
        except WriteFailed:
            self.drop()
            raise
        return Prepared(self._file.name, self.count)

    def drop(self) -> None:
        with contextlib.suppress(OSError):
            self._file.close()
        with contextlib.suppress(OSError):
            os.unlink(self._file.name)


@dataclass
class Shards:
    """The shards checked, in the order given, and their visits merged."""

    shards: list[Shard]
    visits: Visits


PARALLEL_BYTES = 64 << 20  # shards this large in all are checked by worker processes


def load_shards(
    paths: Sequence[str | os.PathLike[str]], trust: Trust, workers: int | None = None
) -> Shards:
    """Each shard checked (digest, signature, claims, run, overlaps), its outcomes prepared for
    the second read (``Prepared``); ``MergeError`` for a file that is not a report of a shard of
    this run, or not signed with the merge's key. Shards are checked one at a time, or, with
    ``workers`` > 1 (by default: as many as the CPUs, up to 4, for shards of 64 MiB or more),
    by worker processes in parallel, the results taken in the order given, every check of a shard
    made before anything of it is used."""
    if not paths:
        raise MergeError(
            "no shard reports given; pass the JSON files the shards' --slm-report wrote"
        )
    names = [str(path) for path in paths]
    count = _workers(names) if workers is None else min(workers, len(names))
    shards: list[Shard] = []
    fold, owners, suite = VisitsFold(), _Owners(), _Suite()
    pool = ProcessPoolExecutor(count) if count > 1 else None
    pending: list[Future[_Checked]] = []
    try:
        with gc_paused():  # what is kept lives until the merge is written
            if pool is not None:
                pending = [
                    pool.submit(_check_apart, path, i, trust.key, trust.unsigned)
                    for i, path in enumerate(names)
                ]
            for index, path in enumerate(names):
                if pool is None:
                    checked = _check(path, index, trust.key, trust.unsigned, suite)
                else:
                    checked = _result(pending[index], path).restored(suite)
                shard, visits = checked.shard, checked.visits
                if shard.prepared is not None:
                    shard.prepared.take()
                shards.append(shard)
                owners.take((index, path), checked.claims)
                trust.unverified.extend(checked.unverified)
                if len(shards) > 1 and visits.run != fold.first_run:
                    raise _other_run(path, names[0], visits.run, fold.first_run)
                if visits.unverified:  # an earlier merge's unverified shards stay named
                    trust.unverified.extend(visits.unverified)
                fold.add(shard.name, visits)
    except BaseException:
        _discard(shards, pending, pool)
        raise
    if pool is not None:
        pool.shutdown()
    return Shards(shards, fold.merged())


def _workers(paths: Sequence[str]) -> int:
    """Worker processes for shards this large: a check is about a third of the merge's time."""
    try:
        size = sum(os.path.getsize(path) for path in paths)
    except OSError:  # one is missing: checked one at a time, and refused in one line
        return 1
    if size < PARALLEL_BYTES:
        return 1
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cpus or 1, len(paths)))


def _discard(
    shards: list[Shard], pending: list[Future[_Checked]], pool: ProcessPoolExecutor | None
) -> None:
    """A refused merge leaves no prepared file behind: those taken, and those still made."""
    for shard in shards:
        if shard.prepared is not None:
            shard.prepared.discard()
    if pool is None:
        return
    pool.shutdown(wait=True, cancel_futures=True)
    taken = len(shards)
    for future in pending[taken:]:
        if future.done() and not future.cancelled() and future.exception() is None:
            prepared = future.result().shard.prepared
            if prepared is not None:
                prepared.discard()


@dataclass
class _Checked:
    """One shard checked: what the merge keeps of it, its visits, the tests it ran (``_Owners``)
    and whether it was let in unsigned."""

    shard: Shard
    visits: Visits
    claims: list[Claim]
    unverified: list[str]
    suite: str | None = None  # sent by a worker: the suite's JSON text, not its list

    def restored(self, suite: _Suite) -> _Checked:
        """A worker's result with its suite as the list the shards before it share."""
        if self.suite is not None:
            self.visits.collected = suite.of_text(self.suite)
            self.suite = None
        return self


def _check(path: str, index: int, key: bytes | None, unsigned: bool, suite: _Suite) -> _Checked:
    trust = Trust(key, unsigned)
    claims: list[Claim] = []
    shard, visits = _read_shard(path, index, trust, claims, suite)
    return _Checked(shard, visits, claims, trust.unverified)


_WORKER_SUITE: _Suite | None = None  # a worker process's: the suite of the shards it checked


def _check_apart(path: str, index: int, key: bytes | None, unsigned: bool) -> _Checked:
    """``_check`` in a worker process: the suite sent as its text (a memory copy, where its
    list of 300,000 node ids is that many objects to pickle and build), an error as one the
    merge can raise again (``WriteFailed`` does not pickle)."""
    global _WORKER_SUITE
    suite = _WORKER_SUITE = _WORKER_SUITE or _Suite()
    try:
        checked = _check(path, index, key, unsigned, suite)
    except WriteFailed as exc:
        raise _Unwritten(str(exc.path), exc.errno, exc.strerror) from None
    checked.suite = suite.text(checked.visits.collected)
    checked.visits.collected = []
    return checked


class _Unwritten(SlamError, kind="report"):
    """A worker's ``WriteFailed``, sent back as its parts (``_result``)."""


def _result(future: Future[_Checked], path: str) -> _Checked:
    """A worker's check of ``path``; a worker that died (killed, out of memory) is one line."""
    try:
        return future.result()
    except _Unwritten as exc:
        folder, errno, strerror = exc.args
        raise WriteFailed(folder, OSError(errno, strerror)) from None
    except BrokenProcessPool:
        raise MergeError(
            f"the worker process checking {path} stopped without an answer (killed, or out of "
            "memory); nothing was written. Run the merge again; where memory is short, merge "
            "the shards in groups and then merge the groups' reports"
        ) from None


def _other_run(path: str, first: str, run: str | None, want: str | None) -> MergeError:
    """Every shard carries its run's identity in its signed visits (run/workers/runid.py): a shard
    of another run (an older artifact) would merge its outcomes as this run's."""
    return MergeError(
        f"{path} is a shard of another run than {first} (run {run or 'unnamed'}, not "
        f"{want or 'unnamed'}); merge only the reports of one run's shards (give its "
        "shards one SLAM_RUN_ID where the CI has no run id)"
    )


Claim = tuple[str, str, JSON, str]  # a test, model and repeat count a shard ran; its node id


def claim_of(data: dict[str, JSON]) -> Claim:
    repeat = data.get("repeat")
    runs = repeat.get("runs") if isinstance(repeat, dict) else None
    return str(data.get("test")), str(data.get("model")), runs, str(data.get("nodeid"))


class _Owners:
    """Which shard ran each test for each model (and repeat count): two shards may not."""

    def __init__(self) -> None:
        self._owner: dict[tuple[str, str, JSON], tuple[int, str]] = {}

    def claim(self, shard: tuple[int, str], data: dict[str, JSON]) -> None:
        """Shard ``shard`` (its index and name) ran the test of outcome ``data``."""
        self.take(shard, [claim_of(data)])

    def take(self, shard: tuple[int, str], claims: Iterable[Claim]) -> None:
        """Shard ``shard`` (its index and name) ran these tests (``claim_of``)."""
        owners = self._owner
        for test, model, runs, nodeid in claims:
            owner = owners.setdefault((test, model, runs), shard)
            if owner[0] != shard[0]:
                raise MergeError(
                    f"{shard[1]} and {owner[1]} both ran {nodeid} (overlapping shards); "
                    "give each test to one shard, or merge only one of these files"
                )


class _Suite:
    """The suite the last shard collected: its node ids, as a set, and as its JSON text in the
    visits' digest. Every shard's head names the whole suite (300,000 node ids a shard at
    20 x 5,000 x 3, issue 53); shards that collected the same suite share one list of it, made
    into a set and encoded once, not once a shard."""

    def __init__(self) -> None:
        self._ids: list[str] | None = None
        self._set: frozenset[str] = frozenset()
        self._text = ""

    def shared(self, visits: Visits, written: JSON) -> frozenset[str]:
        """``visits.collected`` as a set; where it is the last shard's suite, ``visits`` and its
        JSON value (``written``) are given that list (the same node ids: changed in place)."""
        ids = visits.collected
        if ids != self._ids:
            self._ids, self._set, self._text = ids, frozenset(ids), ""
        visits.collected = self._ids
        if isinstance(written, dict) and written.get("collected") is ids:
            written["collected"] = self._ids
        return self._set

    def text(self, ids: list[str]) -> str:
        """The suite's JSON text (``ids``: ``shared``'s list), encoded once."""
        if ids is not self._ids:
            return json.dumps(ids, allow_nan=False)
        if not self._text:
            self._text = json.dumps(self._ids, allow_nan=False)
        return self._text

    def of_text(self, text: str) -> list[str]:
        """The suite of a worker's shard (``text``'s ids): the last shard's list where the same."""
        if self._ids is None or text != self.text(self._ids):
            self._ids = json.loads(text)
            self._set, self._text = frozenset(self._ids), text
        assert self._ids is not None
        return self._ids

    def seal(self, written: JSON) -> Seal:
        """The digest of the visits' JSON value (``Seal``'s), the suite's text encoded once."""
        ids = self._ids
        if ids is None or not isinstance(written, dict) or written.get("collected") is not ids:
            return Seal(written)
        text = self.text(self._ids or [])
        parts = [
            f"{json.dumps(key)}: "
            + (text if key == "collected" else json.dumps(value, sort_keys=True, allow_nan=False))
            for key, value in sorted(written.items())
        ]
        return Seal(written, text="{" + ", ".join(parts) + "}")


def _read_shard(
    path: str, index: int, trust: Trust, claims: list[Claim], suite: _Suite
) -> tuple[Shard, Visits]:
    """One shard read through once: its head, then each outcome line (digest, types, claims,
    order), then its digest and signature."""
    try:
        streamed = stream_report(path)
        head = streamed.head
        schema = check_schema(head, path)
        if head.get("visits") is None:
            raise MergeError(
                f"{path} has no 'visits' (written by an older pytest-slam, or not by "
                "--slm-report); run the shard again with this pytest-slam"
            )
        vouched = _ours(schema, head.get("run")) and _signed(head, trust.key)
        wrong = head_error(_unsealed(head) if vouched else streamed.head_text)
        if wrong is not None:
            raise ReportError(
                f"{path} is not a report as pytest-slam writes it ({wrong}); "
                "pass the file written by --slm-report, unchanged"
            )
        visits = Visits.from_dict(head["visits"])
        verdict = Verdict.from_dict({**head, "tests": [], "models": [], "reference": None})
        shard, sample = _read_outcomes(path, index, streamed, visits, claims, vouched, suite)
    except ReportError as exc:
        raise MergeError(str(exc)) from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise MergeError(
            f"{path} is not a report as pytest-slam writes it ({exc}); "
            "pass the file written by --slm-report, unchanged"
        ) from None
    shard.run, shard.gate = verdict.run, verdict.gate
    signature = head.get("signature")
    try:
        _check_signature(path, str(head.get("digest") or ""), _text(signature), trust)
    except BaseException:  # refused: its prepared file goes with it
        if shard.prepared is not None:
            shard.prepared.discard()
        raise
    shard.canonical = vouched and sample
    return shard, visits


def _signed(head: dict[str, JSON], key: bytes | None) -> bool:
    """Whether the head's digest carries a signature under ``key`` (its lines are checked
    against the digest as they are read; ``_check_signature`` refuses the shard otherwise)."""
    signature = head.get("signature")
    digest = head.get("digest")
    if key is None or not isinstance(signature, str) or not isinstance(digest, str):
        return False
    return verified(key, digest, signature)


def _ours(schema: int, run: JSON) -> bool:
    """Whether a shard's run wrote its lines with this code: this schema and version. When its
    signature is verified too, its lines are taken as written by this code: the seal covers
    each line's text, and only a shard's job (the key's holder) signs one, each line
    ``packed.outcome_line`` of its record, the line the whole run writes, of the record's
    types. Its lines and visits are then not type-checked (``outcome_error``: a line changed since is
    refused by the digest) and written as read (``as_written`` was 0.1 ms an outcome, 30 s at
    300,000), its first line checked still (a build of another commit under the same version).
    A shard let in unsigned is checked line by line: anyone could have written it (a key twice,
    spaces), and the merged report is signed."""
    version = run.get("plugin_version") if isinstance(run, dict) else None
    return schema == SCHEMA_VERSION and version == __version__


# A head's parts a merge does not read: its visits, which its signed digest covers (they name
# every test of the suite: most of its head), and its verdict's rows (one a test and model: the
# merge computes every row again from the outcomes).
_NOT_CHECKED = ("visits", "models", "reference", "tests")


def _unsealed(head: dict[str, JSON]) -> str:
    """The head's text for its type check but the parts the merge does not read."""
    return json.dumps({k: v for k, v in head.items() if k not in _NOT_CHECKED})


def _text(value: JSON) -> str | None:
    return value if isinstance(value, str) else None


def _order(data: dict[str, JSON]) -> Order:
    """``outcome_order`` of an outcome's JSON value, without making its record."""
    repeat = data.get("repeat")
    runs = int(repeat.get("runs", 0)) if isinstance(repeat, dict) else 0
    return natural_key(str(data["nodeid"])), runs, str(data.get("outcome", "passed"))


def _read_outcomes(
    path: str,
    index: int,
    streamed: Streamed,
    visits: Visits,
    claims: list[Claim],
    vouched: bool,
    suite: _Suite,
) -> tuple[Shard, bool]:
    """The shard's outcome lines checked (digest, types unless ``vouched``: ``_ours``, claims,
    order) and prepared for the second read (``Prepared``: each line parsed once), and whether
    its first line is the line this version writes (``as_written``: a sample for
    ``Shard.canonical``)."""
    written = streamed.head.get("visits")
    collected = suite.shared(visits, written)
    unknown = next((n for n in visits.selected if n not in collected), None)
    if unknown is not None:
        count = sum(1 for n in visits.selected if n not in collected)
        raise MergeError(
            f"{path} selected {count} test(s) it did not collect (first: {unknown}); "
            "pass the report the shard's run wrote, unchanged"
        )
    del collected
    selected = set(visits.selected)
    seal = suite.seal(written)
    shard = Shard(path, RunInfo(), None, [])
    foreign: list[str] = []
    last: Order | None = None
    ordered, sample, canonical = True, None, False
    prepared = _Preparing()
    try:
        for line in streamed.lines():
            data = read_value(streamed.path, line)
            seal.add(line)  # the text its writer sealed: one changed in any way is refused
            if not isinstance(data, dict):
                raise ReportError(
                    f"{path} is not a report as pytest-slam writes it (an outcome "
                    "that is not an object); pass the file --slm-report wrote"
                )
            order = _checked_line(path, index, line, data, shard, vouched, selected, foreign)
            if sample is None:
                sample = as_written(data, line)
                canonical = vouched and sample
            if order is None:
                continue
            claims.append(claim_of(data))
            ordered = ordered and (last is None or last <= order)
            last = order
            if not (canonical or as_written(data, line)):
                line = outcome_line(Outcome.from_dict(data))
            prepared.add(order, data, line)
        _sealed(path, streamed, seal, foreign, visits)
        shard.prepared = prepared.done()
    except BaseException:
        prepared.drop()
        raise
    shard.engines.sort(key=outcome_order)
    streamed.head, streamed.head_text = {}, ""  # read: its lines are prepared, not read again
    if not ordered:  # not in canonical order (written by hand): held, sorted, as a shard was
        shard.held = sort_outcomes(o for o in shard.outcomes())
        shard.prepared.discard()
        shard.prepared = None
    return shard, sample is not False


def _checked_line(
    path: str,
    index: int,
    line: str,
    data: dict[str, JSON],
    shard: Shard,
    vouched: bool,
    selected: set[str],
    foreign: list[str],
) -> Order | None:
    """One outcome line's checks; its order, or None for an engine's (kept in ``shard``)."""
    wrong = None if vouched else outcome_error(line)
    if wrong is not None:
        raise ReportError(
            f"{path} is not a report as pytest-slam writes it ({wrong}); "
            "pass the file written by --slm-report, unchanged"
        )
    if "model" not in data or "test" not in data:
        raise ReportError(
            f"{path} is not a report as pytest-slam writes it (an outcome without its "
            "'model' or 'test'); pass the file written by --slm-report, unchanged"
        )
    if data.get("outcome") == ENGINE:
        engine = Outcome.from_dict(data)
        if index:
            engine.nodeid = f"{engine.nodeid} (shard {index + 1})"
        shard.engines.append(engine)
        return None
    if data.get("nodeid") not in selected:
        foreign.append(str(data.get("nodeid")))
    return _order(data)


def _sealed(path: str, streamed: Streamed, seal: Seal, foreign: list[str], visits: Visits) -> None:
    """The shard's digest matches what was read; it holds outcomes only of tests it selected."""
    written = streamed.head.get("digest")
    if not isinstance(written, str):
        raise ReportError(
            f"{path} carries no digest of its outcomes (written by an older pytest-slam, or "
            "edited); run it again with this pytest-slam and pass the file --slm-report wrote"
        )
    if seal.text() != written:
        raise ReportError(
            f"{path} was changed after it was written: its outcomes or visits do not match its "
            "digest; pass the file --slm-report wrote, unchanged, or run it again"
        )
    # A shard cut short (an xdist worker lost before it published its ids) may hold outcomes its
    # ids miss: its gate is INCOMPLETE anyway, and its digest still holds it as written.
    if foreign and visits.complete:
        raise MergeError(
            f"{path} holds {len(foreign)} outcome(s) of tests it did not select (first: "
            f"{foreign[0]}); pass the report the shard's run wrote, unchanged"
        )


def _check_signature(path: str, digest: str, signature: str | None, trust: Trust) -> None:
    """A shard signed with the merge's key passes; one whose signature does not match is refused
    whatever the flags (it was edited after signing, or signed with another key); an unsigned one,
    or one the merge has no key for, only with ``--unsigned``, and is then named in the report."""
    key = trust.key
    if signature is not None and key is not None:
        if verified(key, digest, signature):
            return
        raise MergeError(
            f"{path}: its signature does not match the shard key: it was changed after its run "
            "signed it, or signed with another key; pass the file the shard's run wrote, and give "
            f"this merge the key the shards' jobs had ({KEY_ENV}, {KEY_FILE_ENV} or --key-file)"
        )
    if trust.unsigned:
        trust.unverified.append(path)
        return
    why = (
        "is signed, but this merge has no shard key to verify it"
        if signature is not None
        else "carries no signature (its run had no shard key)"
    )
    raise MergeError(f"{path} {why}; {UNSIGNED_FIX}")


def unverified_note(names: Sequence[str]) -> str:
    """The merged report's note on shards let in by ``--unsigned``."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (
        f"merged with --unsigned: {len(names)} shard(s) not verified by a signature ({shown}); "
        "their outcomes are taken on their word, so a forged shard could change this verdict"
    )


class MergedOutcomes(Iterable[Outcome]):
    """The shards' outcomes in canonical order, read again from the shards at each iteration
    (a few at a time: the next of each shard), never all held."""

    def __init__(self, shards: Sequence[Shard]) -> None:
        self._shards = shards

    def __iter__(self) -> Iterator[Outcome]:
        return (item.record() for item in self.items())

    def items(self) -> Iterator[Read]:
        """Each outcome as ``Read``, the engines' too."""
        streams: list[Iterable[Read]] = []
        for shard in self._shards:
            streams += [shard.items(), map(Read.of, shard.engines)]
        return heapq.merge(*streams, key=_read_order)


def _read_order(item: Read) -> Order:
    return item.order


class Spool(Iterable[str]):
    """The merged outcomes' lines (``packed.outcome_line`` of each ``as_dict``, as ``write_json`` writes
    them), in a temporary file as the fold reads them: the report is written from it, so the
    shards are not read and parsed a third time. Read again from its start at each iteration.
    A full temporary folder is ``WriteFailed`` naming that folder (the merge's own output is not
    written yet, so nothing was changed)."""

    def __init__(self) -> None:
        self._folder = Path(tempfile.gettempdir())
        with writing(self._folder):
            self._file = tempfile.TemporaryFile("w+b")  # noqa: SIM115 (held by Merged)

    def kept(self, items: Iterable[Read]) -> Iterator[Read]:
        """Each outcome, its line spooled first."""
        write = self._file.write
        for item in items:
            try:  # not ``writing``: a context a line was a tenth of this
                write(item.line.encode() + b"\n")
            except OSError as exc:
                raise WriteFailed(self._folder, exc) from exc
            yield item

    def __iter__(self) -> Iterator[str]:
        with writing(self._folder):
            self._file.flush()
        self._file.seek(0)
        return (line[:-1].decode() for line in self._file)


def _itself(item: Read) -> Read:
    return item


def as_written(data: dict[str, JSON], line: str) -> bool:
    """Whether ``line``, read from a shard its seal vouches for, is the line this merge would
    write for it (``packed.outcome_line``: its fields at their default left out, no spaces). A
    shard from another version of pytest-slam, or with a NaN, is written anew from its records
    (0.9 s of a 13 s merge of 15,000 outcomes: ``bench/bench_merge_scale.py``)."""
    try:
        return outcome_line(data) == line
    except ValueError:  # NaN: made again from the record, which refuses it in one line
        return False


class _Plain:
    """The outcomes as dicts, again at each iteration (the session budget reads them by model)."""

    def __init__(self, outcomes: Iterable[Outcome]) -> None:
        self._outcomes = outcomes

    def __iter__(self) -> Iterator[dict[str, JSON]]:
        return (o.as_dict() for o in self._outcomes)


def merge(shards: Shards | Sequence[Report], unverified: Sequence[str] = ()) -> Merged:
    """The shards as one run: outcomes unioned, every figure recomputed, the gate evaluated;
    ``unverified`` shards (let in by ``--unsigned``) named in a note of the verdict."""
    if not isinstance(shards, Shards):
        shards = held_shards(shards)
    parts = shards.shards
    with gc_paused():  # the fold's records live until the verdict is made
        run = merged_run([(s.name, s.run) for s in parts])
        outcomes, lines = MergedOutcomes(parts), Spool()
        fold = Fold(compact=True)  # each model's outcomes in a file, read back as records
        for item in final_items(lines.kept(outcomes.items()), _itself):
            fold.add_value(item.data, item.packed)
        verdict = fold.verdict(run)
        visits = shards.visits
        if unverified:
            verdict.notes.append(unverified_note(unverified))
            visits.unverified = list(unverified)  # signed with the merge: a re-merge says so
        missing = _missing(visits)
        status = EXIT_INCOMPLETE if missing else visits.exitstatus
        why = _shard_incomplete(parts) or missing
        gate = _gate(verdict, outcomes, why, status)
    return Merged(verdict, outcomes, visits, gate, status, lines)


def held_shards(reports: Sequence[Report]) -> Shards:
    """Reports already read (``load_report``) as shards, their outcomes held in memory."""
    shards, fold, owners = [], VisitsFold(), _Owners()
    for index, report in enumerate(reports):
        name = report.path or f"#{index + 1}"
        engines, tests = [], []
        for outcome in sort_outcomes(report.outcomes):
            if outcome.outcome == ENGINE:
                if index:
                    outcome.nodeid = f"{outcome.nodeid} (shard {index + 1})"
                engines.append(outcome)
            else:
                owners.claim((index, name), outcome.as_dict())
                tests.append(outcome)
        engines.sort(key=outcome_order)
        shards.append(Shard(name, report.verdict.run, report.verdict.gate, engines, held=tests))
        fold.add(name, report.visits or Visits())
    return Shards(shards, fold.merged())


def _missing(visits: Visits) -> str | None:
    """Why the shards are not the whole suite: collected tests that ran in no shard (a shard's
    report was not given, or a splitter dropped tests). The verdict of part of a suite is not the
    suite's, so the merge exits as an interrupted run would, its gate INCOMPLETE."""
    missing = visits.missing()
    if not missing:
        return None
    return (
        f"{len(missing)} collected test(s) ran in no shard (first: {missing[0]}): a shard's "
        "report is missing; merge every shard's report"
    )


def merged_run(runs: list[tuple[str, RunInfo]]) -> RunInfo:
    """One run's info: models by name in first-seen order, settings checked to agree, the span
    of the shards' times; sentences that differ (cost model, GPU telemetry) are all kept."""
    first_name, first = runs[0]
    settings = dict(first.settings)
    models = {m.name: m for _, r in runs for m in r.models}
    for name, run in runs[1:]:
        for key in AGREED:
            if getattr(run, key) != getattr(first, key):
                raise _disagree(
                    name, first_name, f"run.{key}", getattr(run, key), getattr(first, key)
                )
        for key in sorted(set(run.settings) | set(settings)):
            if key not in PER_SHARD and run.settings.get(key) != settings.get(key):
                raise _disagree(
                    name,
                    first_name,
                    f"run.settings.{key}",
                    run.settings.get(key),
                    settings.get(key),
                )
    settings["models"] = list(models)
    settings["report"] = settings["html"] = None  # the merge's own outputs are not a shard's
    started = [r.started for _, r in runs if r.started]
    finished = [r.finished for _, r in runs if r.finished]
    return RunInfo(
        models=list(models.values()),
        reference=first.reference,
        settings=settings,
        started=min(started) if started else None,
        finished=max(finished) if finished else None,
        pytest_version=_joined(r.pytest_version for _, r in runs),
        plugin_version=first.plugin_version,
        cost_assumption=_joined(r.cost_assumption for _, r in runs),
        gpu_telemetry=_joined(r.gpu_telemetry for _, r in runs),
    )


def _disagree(name: str, first: str, field: str, value: object, expected: object) -> MergeError:
    return MergeError(
        f"{name} is not a shard of the same run as {first}: {field} is {value!r}, not "
        f"{expected!r}; run every shard with the same pyproject.toml and options"
    )


def _joined(texts: Iterable[str]) -> str:
    seen: list[str] = []
    for text in texts:
        if text and text not in seen:
            seen.append(text)
    return "; ".join(seen)


def _shard_incomplete(shards: Sequence[Shard]) -> str | None:
    """The first shard whose own gate was incomplete (interrupted, stopped, a worker lost): the
    whole run would have been. A shard that ran no swapped test is no reason on its own."""
    nothing_ran = incomplete_reason(0, None, 0)
    for shard in shards:
        gate = shard.gate
        if gate is not None and gate.incomplete and gate.incomplete != nothing_ran:
            return f"shard {shard.name}: {gate.incomplete}"
    return None


def _gate(
    verdict: Verdict, outcomes: Iterable[Outcome], shard_incomplete: str | None, exitstatus: int
) -> GateResult | None:
    """The gate as the run applies it (run/end/finish.py ``_gate``), on the merged verdict."""
    settings = verdict.run.settings
    gate_table = settings.get("gate")
    budget = settings.get("budget")
    gate = Gate.from_config(gate_table if isinstance(gate_table, dict) else None)
    plain: Iterable[dict[str, JSON]] = _Plain(outcomes) if budget else []
    limits = SessionBudget.from_config(budget if isinstance(budget, dict) else None)
    breaches = session_budget_breaches(limits, verdict.run.model_names, plain, verdict)
    tests_run = sum(
        row.tests_run + row.tests_not_swapped + row.tests_no_calls for row in verdict.models
    )
    why = shard_incomplete or incomplete_reason(exitstatus, None, tests_run)
    result = evaluate(gate, verdict, None, breaches, incomplete=why)
    apply_gate(verdict, result)
    return result if result.configured else None
