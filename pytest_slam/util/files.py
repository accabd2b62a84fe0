"""Files written whole or not at all: the one atomic writer, and the scratch folder's ignore file.

Below every wing (beside ``textcodec``), so that a cache in ``compare`` writes as the golden store
does, with no copy of the temp-file-and-rename dance.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


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

    A symlink is written through: its target is replaced and the link kept (``os.replace`` on the
    link itself would swap it for a regular file, silently cutting it from what it points at).
    """
    path = Path(path)
    if path.is_symlink():  # the whole chain, relative links included; no folder made through one
        path = Path(os.path.realpath(path))
    else:
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
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8", newline="\n") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())
        return os.fstat(handle.fileno()).st_size


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
