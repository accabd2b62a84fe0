"""Run one engine command and make sure it dies with its owner: ``python -m pytest_slam.engines.supervise``.

pytest can be killed with SIGKILL, which runs no cleanup. This small process sits between pytest and the
engine: the kernel sends it SIGTERM when its parent dies (PR_SET_PDEATHSIG), it also polls the owner's pid,
and either way it kills the engine's whole process group. It must not import the rest of pytest_slam.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0


def _die_with_parent() -> None:
    with contextlib.suppress(OSError):  # not Linux: the owner poll below still covers it
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM the engine's process group, then SIGKILL what is left after a grace period."""
    for sig, wait in ((signal.SIGTERM, GRACE_S), (signal.SIGKILL, GRACE_S)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            break
        try:
            return child.wait(wait)
        except subprocess.TimeoutExpired:
            continue
    return child.wait()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[0] != "--owner" or argv[2] != "--":
        print("usage: supervise --owner PID -- COMMAND...", file=sys.stderr)
        return 2
    owner = int(argv[1])
    _die_with_parent()
    if os.getppid() != owner:  # the owner died before PDEATHSIG was armed
        return 3
    child = subprocess.Popen(argv[3:], start_new_session=True)
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while child.poll() is None:
        if stopping or not _alive(owner) or os.getppid() != owner:
            return _stop(child)
        time.sleep(0.2)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
