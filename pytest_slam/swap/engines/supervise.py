"""Run one engine command and make sure it dies with its owner.

Run as ``python -m pytest_slam.swap.engines.supervise``.

pytest can be killed with SIGKILL, which runs no cleanup. This small process sits between pytest and the
engine: the kernel sends it SIGTERM when its parent dies (PR_SET_PDEATHSIG), it also polls the owner's pid,
and either way it kills the engine's whole process group.

The supervisor stays in pytest's process group, so a SIGKILL of that group (a CI cancel, ``timeout -s
KILL``) kills it too; the engine runs in a session of its own (a Ctrl-C in the terminal must not cut a
request in flight: pytest stops it in order) and is armed with a parent-death signal against this
supervisor before it execs, so it cannot outlive it. Ctrl-C is ignored here for the same reason: the
owner decides when the engine stops. It must not import the rest of pytest_slam.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
GRACE_S = 5.0
SUPERVISOR_ENV = "SLAM_SUPERVISOR_PID"  # the engine re-arms its own death signal against this pid


def die_with_parent(sig: int = signal.SIGTERM) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent exits; False where unsupported."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        return bool(libc.prctl(PR_SET_PDEATHSIG, int(sig)) == 0)
    except (OSError, AttributeError):  # not Linux: the owner poll below still covers it
        return False


def _engine_preexec(supervisor: int) -> None:
    """In the forked engine, before exec: die with the supervisor, even if it is SIGKILLed.

    SIGTERM lets an engine with children of its own (vLLM) take them down; the check after arming
    closes the race where the supervisor died between the fork and the prctl.
    """
    die_with_parent(signal.SIGTERM)
    if os.getppid() != supervisor:
        os._exit(3)


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
    die_with_parent()
    if os.getppid() != owner:  # the owner died before PDEATHSIG was armed
        return 3
    me = os.getpid()
    child = subprocess.Popen(
        argv[3:],
        start_new_session=True,
        preexec_fn=lambda: _engine_preexec(me),  # the supervisor has one thread
        env={**os.environ, SUPERVISOR_ENV: str(me)},
    )
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C: pytest stops the engine in order
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    while child.poll() is None:
        if stopping or not _alive(owner) or os.getppid() != owner:
            return _stop(child)
        time.sleep(0.2)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
