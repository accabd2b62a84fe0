"""Code from outside pytest_slam (an engine provider or a scorer another distribution declares):
whose it is, and its fault in one line.

Such code may raise anything, when imported, built or called. Then the user reads who wrote it and
what to do, not pytest-slam's internals: ``Origin`` names the distribution and the entry point (or
the import path), ``fault`` the exception and the line of the outside code that raised it. The
engine registry and the scorer lookup both fence what they load with these.
"""

from __future__ import annotations

import importlib.metadata
import queue
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

_MESSAGE = 160  # characters of an exception's own message kept in the one line
# What outside code may raise that is its fault, to report in one line: any exception, and
# ``SystemExit`` (a library calling ``sys.exit``), which would otherwise end the whole run. Only a
# user's Ctrl-C (KeyboardInterrupt) passes through the fence.
FAULTS: tuple[type[BaseException], ...] = (Exception, SystemExit)


@dataclass(frozen=True)
class Origin:
    """Where a name the user wrote was found outside pytest_slam."""

    group: str  # the entry point group (pytest_slam.engines, pytest_slam.scorers)
    name: str  # what the user wrote
    target: str  # module:attr
    entry_point: bool  # found as an entry point (else: an import path)
    distribution: str | None  # "acme-scorers 1.0"; None: not an installed distribution's

    def describe(self) -> str:
        where = (
            f"entry point {self.name} = {self.target} (group {self.group})"
            if self.entry_point
            else f"import path {self.target}"
        )
        of = (
            f"distribution {self.distribution}"
            if self.distribution
            else "no installed distribution"
        )
        return f"{where}, of {of}"

    def fix(self, otherwise: str) -> str:
        """What to do: the distribution's to mend (or upgrade), unless the user picks another."""
        if self.distribution:
            project = self.distribution.split()[0]
            return f"fix or upgrade {project} (pip install -U {project}), or {otherwise}"
        return f"fix {self.target.partition(':')[0]}, or {otherwise}"


def origin_of(group: str, name: str, entry: EntryPoint | None) -> Origin:
    """The origin of ``name``: the entry point ``entry`` when found as one, else an import path."""
    if entry is not None:
        dist = getattr(entry, "dist", None)
        shown = f"{dist.name} {dist.version}" if dist is not None else _distribution(entry.module)
        return Origin(group, name, entry.value, True, shown)
    return Origin(group, name, name, False, _distribution(name.partition(":")[0]))


def _distribution(module: str) -> str | None:
    """The installed distribution that ships ``module``'s top-level package, if any."""
    top = module.split(".", 1)[0]
    try:
        names = importlib.metadata.packages_distributions().get(top) or []
        return " ".join([names[0], importlib.metadata.version(names[0])]) if names else None
    except Exception:  # broken metadata of some other distribution: the name is not worth a crash
        return None


def fault(exc: BaseException) -> str:
    """``RuntimeError: the message (at acme/x.py:12)``: the exception, and the last line of code
    that raised it."""
    message = " ".join(str(exc).split())
    if isinstance(exc, SystemExit):
        message = f"sys.exit({exc.code!r}) called"
    if len(message) > _MESSAGE:
        message = message[: _MESSAGE - 3] + "..."
    frames = traceback.extract_tb(exc.__traceback__)
    at = (
        f" (at {'/'.join(Path(frames[-1].filename).parts[-2:])}:{frames[-1].lineno})"
        if frames
        else ""
    )
    return f"{type(exc).__name__}{': ' + message if message else ''}{at}"


class CallThread:
    """One daemon thread that runs outside code's calls in turn, under a deadline: the same thread
    every time (a scorer may keep thread-bound state, a connection or a cache), one that lives as
    long as the process (an engine's process is bound to the thread that started it:
    PR_SET_PDEATHSIG), and one that never holds up the interpreter's exit when a call hangs (an
    executor's threads are joined at exit)."""

    def __init__(self, name: str) -> None:
        self._tasks: queue.SimpleQueue[tuple[Callable[[], Any], list[Any], threading.Event]]
        self._tasks = queue.SimpleQueue()
        threading.Thread(target=self._loop, name=name, daemon=True).start()

    def run(self, call: Callable[[], Any], timeout_s: float) -> Any:
        """What ``call`` returned, or None when it was still running after ``timeout_s``."""
        box: list[Any] = []
        done = threading.Event()
        self._tasks.put((call, box, done))
        return box[0] if done.wait(timeout_s) else None

    def _loop(self) -> None:
        while True:
            call, box, done = self._tasks.get()
            box.append(call())
            done.set()
