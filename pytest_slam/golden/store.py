"""The golden store: look up, record, flush and prune the reference's answers, file by file.

Files live at ``<root>/<reference-slug>/<test module path>.json`` (``.py`` becomes ``.json``), so a
pull request shows the answers next to the tests that asked. Every write takes the file's lock,
re-reads the file inside it, merges and replaces it atomically (temp file + ``os.replace``), so xdist
workers writing the same file never lose an entry and a reader never sees half a file.

Two ways to write: buffered (``record`` many, then ``flush`` each file once: what an import does), or
``write_through`` (each ``record`` is on disk before it returns: what a test run does, because every
recorded answer is a paid call that a kill must not lose). A write-through record is one fsynced
line in the module's append log (``golden/appendlog.py``); the golden file is rewritten when the log
has grown to an eighth of it, so recording stays linear in the answers. A rewrite skips the re-read
when the file is still the one this store wrote last (same inode, size and times) and re-serializes
only the entries that changed. At the end of a run ``flush`` writes what is still buffered or
logged, and folds in the test names visits added since.

Locks live in ``<root>/../.slam/locks/`` (never next to the goldens); that folder gets a
``.gitignore`` of ``*`` so it never shows up in ``git status``. Lock files are not deleted after
use, because deleting a lock file while another process waits on it lets two processes hold it.

Replay never writes: marking an entry used only remembers the visit (for stale detection); the test
names are added to the entry's ``tests`` when its file is written anyway. Nor does it fold an append
log a killed recording run left (``fold_logs``): that is the next recording run's to do.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from pytest_slam.golden import appendlog
from pytest_slam.golden.fileformat import (
    REFRESH_HINT,
    EntryCache,
    GoldenError,
    GoldenFile,
    GoldenFileError,
    dump_golden,
    parse_golden,
)
from pytest_slam.golden.journal import LOCK_TIMEOUT_S, Transaction, held, store_locked, transaction
from pytest_slam.golden.keys import canonical_request, request_key
from pytest_slam.golden.lazy import LazyEntries, index_golden
from pytest_slam.golden.turns import at_place, merged_turns, with_turn
from pytest_slam.records import GoldenRecord
from pytest_slam.util.files import (
    WriteFailed,
    atomic_write,
    ignore_scratch_folder,
    scratch_folder,
    writing,
)

if TYPE_CHECKING:
    from filelock import BaseFileLock


def golden_reference(reference: str) -> str:
    """The name goldens are kept under: an endpoint spec ``http://HOST:PORT/v1#MODEL`` is ``MODEL``.

    The address says where the reference is served (a port that changes from run to run), not
    which model answered; keeping it in the name would lose every golden answer when it moves.
    """
    url, sep, model = reference.partition("#")
    if sep and model and url.startswith(("http://", "https://")):
        return model
    return reference


def reference_slug(reference: str) -> str:
    """Folder name for a reference: ``openai:gpt-4`` -> ``openai-gpt-4`` (lower case, portable)."""
    slug = re.sub(r"[^a-z0-9._]+", "-", reference.lower()).strip("-.")
    if not slug:
        raise ValueError(f"reference {reference!r} has no usable name; use e.g. 'openai:gpt-4'")
    return slug


@functools.lru_cache(maxsize=1024)
def module_relpath(module: str) -> PurePosixPath:
    """``tests/test_triage.py`` -> ``tests/test_triage.json``; must be relative, without ``..``."""
    rel = PurePosixPath(str(module).replace("\\", "/"))
    if not rel.parts or rel.is_absolute() or ".." in rel.parts or str(rel) == ".":
        raise ValueError(
            f"golden module {module!r} must be a test file path relative to the rootdir, "
            "e.g. 'tests/test_triage.py'"
        )
    return rel.with_suffix(".json") if rel.suffix == ".py" else rel.with_name(rel.name + ".json")


TEST_MODULE_HINT = "the test file relative to the project root, e.g. 'tests/test_triage.py'"


def is_test_module(module: object) -> bool:
    """Whether ``module`` names a ``.py`` file inside the project, as pytest's node ids do.

    Checked where a person or a file names a module (``--module``, the stale report, the trash):
    anything else would make a golden file that no test reads, or one outside the store.
    """
    if not isinstance(module, str) or not module.strip():
        return False
    rel = PurePosixPath(module.replace("\\", "/"))
    inside = bool(rel.parts) and not rel.is_absolute() and ".." not in rel.parts
    return inside and rel.suffix == ".py" and ":" not in rel.parts[0]  # not C:/tests/test_x.py


@functools.lru_cache(maxsize=1024)
def normalize_module(module: str) -> str:
    """The one spelling of a module used as a dictionary key (posix, relative)."""
    module_relpath(module)
    return str(PurePosixPath(str(module).replace("\\", "/")))


def _declared_reference(path: Path) -> str | None:
    """The ``reference`` a golden file says it holds, or None when it cannot be read."""
    try:
        reference = json.loads(path.read_text(encoding="utf-8")).get("reference")
    except (OSError, ValueError, AttributeError):
        return None
    return reference if isinstance(reference, str) else None


class GoldenStore:
    """The reference's answers for every test module, loaded lazily and written in one place."""

    def __init__(
        self,
        root: Path,
        reference: str,
        *,
        lock_dir: Path | None = None,
        write_through: bool = False,
    ) -> None:
        self.root = Path(root)
        self.reference = golden_reference(reference)
        self.dir = self.root / reference_slug(self.reference)
        self.lock_dir = Path(lock_dir) if lock_dir else scratch_folder(self.root) / "locks"
        self.write_through = write_through
        self._files: dict[str, GoldenFile | GoldenError] = {}
        self._pending: dict[str, dict[str, GoldenRecord]] = {}
        self._used: dict[str, dict[str, set[str]]] = {}
        self._places: dict[str, dict[str, dict[str, list[int]]]] = {}  # module -> key -> turns
        self._written: set[str] = set()  # modules whose file this store changed
        self._mine: dict[str, tuple[tuple[int, ...], bytes]] = {}  # file signature, text digest
        self._texts: dict[str, EntryCache] = {}  # each written entry's text, reused while unchanged
        self.recovered: list[str] = []  # what recovering a killed store-wide change said
        # A replay writes no golden file: the append log a killed recording run left stays for the
        # next recording run to fold in (after a ``git checkout`` of the file, folding it would
        # rewrite a tracked file behind the user's back); ``notes`` says so.
        self.fold_logs = True
        self.notes: list[str] = []
        # Files ``flush`` could not write (a full disk, a read-only folder): their answers stay in
        # the append log or are lost with this process, and the run says it is incomplete.
        self.unwritten: list[WriteFailed] = []

    def path_for(self, module: str) -> Path:
        return self.dir / module_relpath(module)

    def log_path(self, module: str) -> Path:
        """The module's append log, in the scratch folder beside its lock (never committed)."""
        rel = module_relpath(module)
        return self.lock_dir.parent / "appendlog" / self.dir.name / rel.with_suffix(".jsonl")

    def modules(self) -> list[str]:
        """Modules that have a golden file for this reference (to spot files of deleted tests)."""
        if not self.dir.is_dir():
            return []
        files = self.dir.rglob("*.json")
        return sorted(p.relative_to(self.dir).with_suffix(".py").as_posix() for p in files)

    def other_references(self, module: str) -> list[tuple[str, Path]]:
        """Golden files of ``module`` recorded for other references: ``(reference, path)``.

        Asked only after a miss, to say "these answers came from another reference" instead of
        a plain "not recorded" when someone changed the configured reference.
        """
        if not self.root.is_dir():
            return []
        rel = module_relpath(module)
        found = []
        for folder in sorted(p for p in self.root.iterdir() if p.is_dir() and p != self.dir):
            path = folder / rel
            if path.is_file():
                found.append((_declared_reference(path) or folder.name, path))
        return found

    # -- reading ---------------------------------------------------------------------------

    def load(self, module: str) -> GoldenFile:
        """The module's golden file, indexed once and its entries parsed as they are read
        (``golden.lazy``); a broken file raises for this module only."""
        module = normalize_module(module)
        if module not in self._files:
            log = self.log_path(module)
            if appendlog.pending(log):  # left by a killed run, or another worker's
                if self.fold_logs:
                    self._update(module, lambda current: current)
                else:
                    self.notes.append(
                        f"{self.path_for(module)}: answers a killed recording run left in {log} "
                        "were not read (a replay writes no golden file); record with "
                        "--slm-record=new to fold them in"
                    )
            try:
                self._files[module] = index_golden(self.path_for(module), self.reference)
            except GoldenError as exc:
                self._files[module] = exc
        cached = self._files[module]
        if isinstance(cached, GoldenError):
            raise cached
        return cached

    def release(self) -> None:
        """Let go of what the lazy files keep read (``LazyEntries.release``): at the end of a
        run, whose report then builds every outcome at once (issue 53)."""
        for cached in self._files.values():
            if isinstance(cached, GoldenFile) and isinstance(cached.entries, LazyEntries):
                cached.entries.release()

    def lookup(self, module: str, key: str) -> GoldenRecord | None:
        """The record for a request key: recorded this run first, then the file."""
        module = normalize_module(module)
        pending = self._pending.get(module, {})
        if key in pending:
            return pending[key]
        try:
            return self.load(module).entries.get(key)
        except GoldenError as exc:  # an entry found broken when read: the module stays broken
            self._files[module] = exc
            raise

    def at_place(self, module: str, test: str, turn: int) -> list[GoldenRecord]:
        """The records asked at call ``turn`` of ``test`` (recorded this run, then the file).

        Asked only when a request has no exact entry: it reads every entry of the module's file.
        """
        module = normalize_module(module)
        pending = self._pending.get(module, {})
        entries = self.load(module).entries
        found = [rec for key, rec in entries.items() if key not in pending]
        return at_place([*pending.values(), *found], test, turn)

    # -- recording -------------------------------------------------------------------------

    def record(self, module: str, rec: GoldenRecord, test: str = "") -> None:
        """Keep a fresh record (replacing any answers kept for its key): buffered until ``flush``,
        or on disk before this returns when the store writes through.

        ``rec.request`` is stored canonical; ``rec.key`` may be empty and is then computed, but a
        key that does not match the request is a bug in the caller and raises ``ValueError``.
        A write that fails (``GoldenError``, or ``WriteFailed``: a full disk) leaves the record
        buffered for ``flush`` to retry; the call that paid for it goes on.
        """
        module = normalize_module(module)
        request = canonical_request(rec.request)
        key = request_key(request)
        if rec.key and rec.key != key:
            raise ValueError(f"record key {rec.key!r} is not the request's key {key!r}")
        old = self._pending.get(module, {}).get(key)
        tests = set(rec.tests) | set(old.tests if old else ()) | ({test} if test else set())
        turns = merged_turns(rec.turns, old.turns if old else {})
        rec = dataclasses.replace(rec, key=key, request=request, tests=sorted(tests), turns=turns)
        self._pending.setdefault(module, {})[key] = rec
        self.mark_used(module, key, test)
        if not self.write_through:
            return
        try:
            logged = self._txn() is None and self._append(module, rec)
            if not logged:  # inside a transaction, every write is staged
                self.save(module)
        except WriteFailed:
            pass  # kept buffered: ``flush`` writes it, or says which file it could not

    def _append(self, module: str, rec: GoldenRecord) -> bool:
        """Log one record under the module's lock; False when the golden file is due a rewrite."""
        with self._locked(module):
            size = appendlog.append(self.log_path(module), rec)
        return not appendlog.due(size, self.path_for(module))

    def mark_used(self, module: str, key: str, test: str, turn: int | None = None) -> None:
        """Remember that ``test`` visited ``key`` this run, as its call ``turn`` (for stale entries,
        and the place a file written anyway gets; never writes)."""
        module = normalize_module(module)
        tests = self._used.setdefault(module, {}).setdefault(key, set())
        if test:
            tests.add(test)
        places = self._places.setdefault(module, {})
        places[key] = with_turn(places.get(key, {}), test, turn)

    @property
    def visited(self) -> dict[str, set[str]]:
        """Keys visited this run by module: what ``stale`` needs from a single process."""
        return {m: set(keys) for m, keys in self._used.items()}

    # -- writing ---------------------------------------------------------------------------

    def _lock(self, module: str) -> BaseFileLock:
        from filelock import FileLock  # light, but only writers need it

        lock_path = self.lock_dir / self.dir.name / module_relpath(module)
        lock_path = lock_path.with_name(lock_path.name + ".lock")
        with writing(lock_path):
            lock_path.parent.mkdir(parents=True, exist_ok=True)
        ignore_scratch_folder(self.lock_dir.parent)
        return FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S)

    def _merged(self, module: str, current: GoldenFile) -> GoldenFile:
        entries = dict(current.entries)
        used = self._used.get(module, {})
        _fold(entries, self._pending.get(module, {}).values())
        for key, tests in used.items():
            if key in entries and not tests <= set(entries[key].tests):
                rec = entries[key]
                entries[key] = dataclasses.replace(rec, tests=sorted(tests | set(rec.tests)))
        for key, turns in self._places.get(module, {}).items():
            visited = entries.get(key)
            if visited is not None and merged_turns(visited.turns, turns) != visited.turns:
                entries[key] = dataclasses.replace(
                    visited, turns=merged_turns(visited.turns, turns)
                )
        return dataclasses.replace(current, reference=self.reference, entries=entries)

    def _read_locked(self, module: str, path: Path) -> tuple[GoldenFile, bytes | None]:
        """The file as it is now (the caller holds its lock), and the digest of its text.

        When the file is still the one this store wrote last, the copy in memory is used as is;
        inside a transaction, a file it staged already is read as staged.
        """
        txn = self._txn()
        staged, text = txn.staged_text(path) if txn is not None else (False, None)
        if staged:
            if text is None:
                return GoldenFile(path=path, reference=self.reference), None
            return parse_golden(path, text, self.reference), _digest(text)
        try:
            sig = _signature(path)
        except FileNotFoundError:
            return GoldenFile(path=path, reference=self.reference), None
        cached = self._files.get(module)
        mine = self._mine.get(module)
        if mine is not None and mine[0] == sig and isinstance(cached, GoldenFile):
            return cached, mine[1]
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise GoldenFileError(
                path, None, f"not UTF-8 text ({exc.reason})", REFRESH_HINT
            ) from None
        return parse_golden(path, text, self.reference), _digest(text)

    def _write(self, module: str, golden: GoldenFile, digest: bytes | None) -> bool:
        """Write if the text changed; a file left with no entries is removed (a symlinked one is
        written empty through its link: the link stays, as for any write)."""
        path = golden.path
        self._mine.pop(module, None)
        txn = self._txn()
        if not golden.entries and not path.is_symlink():
            existed = digest is not None
            if txn is not None:
                txn.stage(path, None)
            else:
                path.unlink(missing_ok=True)
            return existed
        text = dump_golden(golden, self._texts.setdefault(module, {}))
        new_digest = _digest(text)
        if txn is not None:  # written at commit, after the journal
            txn.stage(path, text)
            return new_digest != digest
        if new_digest != digest:
            atomic_write(path, text)
        self._mine[module] = (_signature(path), new_digest)
        return new_digest != digest

    def _txn(self) -> Transaction | None:
        """The store-wide change this thread is inside, when it is one of this store's root."""
        txn = held()
        return txn if txn is not None and txn.root == self.root else None

    @contextlib.contextmanager
    def transaction(self, what: str) -> Iterator[Transaction]:
        """Hold the store lock across a store-wide change (``golden.journal``): every write of any
        store of this root inside it is staged, then journalled and committed at the end."""
        with transaction(self.root, self.lock_dir, what) as txn:
            if txn.recovered and txn.recovered not in self.recovered:
                self.recovered.append(txn.recovered)
            yield txn

    @contextlib.contextmanager
    def _locked(self, module: str) -> Iterator[None]:
        """Hold the store lock (recovering a killed store-wide change) and the module's lock."""
        from filelock import Timeout

        lock = self._lock(module)
        try:
            with store_locked(self.root, self.lock_dir) as recovered:
                with writing(lock.lock_file):  # a lock file that cannot be made
                    lock.acquire()
                try:
                    if recovered:
                        self.recovered.append(recovered)
                        self._mine.clear()  # files this store wrote may have been rolled back
                    yield
                finally:
                    lock.release()
        except Timeout:
            raise GoldenError(
                f"{self.path_for(module)}: could not take the lock {lock.lock_file} in "
                f"{LOCK_TIMEOUT_S:.0f}s; another pytest-slam process is writing this file. "
                "Wait for it and run again"
            ) from None

    def _update(self, module: str, change: Callable[[GoldenFile], GoldenFile]) -> bool:
        """Lock the module's file, re-read it with its append log folded in, apply
        ``change(GoldenFile)``, write, empty the log, cache."""
        path, log = self.path_for(module), self.log_path(module)
        with self._locked(module):
            current, digest = self._read_locked(module, path)
            logged = appendlog.read(log, path)
            if logged:  # every worker's answers since the last rewrite, before this store's own
                entries = dict(current.entries)
                _fold(entries, logged)
                current = dataclasses.replace(current, entries=entries)
            golden = change(current)
            written = self._write(module, golden, digest)
            if logged or appendlog.pending(log):
                appendlog.clear(log)  # only once the file holding its records is on disk
        self._files[module] = dataclasses.replace(golden, exists=bool(golden.entries))
        if written:
            self._written.add(module)
        return written

    def save(self, module: str) -> bool:
        """Write one module's buffered records now; returns whether its file changed."""
        module = normalize_module(module)
        changed = self._update(module, lambda cur: self._merged(module, cur))
        self._pending.pop(module, None)
        return changed

    def flush(self) -> list[Path]:
        """Write every module still buffered, and fold the test names of later visits into the
        files this store wrote; returns every file this store changed, in order.

        A broken file is left alone (never overwritten) and reported after the others are written;
        a file that could not be written (``WriteFailed``) is kept in ``unwritten``.
        """
        errors = []
        self.unwritten.clear()
        for module in sorted(set(self._pending) | self._written):
            try:
                self.save(module)
            except GoldenError as exc:
                errors.append(exc)
            except WriteFailed as exc:
                self.unwritten.append(exc)
        if len(errors) == 1:
            raise errors[0]
        if errors:
            lines = "\n".join(map(str, errors))
            raise GoldenError(f"several golden files could not be written:\n{lines}")
        return [self.path_for(m) for m in sorted(self._written)]

    # -- stale entries ---------------------------------------------------------------------

    def stale(
        self, visited: dict[str, set[str]], covered_modules: set[str], failed_tests: set[str]
    ) -> list[tuple[str, str]]:
        """Entries of fully run modules that no test visited, as sorted ``(module, key)``.

        An entry is spared when a test in its ``tests`` failed, errored or was skipped this run,
        because that test may have stopped before making its calls. Broken files are skipped:
        their tests already failed with the file's error.
        """
        seen = {normalize_module(m): set(keys) for m, keys in visited.items()}
        out: list[tuple[str, str]] = []
        for module in sorted({normalize_module(m) for m in covered_modules}):
            keep = seen.get(module, set()) | set(self._pending.get(module, {}))
            try:
                entries = self.load(module).entries
                # Only unvisited entries are parsed, and only when a test failed (their `tests`).
                unvisited = [key for key in sorted(entries) if key not in keep]
                if failed_tests:
                    recs = [(key, entries.get(key)) for key in unvisited]
                    unvisited = [k for k, r in recs if r and not set(r.tests) & failed_tests]
            except GoldenFileError:
                continue
            out.extend((module, key) for key in unvisited)
        return out

    def prune(
        self,
        entries: Iterable[tuple[str, str]],
        trash: Callable[[str, list[GoldenRecord]], None] | None = None,
    ) -> int:
        """Remove exactly these entries (each file rewritten once, atomically); returns how many.

        ``trash(module, records)`` is handed what leaves each file, under its lock, before the file
        is rewritten: a prune that keeps its trash can always be undone.
        """
        by_module: dict[str, set[str]] = {}
        for module, key in entries:
            by_module.setdefault(normalize_module(module), set()).add(key)
        removed = 0

        def drop(module: str, golden: GoldenFile, keys: set[str]) -> GoldenFile:
            nonlocal removed
            gone = [rec for key, rec in sorted(golden.entries.items()) if key in keys]
            if gone and trash is not None:
                trash(module, gone)
            removed += len(gone)
            kept = {k: v for k, v in golden.entries.items() if k not in keys}
            return dataclasses.replace(golden, entries=kept)

        with self.transaction("prune"):
            for module, keys in sorted(by_module.items()):
                for key in keys:
                    self._pending.get(module, {}).pop(key, None)
                self._update(module, functools.partial(drop, module, keys=keys))
        return removed

    def put_back(self, module: str, records: list[GoldenRecord]) -> list[str]:
        """Restore pruned records whose key the file no longer has; returns the keys restored."""
        restored: list[str] = []

        def add(golden: GoldenFile) -> GoldenFile:
            entries = dict(golden.entries)
            for rec in records:
                if rec.key not in entries:
                    entries[rec.key] = rec
                    restored.append(rec.key)
            return dataclasses.replace(golden, entries=entries)

        with self.transaction("restore"):
            self._update(normalize_module(module), add)
        return restored

    def put_exact(self, module: str, records: Iterable[GoldenRecord]) -> None:
        """Set these entries to exactly these records (no merging of tests, turns or verdicts):
        what an exact undo writes."""

        def put(golden: GoldenFile) -> GoldenFile:
            entries = dict(golden.entries)
            entries.update((rec.key, rec) for rec in records)
            return dataclasses.replace(golden, entries=entries)

        self._update(normalize_module(module), put)


def _fold(entries: dict[str, GoldenRecord], records: Iterable[GoldenRecord]) -> None:
    """Fold fresh records into a file's entries: each replaces its key's answers, keeping the
    test names, places and (for the same answers) the verdicts already there."""
    for rec in records:
        old = entries.get(rec.key)
        tests = set(rec.tests) | set(old.tests if old else ())
        judge = rec.judge
        if old is not None and old.answers == rec.answers:
            # Workers judging the same answers each add their verdicts; none may be lost.
            judge = {**old.judge, **rec.judge}
        turns = merged_turns(rec.turns, old.turns if old else {})
        entries[rec.key] = dataclasses.replace(rec, tests=sorted(tests), judge=judge, turns=turns)


def _signature(path: Path) -> tuple[int, ...]:
    """What changes whenever a file is replaced or rewritten (``os.replace`` makes a new inode)."""
    st = os.stat(path)
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()
