"""What a run says while it works: its engines' start, and a heartbeat of each long model call.

pytest's dots say nothing while an engine loads or a model call runs for minutes. These lines go
through the terminal reporter's ``write_line`` (capture suspended around it, as pytest's live
logging does), prefixed ``pytest-slam:``, never with ``-q``. The heartbeat is a daemon thread that
looks at the calls in flight (``chat.IN_FLIGHT``) and names each one running longer than the
interval (``--slm-heartbeat`` / ini ``slm_heartbeat``, seconds; 0 turns it off), again every
interval: model, role, test, tokens so far and time.

Under xdist the controller speaks for its workers. A worker's calls run while its test runs, and
xdist has no live channel from a worker's test to the controller (its events are fixed: reports,
warnings, scheduling), so the controller listens on a loopback UDP socket whose address and secret
it hands each worker in ``workerinput``; a worker sends its lines there and never writes to a
terminal itself. The controller prints them with the worker's id. Any local user can send to that
port: each datagram is sealed with the secret and checked before anything in it is read, and what
is printed has its control characters escaped (``datagram.py``); nothing a datagram holds stops
the listener.
"""

from __future__ import annotations

import argparse
import contextlib
import secrets
import socket
import threading
import time
from typing import TypedDict

import pytest

from pytest_slam.run import options
from pytest_slam.run.datagram import MAX_BYTES, Opener, seal
from pytest_slam.swap.chat import IN_FLIGHT, InFlight

HEARTBEAT_S = 10.0
INI = "slm_heartbeat"
WORKER_KEY = "slam_progress"  # this module's entry in an xdist worker's ``workerinput``


class Channel(TypedDict):
    """Where a worker sends its lines (plain data: xdist ships it)."""

    port: int
    secret: str


def interval(config: pytest.Config) -> float:
    """``--slm-heartbeat``, else the ini's ``slm_heartbeat``, else ``HEARTBEAT_S``."""
    given: float | None = getattr(config.option, "slm_heartbeat", None)
    if given is not None:
        return given
    ini = str(config.getini(INI) or "").strip()
    if not ini:
        return HEARTBEAT_S
    try:
        return options.seconds(ini)
    except argparse.ArgumentTypeError as exc:
        raise pytest.UsageError(
            f"pytest-slam: ini option {INI}: {exc}; 0 turns the heartbeat off"
        ) from None


class Progress:
    """The run's progress lines in one process (serial, xdist controller or worker)."""

    def __init__(self, config: pytest.Config, role: str) -> None:
        self.config = config
        self.role = role
        self.interval_s = interval(config)
        self.quiet = int(config.option.verbose) < 0
        self.test: str | None = None  # the test running in this process, for heartbeat lines
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beats: dict[InFlight, float] = {}  # when each long call is next named
        self._socket: socket.socket | None = None
        self._secret = secrets.token_hex(16)
        self._to: tuple[str, int] | None = None  # a worker's controller

    # -- lines --------------------------------------------------------------------------------

    def say(self, text: str) -> None:
        """One line, now: on the terminal, or (xdist worker) to the controller."""
        if self.quiet:
            return
        if self.role == "worker":
            self._send(text)
        else:
            self._write(f"pytest-slam: {text}")

    def _write(self, line: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        suspended = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
        with self._lock, suspended:
            if self.config.get_terminal_writer().width_of_current_line:
                terminal.write("\n")  # after xdist's dots, which leave no file name to end
            terminal.write_line(line)
            terminal.flush()  # a pipe (CI) would hold it back until the buffer fills

    def _send(self, text: str) -> None:
        if self._socket is None or self._to is None:
            return
        worker = str(getattr(self.config, "workerinput", {}).get("workerid", "worker"))
        with contextlib.suppress(OSError):  # a lost heartbeat is no reason to fail a test
            self._socket.sendto(seal(self._secret, worker, text), self._to)

    # -- the xdist channel --------------------------------------------------------------------

    def channel(self) -> Channel | None:
        """The controller's end, opened on first use: what each worker is handed."""
        if self.quiet or self.role != "controller":
            return None
        if self._socket is None:
            self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._socket.bind(("127.0.0.1", 0))
            self._socket.settimeout(0.2)  # to see ``close``: a blocked recv would not
            threading.Thread(target=self._listen, name="slam-progress", daemon=True).start()
        return {"port": self._socket.getsockname()[1], "secret": self._secret}

    def _listen(self) -> None:
        sock, opener = self._socket, Opener(self._secret)
        while sock is not None and not self._stop.is_set():
            try:
                data = sock.recv(MAX_BYTES + 1)  # a longer one is cut to this, and refused
            except TimeoutError:
                continue
            except OSError:  # closed at the end of the run
                return
            line = opener.open(data)  # None: not a fresh line of this run's workers
            if line is not None:
                with contextlib.suppress(Exception):  # a line that cannot be shown is dropped
                    self._write(f"pytest-slam: [{line[0]}] {line[1]}")

    def connect(self, channel: Channel | None) -> None:
        """A worker: send lines to the controller's ``channel`` (none: say nothing)."""
        if channel is None or self.quiet:
            return
        self._secret = channel["secret"]
        self._to = ("127.0.0.1", int(channel["port"]))
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)

    # -- the heartbeat ------------------------------------------------------------------------

    def start(self) -> None:
        """Watch the calls in flight (only in a process that runs tests, and not when quiet)."""
        if self.quiet or self.interval_s <= 0 or self.role == "controller":
            return
        threading.Thread(target=self._watch, name="slam-heartbeat", daemon=True).start()

    def _watch(self) -> None:
        tick = min(0.25, self.interval_s / 4)
        while not self._stop.wait(tick):
            self.beat(time.perf_counter())

    def beat(self, now: float) -> None:
        """Name each call in flight for longer than the interval, once per interval."""
        flights = list(IN_FLIGHT)
        self._beats = {f: self._beats.get(f, f.start + self.interval_s) for f in flights}
        for flight, due in self._beats.items():
            if now >= due:
                self._beats[flight] = due + self.interval_s
                self.say(self.line(flight, now))

    def line(self, flight: InFlight, now: float) -> str:
        spec, role = flight.target.spec, flight.target.role
        where = f" on {self.test}" if self.test else ""
        return (
            f"{spec.name} ({role}) still answering{where}: {flight.tokens} token(s) so far, "
            f"{now - flight.start:.0f} s"
        )

    def close(self) -> None:
        self._stop.set()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    # -- pytest hooks (registered as a plugin: which test is running) -------------------------

    def pytest_runtest_logstart(self, nodeid: str, location: object) -> None:
        self.test = nodeid

    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> None:
        self.test = None
