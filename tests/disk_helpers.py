"""A full disk and a read-only folder, as a subprocess meets them, for the write-site tests.

A full disk is a file-size limit (``RLIMIT_FSIZE``) set in the child before it runs, with
``SIGXFSZ`` ignored: every write past the limit then fails with ``[Errno 27] File too large``, as
root too, which permission bits cannot do (root writes through them). A read-only folder is a
read-only bind mount of it in a private mount namespace (``unshare``): ``[Errno 30] Read-only
file system``, root included; a machine without user namespaces skips those tests, saying why.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from patience import patient

SLAM = (sys.executable, "-m", "pytest_slam.cli")
PYTEST = (sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly")
# How each failed write ends its one line (util/files.py WriteFailed)
TOO_LARGE = (
    "[Errno 27] File too large; free space or raise the file-size limit (ulimit -f) and run "
    "again: nothing was changed"
)
READ_ONLY_FS = (
    "[Errno 30] Read-only file system; make that folder writable (the file system is read-only) "
    "and run again: nothing was changed"
)
# A 1 KiB limit: pytest and Python write nothing that large (their .pyc writes fail silently),
# while a golden file, a report or a journal is larger.
SMALL = 1024


def _limited(limit: int) -> Callable[[], None]:
    def before_exec() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit: EFBIG, not death
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return before_exec


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}


def run_full(
    argv: Sequence[str], cwd: Path, limit: int = SMALL, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``argv`` run in ``cwd`` as on a full disk: no file may grow past ``limit`` bytes."""
    return subprocess.run(
        list(argv), cwd=cwd, env=_env(), capture_output=True, text=True, timeout=patient(timeout),
        preexec_fn=_limited(limit),
    )  # fmt: skip


def start_full(argv: Sequence[str], cwd: Path, limit: int = SMALL) -> subprocess.Popen[str]:
    """``argv`` started (a server) in ``cwd`` as on a full disk; its stdout and stderr are pipes."""
    return subprocess.Popen(
        list(argv), cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, preexec_fn=_limited(limit),
    )  # fmt: skip


def _read_only_argv(argv: Sequence[str], folders: Sequence[Path]) -> list[str]:
    """``argv`` behind a private mount namespace where each of ``folders`` is read-only; the shell
    execs it, so the process started is ``argv``'s own (a signal sent to it reaches it)."""
    mounts = " && ".join(
        f"mount --bind '{f}' '{f}' && mount -o remount,ro,bind '{f}' '{f}'" for f in folders
    )
    return ["unshare", "-rm", "sh", "-c", f'{mounts} && exec "$@"', "sh", *argv]


def run_read_only(
    argv: Sequence[str], cwd: Path, folders: Sequence[Path], timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``argv`` run in ``cwd`` while each of ``folders`` (which must exist) is mounted read-only."""
    return subprocess.run(
        _read_only_argv(argv, folders), cwd=cwd, env=_env(), capture_output=True, text=True,
        timeout=patient(timeout),
    )  # fmt: skip


def start_read_only(
    argv: Sequence[str], cwd: Path, folders: Sequence[Path]
) -> subprocess.Popen[str]:
    """``argv`` started (a server) in ``cwd`` while each of ``folders`` is mounted read-only."""
    return subprocess.Popen(
        _read_only_argv(argv, folders), cwd=cwd, env=_env(), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _can_bind_read_only() -> bool:
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        done = run_read_only(["true"], Path(folder), [Path(folder)], timeout=patient(30))
        return done.returncode == 0


READ_ONLY = _can_bind_read_only()
needs_read_only_mount = pytest.mark.skipif(
    not READ_ONLY, reason="no user namespaces here (unshare -rm): a read-only folder cannot be made"
)


def files_under(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative path: what a failed write must leave as it was."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def no_traceback(result: subprocess.CompletedProcess[str]) -> None:
    out = result.stdout + result.stderr
    assert "Traceback" not in out and "OSError" not in out, out[-4000:]
