"""Store-wide changes as transactions: one store lock, a journal first, atomic replaces, the journal
removed last (the shape of SQLite's atomic commit).

A promote, an unpromote, a prune or a restore reads many golden files and then rewrites them (and
a baseline folder). Each file's write is atomic, but the change as a whole is not: two such
commands interleaving, or one killed half-way, could leave half the store on other answers. So:

- **One store lock** (``<locks>/store.lock``, a ``filelock.FileLock``) is held from the first read
  to the last write. Every golden write of a recording run takes the same lock (``GoldenStore``),
  so a run's answer waits for a store-wide change and never lands in the middle of one.
  ``slam golden merge`` into the store is such a change too, so a merge never drops a recorded
  answer nor reverts a promote. The git merge driver holds the lock while it reads and writes
  git's temporary copies (a killed change is recovered first); git itself writes the result into
  the golden file after the driver returns, outside any lock of ours, as it does every file of a
  merge: run the merge with no recording run under way.
- Every file the change writes or removes is **staged** in memory (``Transaction.stage``); nothing
  is written while the change reads, so a refused change (a broken file, a bad name) writes nothing.
- At commit, the **journal** ``<locks>/<store folder>.journal`` is written (temp file, fsync,
  rename: it exists whole or not at all) with each file's bytes before the change and a digest of
  its bytes after; then each file is replaced atomically; the journal is removed last.
- A later command (or a recording run's next write) that finds a journal holds the lock, and
  **recovers** before it does anything: if every file already has its new bytes the change had
  finished and is kept (rolled forward: the journal is removed); otherwise every file gets its old
  bytes back (rolled back). Either way it says so in one line. Recovery is itself idempotent, so a
  kill during recovery is recovered by the next command.

So after a kill -9 at any moment the store is the old one or the new one, never a mix.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.records import utc_moment
from pytest_slam.util.files import atomic_write, ignore_scratch_folder, writing

if TYPE_CHECKING:
    from filelock import BaseFileLock

JOURNAL_SCHEMA = "pytest-slam/golden-journal/1"
LOCK_TIMEOUT_S = 120.0
_HELD = threading.local()  # the transaction this thread holds, if any


def store_lock_path(lock_dir: Path) -> Path:
    return Path(lock_dir) / "store.lock"


def journal_path(root: Path, lock_dir: Path) -> Path:
    return Path(lock_dir) / f"{Path(root).name}.journal"


def _digest(text: str | None) -> str | None:
    if text is None:
        return None
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=16).hexdigest()


def _read(path: Path) -> str | None:
    """A file's text, or None when there is none (only files read as UTF-8 are ever staged)."""
    try:
        return path.read_bytes().decode("utf-8", "surrogateescape")
    except (FileNotFoundError, NotADirectoryError):
        return None


def _put(root: Path, path: Path, text: str | None) -> None:
    """Give ``path`` exactly this text (None: no file), atomically; empty folders left are removed."""
    if text is not None:
        atomic_write(path, text)  # golden files and baseline marks: UTF-8, checked when read
        return
    path.unlink(missing_ok=True)
    folder = path.parent
    while folder != root and root in folder.parents:
        try:
            folder.rmdir()
        except OSError:  # not empty, or gone: stop climbing
            break
        folder = folder.parent


def _drop_temp_files(path: Path) -> None:
    """The temp files a write of ``path`` killed before its rename left (``atomic_write``'s
    ``.NAME.*.tmp``); safe under the store lock, where no other writer of the store is running."""
    try:
        for temp in path.parent.glob(f".{path.name}.*.tmp"):
            temp.unlink(missing_ok=True)
    except OSError:
        pass


@dataclass
class Transaction:
    """One store-wide change: the files it will write (``staged``), written at ``commit``."""

    root: Path
    lock_dir: Path
    what: str
    staged: dict[Path, str | None] = field(default_factory=dict)  # path -> new text, None: remove
    recovered: str | None = None  # the line recovery said, when a journal was found

    def staged_text(self, path: Path) -> tuple[bool, str | None]:
        """``(True, text)`` when the change already staged ``path`` (text None: removed)."""
        if path in self.staged:
            return True, self.staged[path]
        return False, None

    def stage(self, path: Path, text: str | None) -> None:
        self.staged[Path(path)] = text

    def commit(self) -> int:
        """Journal, replace, remove the journal; returns how many files changed."""
        changes = []
        for path, after in self.staged.items():
            before = _read(path)
            if before != after:
                changes.append((path, before, after))
        if not changes:
            return 0
        journal = {
            "schema": JOURNAL_SCHEMA,
            "what": self.what,
            "started": f"{utc_moment():%Y-%m-%dT%H:%M:%SZ}",
            "files": [
                {
                    "path": path.relative_to(self.root).as_posix(),
                    "before": before,
                    "after": _digest(after),
                }
                for path, before, after in changes
            ],
        }
        journal_file = journal_path(self.root, self.lock_dir)
        atomic_write(journal_file, json.dumps(journal) + "\n")  # ASCII: surrogates escaped
        try:
            for path, _, after in changes:
                _put(self.root, path, after)
        except OSError:  # a file that cannot be written: every one back as it was, then say why
            recover(self.root, self.lock_dir)
            raise
        journal_file.unlink()
        self.staged.clear()  # committed: the end of the transaction has nothing left to write
        return len(changes)


