"""Files written whole or not at all: the one atomic writer, and the scratch folder's ignore file.

Below every wing (beside ``textcodec``), so that a cache in ``compare`` writes as the golden store
does, with no copy of the temp-file-and-rename dance.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pytest_slam.errors import SlamError

# errno -> what the user does about it; anything else: the generic fix
_FIXES = {
    errno.ENOSPC: "free space and run again",
    errno.EDQUOT: "free space (the disk quota is full) and run again",
    errno.EFBIG: "free space or raise the file-size limit (ulimit -f) and run again",
    errno.EROFS: "make that folder writable (the file system is read-only) and run again",
    errno.EACCES: "make that folder writable and run again",
    errno.EPERM: "make that folder writable and run again",
}


class WriteFailed(OSError, SlamError, kind="write"):
    """A file that could not be written whole (a full disk, a file-size limit, a read-only folder).

    Raised by every writer here (``atomic_write``, ``append_line``, ``writing``) in place of the
    bare ``OSError``, so each layer catches one type at its boundary and says one line: the file,
    the error and the fix. The previous file is intact (the writers never change it in place), so
    the line ends "nothing was changed" and the next run, with space, simply writes it. Still an
    ``OSError`` (same ``errno``): code that caught that before catches this.
    """

    def __init__(self, path: str | os.PathLike[str], cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause))
        self.path = Path(path)

    @property
    def known(self) -> bool:
        """A full disk, a file-size limit or a read-only folder: an error whose fix this line
        says (a caller with a better fix for anything else, a path that is no folder, says its)."""
        return (self.errno or 0) in _FIXES

    def __str__(self) -> str:
        fix = _FIXES.get(self.errno or 0, "fix that and run again")
        return (
            f"could not write {shown(self.path)}: [Errno {self.errno}] {self.strerror}; "
            f"{fix}: nothing was changed"
        )

    def __reduce__(self) -> tuple[object, ...]:  # crosses to an xdist controller intact
        return (_rebuilt, (str(self.path), self.errno, self.strerror))


def _rebuilt(path: str, code: int | None, strerror: str | None) -> WriteFailed:
    return WriteFailed(path, OSError(code, strerror))


def shown(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it (as a user typed it)."""
    try:
        return Path(os.path.abspath(path)).relative_to(Path.cwd()).as_posix()
    except ValueError:
        return str(path)


@contextmanager
def writing(path: str | os.PathLike[str]) -> Iterator[None]:
    """Any ``OSError`` inside is ``WriteFailed`` naming ``path``: for a write that is not one of
    the writers here (a lock file, a folder made, a rename)."""
    try:
        yield
    except (WriteFailed, TimeoutError):  # a lock not taken in time (filelock) is no failed write
        raise
    except OSError as exc:
        raise WriteFailed(path, exc) from exc


def current_umask() -> int:
    """The process umask, read without changing it where Linux allows (threads may be creating files)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(
    path: str | os.PathLike[str], text: str | Iterable[str], *, durable: bool = True
) -> Path:
    """Write a temp file in the same folder, then ``os.replace``: readers never see half a file.

    The package's one writer of files people keep (goldens, reports, the stale list). The file gets
    the mode it had, or the one ``open()`` would give it (0o666 less the umask): ``mkstemp`` makes
    0600, which a CI artifact or a shared checkout cannot read. Returns the path written.
    ``text`` may come in pieces (a merged report's outcomes, line by line): never all held at once.
    ``durable=False`` skips the fsync: for a cache, whose lost entry is only recomputed.
    A write that fails (a full disk, a read-only folder) raises ``WriteFailed``; the file is as
    it was and no temp file is left.

    A symlink is written through: its target is replaced and the link kept (``os.replace`` on the
    link itself would swap it for a regular file, silently cutting it from what it points at).
    """
    path = Path(path)
    if path.is_symlink():  # the whole chain, relative links included; no folder made through one
        path = Path(os.path.realpath(path))
    with writing(path):
        return _replaced(path, text, durable)


def _replaced(path: Path, text: str | Iterable[str], durable: bool) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o666 & ~current_umask()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            if isinstance(text, str):
                handle.write(text)
            else:
                handle.writelines(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def append_line(path: str | os.PathLike[str], line: str) -> int:
    """Append one line (no newline inside) and fsync it; returns the file's size after.

    The package's one appender: a line is on disk before this returns, and a kill mid-write
    leaves at most a torn last line, which a reader of the file skips (``golden/appendlog.py``).
    """
    return append_text(path, line + "\n")


def append_text(path: str | os.PathLike[str], text: str) -> int:
    """Append ``text`` whole or not at all, fsynced; returns the file's size after.

    A write that fails (a full disk) is cut off again, so the file is as it was (the next line
    starts on a line of its own), and raises ``WriteFailed``.
    """
    path = Path(path)
    with writing(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            size = os.fstat(fd).st_size
            try:
                data = memoryview(text.encode("utf-8"))
                while data:
                    data = data[os.write(fd, data) :]
                os.fsync(fd)
            except OSError:
                os.ftruncate(fd, size)  # the file as it was: no torn line under the next one
                raise
            return os.fstat(fd).st_size
        finally:
            os.close(fd)


def remove_files(folder: Path, pattern: str) -> int:
    """Remove the files under ``folder`` that ``pattern`` (a glob) matches; how many were removed.
    For what ``.slam`` keeps to save work (a file another process removed first, or one that
    cannot be removed, is skipped: it is asked again or kept, never a failure)."""
    removed = 0
    for path in sorted(folder.glob(pattern)):
        try:
            path.unlink()
            removed += 1
        except OSError:
            continue
    return removed


def scratch_folder(golden_root: str | os.PathLike[str]) -> Path:
    """pytest-slam's scratch folder (``.slam``, git-ignored) beside the golden folder ``golden_root``:
    locks, the stale list, the trash and the caches, none of them committed."""
    return Path(golden_root).parent / ".slam"


def ignore_scratch_folder(folder: Path) -> None:
    """Give pytest-slam's scratch folder (``.slam``: locks, stale report) a ``.gitignore`` of ``*``,
    so nothing in it ever shows up in ``git status``."""
    ignore = Path(folder) / ".gitignore"
    if Path(folder).name == ".slam" and not ignore.exists():
        atomic_write(ignore, "# created by pytest-slam: scratch files, never committed\n*\n")
