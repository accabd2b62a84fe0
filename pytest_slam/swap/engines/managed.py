"""A managed engine's process: started under ``engines.supervise``, health-checked, always stopped.

Each engine runs under the supervisor so that it dies with the pytest process that owns it, even
after SIGKILL. The controller (or the only process, without xdist) owns every engine; xdist workers
are handed the URLs and never start one, so ``-n N`` still means one engine per model.
"""

from __future__ import annotations

import errno
import os
import socket
import subprocess
import sys
import time
import urllib.error
from abc import ABC, abstractmethod
from pathlib import Path
from typing import BinaryIO

from pytest_slam.records import ModelSpec
from pytest_slam.swap import upstream
from pytest_slam.swap.engines.protocol import EngineError, Say
from pytest_slam.util.files import WriteFailed

LOG_TAIL_LINES = 20


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def log_unwritten(path: Path) -> WriteFailed | None:
    """Why the engine's log could not hold what the engine wrote, if it could not: the log at the
    file-size limit (``ulimit -f``, inherited by the engine), or no space left on its disk."""
    try:
        import resource

        size, disk = path.stat().st_size, os.statvfs(path.parent)
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        free = disk.f_bfree if os.geteuid() == 0 else disk.f_bavail  # root writes the reserve too
    except (OSError, AttributeError, ImportError):  # no log; no statvfs, rlimit, euid (Windows)
        return None
    code = errno.EFBIG if 0 <= limit <= size else errno.ENOSPC if free == 0 else None
    return None if code is None else WriteFailed(path, OSError(code, os.strerror(code)))


class Engine(ABC):
    """How one kind of server process is launched and health-checked, for one model and port."""

    kind: str = ""

    def __init__(self, spec: ModelSpec, port: int, slots: int = 1) -> None:
        self.spec = spec
        self.port = port
        self.slots = max(1, slots)  # requests the run may send at once (its xdist workers)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def health_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/health"

    @abstractmethod
    def check_available(self) -> None:
        """Raise EngineError when this machine cannot run the engine at all."""

    def start_timeout(self, timeout_s: float) -> float:
        """How long a start may take before it is called failed (``engine_timeout_s``)."""
        return timeout_s

    @abstractmethod
    def command(self) -> list[str]:
        """The argv that serves the model on 127.0.0.1:port."""

    def describe(self) -> str:
        """How it serves, for the run's start line."""
        return self.kind

    def source(self) -> str:
        """Where the model's weights come from, for the run's progress lines."""
        return f"model {self.spec.model_id}"


class ManagedServer:
    """One running engine: its supervisor process, port and log file."""

    def __init__(self, engine: Engine, log_dir: Path) -> None:
        self.engine = engine
        self.log_path = (
            log_dir / f"engine-{engine.spec.name.replace('/', '_').replace(':', '_')}.log"
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_s: float | None = None

    @property
    def base_url(self) -> str:
        return self.engine.base_url

    def start(self, timeout_s: float, say: Say | None = None, beat_s: float = 0.0) -> None:
        """Start it and wait until it is healthy; ``say`` hears where the model comes from, the
        start, every ``beat_s`` seconds of a long start (0: never) and the ready line."""
        self.engine.check_available()
        name, started = self.engine.spec.name, time.perf_counter()
        if say is not None:
            say(f"engine {name}: {self.engine.source()}")
            say(f"engine {name} ({self.engine.describe()}) starting ...")
        argv = [
            sys.executable,
            "-m",
            "pytest_slam.swap.engines.supervise",
            "--owner",
            str(os.getpid()),
            "--",
            *self.engine.command(),
        ]
        t0 = time.perf_counter()
        with self._open_log() as log:
            self.proc = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        try:
            self._wait_healthy(self.engine.start_timeout(timeout_s), say, beat_s)
        except BaseException:  # Ctrl-C while it loads: nobody else holds it to stop it
            self.stop()
            if say is not None:
                say(f"engine {name} did not start ({time.perf_counter() - started:.1f} s)")
            raise
        self.started_s = time.perf_counter() - t0
        if say is not None:
            say(f"engine {name} ready in {self.started_s:.1f} s on {self.engine.base_url}")

    def _open_log(self) -> BinaryIO:
        """The engine's log, for its stdout and stderr; one that cannot be made is the start's
        one line (its file, the error and the fix), not an ``OSError`` out of the run."""
        try:
            return open(self.log_path, "wb")
        except OSError as exc:
            raise EngineError(
                f"{self.engine.kind} engine for model {self.engine.spec.name!r} not started: "
                f"{WriteFailed(self.log_path, exc)}"
            ) from None

    def start_line(self) -> str:
        """One summary line: which engine serves the model, how, where, and how long it took."""
        took = f", up in {self.started_s:.1f} s" if self.started_s is not None else ""
        return (
            f"engine {self.engine.spec.name}: {self.engine.describe()}, "
            f"on {self.engine.base_url}{took}"
        )

    def _wait_healthy(self, timeout_s: float, say: Say | None = None, beat_s: float = 0.0) -> None:
        start = time.monotonic()
        deadline, beat = start + timeout_s, start + beat_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                self._fail(f"exited with code {self.proc.returncode} while starting")
            if _healthy(self.engine.health_url):
                return
            if say is not None and beat_s > 0 and time.monotonic() >= beat:
                beat += beat_s
                say(
                    f"engine {self.engine.spec.name} still starting "
                    f"({time.monotonic() - start:.0f} s; log {self.log_path})"
                )
            time.sleep(0.05)
        self.stop()
        self._fail(f"was not healthy after {timeout_s:.0f} s")

    def _fail(self, what: str) -> None:
        head = (
            f"{self.engine.kind} engine for model {self.engine.spec.name!r} on "
            f"{self.engine.base_url} {what}"
        )
        unwritten = log_unwritten(self.log_path)
        if unwritten is not None:  # a log cut short says nothing of why: its disk does
            raise EngineError(f"{head}: {unwritten}")
        raise EngineError(f"{head}. Last lines of {self.log_path}:\n{log_tail(self.log_path)}")

    def stop(self) -> None:
        """Ask the supervisor to stop the engine; kill it when that takes too long or the user
        presses Ctrl-C again (the engine dies with the supervisor: its parent-death signal)."""
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(15)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()


def _healthy(url: str) -> bool:
    """One readiness poll, on the unpatched connection classes (``upstream.urlopen``): a serial run
    starts its engine inside the first opted-in test, where a product's vcrpy cassette would
    otherwise record the polls (and fail to replay them: the port changes every run)."""
    try:
        with upstream.urlopen(url, timeout=1.0) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False