def recover(root: Path, lock_dir: Path) -> str | None:
    """Finish or undo a change that was killed (the caller holds the store lock): the one line
    that says which, or None when there was nothing to recover."""
    root = Path(root)
    path = journal_path(root, lock_dir)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    fix = (
        f"see what changed with `git status -- {root}`, restore it with `git checkout -- {root}` "
        f"if it is half changed, then delete {path}"
    )
    try:
        journal = json.loads(text)
        what, started = str(journal["what"]), str(journal["started"])
        files = [(root / f["path"], f["before"], f["after"]) for f in journal["files"]]
        if journal["schema"] != JOURNAL_SCHEMA or any(
            root not in p.parents or not isinstance(b, str | None) or not isinstance(a, str | None)
            for p, b, a in files
        ):
            raise ValueError
    except (ValueError, KeyError, TypeError):
        raise GoldenError(
            f"{path}: unreadable journal of a store-wide change. Fix: {fix}"
        ) from None
    for file, _, _ in files:
        _drop_temp_files(file)
    if all(_digest(_read(p)) == after for p, _, after in files):
        how = "it had written every file, so it is kept as done"
    else:
        for file, before, _ in files:
            if _read(file) != before or before is None:  # None: also its folder, if left empty
                _put(root, file, before)
        how = "rolled back: those files are as they were before it"
    path.unlink()
    count = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    article = "an" if what[:1] in "aeiou" else "a"
    return (
        f"slam golden: {article} {what} started {started} did not finish (killed?); {how} ({count})"
    )


RECOVER_COMMAND = "slam golden stats --recover"


def unfinished(root: Path, lock_dir: Path) -> str | None:
    """What a killed store-wide change left (``a promote started ...``), or None: no journal.
    A read of the store meanwhile would see some files changed and others not."""
    path = journal_path(root, lock_dir)
    try:
        journal = json.loads(path.read_text(encoding="utf-8"))
        what, started = str(journal["what"]), str(journal["started"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return f"an unreadable store-wide change ({path})"
    article = "an" if what[:1] in "aeiou" else "a"
    return f"{article} {what} started {started}"


def before_a_run(root: Path, lock_dir: Path, recording: bool) -> str | None:
    """A run never reads a half-changed store: a recording run (which may write) recovers a killed
    change first and returns the line saying so; a replay (which never writes a golden file)
    refuses in one line naming the command that recovers (``GoldenError``)."""
    left = unfinished(root, lock_dir)
    if left is None:
        return None
    if recording:
        with store_locked(root, lock_dir) as recovered:
            return recovered
    raise GoldenError(
        f"{root}: {left} did not finish (killed?), so some golden files hold its answers and "
        f"others do not; a replay never reads a half-changed store. Fix: run `{RECOVER_COMMAND}` "
        "(it keeps the change if it had written every file, else rolls it back), then run again"
    )


def _lock(lock_dir: Path) -> BaseFileLock:
    from filelock import FileLock  # light, but only writers need it

    lock_path = store_lock_path(lock_dir)
    with writing(lock_path):
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    ignore_scratch_folder(lock_path.parent.parent)
    return FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S)


def held() -> Transaction | None:
    """The transaction this thread is inside, if any (its writes are staged, the lock is held)."""
    txn: Transaction | None = getattr(_HELD, "txn", None)
    return txn


@contextlib.contextmanager
def store_locked(
    root: Path, lock_dir: Path, waiting: Callable[[], None] | None = None
) -> Iterator[str | None]:
    """Hold the store lock (recovering a killed change first): what one file's write does.
    Yields the recovery line, if any. Inside a transaction of this thread, the lock is held.
    ``waiting`` is called once when another process holds the lock (a command says it waits)."""
    outer = held()
    if outer is not None and outer.root == Path(root):
        yield None
        return
    from filelock import Timeout

    lock = _lock(lock_dir)
    try:
        with writing(lock.lock_file):  # a lock file that cannot be made: a read-only folder
            if waiting is not None:
                try:
                    lock.acquire(timeout=0)
                except Timeout:
                    waiting()
            if not lock.is_locked:
                lock.acquire()
    except Timeout:
        raise GoldenError(
            f"{root}: could not take the store lock {lock.lock_file} in {LOCK_TIMEOUT_S:.0f}s; "
            "another pytest-slam command is changing the golden store (a promote, unpromote, prune, "
            "restore or recording run). Fix: wait for it and run again"
        ) from None
    try:
        yield recover(root, lock_dir)
    finally:
        lock.release()


@contextlib.contextmanager
def transaction(
    root: Path, lock_dir: Path, what: str, waiting: Callable[[], None] | None = None
) -> Iterator[Transaction]:
    """A store-wide change: lock, recover, stage (the body), then commit; an exception in the body
    writes nothing. Nested in a transaction of this thread, the body joins it."""
    outer = held()
    if outer is not None and outer.root == Path(root):
        yield outer
        return
    with store_locked(root, lock_dir, waiting) as recovered:
        _drop_temp_files(journal_path(root, lock_dir))  # a journal killed while it was written
        txn = Transaction(Path(root), Path(lock_dir), what, recovered=recovered)
        _HELD.txn = txn
        try:
            yield txn
        finally:
            _HELD.txn = None
        txn.commit()
