"""What a run says while it works: its engines' start, and a heartbeat of each long model call.

pytest's dots say nothing while an engine loads or a model call runs for minutes. These lines go
through pytest's terminal writer (capture suspended around it, as pytest's live logging does),
prefixed ``pytest-slam:``, never with ``-q``, each fit to a terminal's width (a test id loses its
middle first, the test's name and the model kept; then tokens and roles; only then is the end cut
with ``...``; never wrapped mid-word) and whole when pytest writes
to no terminal (a CI log). They never split a line of pytest's: a line is written only while pytest writes
nothing (the reporter's hooks hold the same lock), and an open progress line is first ended the
way pytest ends it at a new file (its ``[ 40%]``), so the next result opens a whole new line with
the file's name, as pytest's own lines do.

The heartbeat is a daemon thread that looks at the calls in flight (``chat.IN_FLIGHT``). Once one
has run longer than the interval (``--slm-heartbeat`` / ini ``slm_heartbeat``, seconds; 0 turns
it off) it says one line for all of them: how many tests are done of how many (``3 of 7 tests``), then
the test (or engine, for its warm-up call) and its oldest call's time, then each call's model,
role, tokens so far (and time, after the first). A call is named again at twice its age (10 s,
20 s, 40 s, ...); calls fetched ahead, which start one after another, are named again no sooner
than the oldest of them in the last line has run again as long; so a slow run says a few lines,
not one per call every interval.

Under xdist the controller speaks for its workers. A worker's calls run while its test runs, and
xdist has no live channel from a worker's test to the controller (its events are fixed: reports,
warnings, scheduling), so the controller listens on a loopback UDP socket whose address and secret
it hands each worker in ``workerinput``; a worker sends its lines there and never writes to a
terminal itself. The controller prints them with the worker's id, the heartbeats of all workers
as one line of the run, at most one an interval. Any local user can send to that
port: each datagram is sealed with the secret and checked before anything in it is read, and what
is printed has its control characters escaped (``datagram.py``); nothing a datagram holds stops
the listener.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Literal, TypedDict

import pytest

from pytest_slam.run.inputs import options
from pytest_slam.run.workers.datagram import MAX_BYTES, Opener, seal
from pytest_slam.swap.chat import IN_FLIGHT, InFlight
from pytest_slam.util.foreign import location_line, progress_filler, writer_file

HEARTBEAT_S = 10.0
INI = "slm_heartbeat"
WORKER_KEY = "slam_progress"  # this module's entry in an xdist worker's ``workerinput``
Owed = Literal["files", "test", ""]  # which of pytest's lines a heartbeat ended (end_pytest_line)
GROUPED = 3  # more calls in flight than this: one part per model, not one per call


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
        self.label: str | None = None  # what a call belongs to outside a test (engine warm-up)
        self.done = 0  # tests finished, of ``collected``
        self.collected = 0
        self.session: pytest.Session | None = None  # its count is xdist's controller's too
        self._lock = (
            threading.RLock()
        )  # held by pytest's reporter hooks too: lines never interleave
        self._stop = threading.Event()
        self._started = False
        self._owed: Owed = ""  # a heartbeat ended pytest's line: reopen it for its next result
        self._beats: dict[InFlight, int] = {}  # how many times each long call was named
        self._names: dict[InFlight, str] = {}  # the test (or engine) each call belongs to
        self._quiet_until = 0.0  # no line for calls fetched ahead before this (perf_counter)
        self._socket: socket.socket | None = None
        self._secret = secrets.token_hex(16)
        self._to: tuple[str, int] | None = None  # a worker's controller

    # -- lines --------------------------------------------------------------------------------

    def say(self, text: str, beat: bool = False) -> None:
        """One line, now: on the terminal, or (xdist worker) to the controller. A heartbeat
        (``beat``) is headed with the tests done where it is printed (the controller counts
        every worker's)."""
        if self.quiet:
            return
        if self.role == "worker":
            self._send(text, beat)
        else:
            self._write(f"pytest-slam: {self.head() if beat else ''}{text}")

    def head(self) -> str:
        collected = self.session.testscollected if self.session is not None else 0
        return f"{self.done} of {collected or self.collected or '?'} tests, "

    def _write(self, line: str) -> None:
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        if terminal is None:
            return
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        suspended = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
        with self._lock, suspended:
            writer = self.config.get_terminal_writer()
            if writer.width_of_current_line:
                self._owed = end_pytest_line(terminal)  # its next result needs its line again
            writer.line(fit(line, writer.fullwidth) if is_terminal(writer) else line)
            terminal.flush()  # a pipe (CI) would hold it back until the buffer fills

    def _reopen(self, nodeid: str, location: tuple[str, int | None, str] | None = None) -> None:
        """Open pytest's line again, as pytest opens it but without the newline before it (the
        line above is ours, already ended): pytest's next result lands on it. The file's line
        of dots; with ``-v`` the test's own line (``location``: its report's)."""
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        writer = self.config.get_terminal_writer()
        owed, self._owed = self._owed, ""
        if terminal is None or writer.width_of_current_line:
            return
        if owed == "files":
            fspath = Path(self.config.rootpath) / nodeid.split("::")[0]
            terminal.currentfspath = fspath
            writer.write(os.path.relpath(fspath, terminal.startpath) + " ")
            return
        locate = location_line(terminal)  # how pytest names the test with -v
        if owed == "test" and location is not None and locate is not None:
            prefix = locate(nodeid, *location)
            terminal.currentfspath = prefix
            writer.write(prefix)

    def _send(self, text: str, beat: bool) -> None:
        if self._socket is None or self._to is None:
            return
        worker = str(getattr(self.config, "workerinput", {}).get("workerid", "worker"))
        with contextlib.suppress(OSError):  # a lost heartbeat is no reason to fail a test
            self._socket.sendto(seal(self._secret, worker, text, beat), self._to)

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
        beats: dict[str, str] = {}  # each worker's latest heartbeat not yet printed
        last = 0.0  # when the run's last heartbeat line was printed
        while sock is not None and not self._stop.is_set():
            try:
                data = sock.recv(MAX_BYTES + 1)  # a longer one is cut to this, and refused
            except TimeoutError:
                data = None
            except OSError:  # closed at the end of the run
                return
            line = opener.open(data) if data is not None else None  # None: not a fresh line
            if line is not None:
                worker, text, beat = line
                if beat:
                    beats[worker] = text
                else:
                    with contextlib.suppress(Exception):  # a line that cannot be shown: dropped
                        self._write(f"pytest-slam: [{worker}] {text}")
            now = time.monotonic()
            if beats and now - last >= self.interval_s:  # one heartbeat for the run
                text = "; ".join(f"[{w}] {t}" for w, t in sorted(beats.items()))
                beats.clear()
                last = now
                with contextlib.suppress(Exception):
                    self._write(f"pytest-slam: {self.head()}{text}")

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
        if self.quiet or self.interval_s <= 0 or self.role == "controller" or self._started:
            return
        self._started = True
        threading.Thread(target=self._watch, name="slam-heartbeat", daemon=True).start()

    def _watch(self) -> None:
        tick = min(0.25, self.interval_s / 4)
        while not self._stop.wait(tick):
            self.beat(time.perf_counter())

    @contextlib.contextmanager
    def naming(self, label: str) -> Iterator[None]:
        """Calls made meanwhile belong to ``label`` (an engine's warm-up), not the test running."""
        self.label = label
        try:
            yield
        finally:
            self.label = None

    def beat(self, now: float) -> None:
        """One line for the calls in flight once any of them is due: a call is due at the
        interval, then at twice its age each time (10 s, 20 s, 40 s, ...)."""
        with self._lock:
            flights = sorted(IN_FLIGHT, key=lambda f: f.start)
            for flight in flights:
                self._names.setdefault(flight, flight.label or self.label or self.test or "")
            self._beats = {f: self._beats.get(f, 0) for f in flights}
            self._names = {f: self._names[f] for f in flights}
            # calls fetched ahead start one after another, each due on its own schedule, and
            # said a line at every step of each (45 lines for 2 tests, issue 52): one of them is
            # due only once the oldest named in the last line has run again as long
            quiet = now < self._quiet_until
            if not any(now >= self._due(f) for f in flights if not (quiet and _fetched(f))):
                return
            long = [f for f in flights if now - f.start >= self.interval_s]
            for flight in long:
                while now >= self._due(flight):
                    self._beats[flight] += 1
            self.say(self.line(long, now), beat=True)
            fetched = [f.start for f in long if _fetched(f)]
            if fetched:
                self._quiet_until = now + max(self.interval_s, now - min(fetched))

    def _due(self, flight: InFlight) -> float:
        return flight.start + self.interval_s * float(2 ** self._beats[flight])

    def line(self, flights: list[InFlight], now: float) -> str:
        """``test_a.py::test_x[slow] 20 s: 2 calls in flight: gpt-4 (reference) 14 tok; slow
        (candidate) 12 s, 3 tok``: the test (or engine) and the longest call's time first, so a
        line cut to 80 columns (``fit``: the test's middle first) still says what runs and how
        long; calls of several tests each after their own test."""
        if len(flights) > GROUPED:
            return self._grouped(flights, now)
        names = {self._names.get(f, "") for f in flights}
        shared = names.pop() if len(names) == 1 else None
        calls = f"{len(flights)} calls in flight: " if len(flights) != 1 else ""
        if shared is not None:
            oldest = now - flights[0].start
            parts = [
                f"{f.target.spec.name} ({f.target.role})"
                + (f" {now - f.start:.0f} s" if i else "")
                + f", {f.tokens} tok"
                for i, f in enumerate(flights)
            ]
            head = f"{shared} {oldest:.0f} s: " if shared else f"{oldest:.0f} s: "
            return head + calls + "; ".join(parts)
        parts = [
            f"{self._names.get(f, '') or 'outside a test'} {now - f.start:.0f} s: "
            f"{f.target.spec.name} ({f.target.role}), {f.tokens} tok"
            for f in flights
        ]
        return calls + "; ".join(parts)

    def _grouped(self, flights: list[InFlight], now: float) -> str:
        """Many calls at once (answers fetched ahead): the test and the oldest call's time first,
        then one part per model, the running test's own calls apart from those fetched for later
        tests, ``test_x[mini] 20 s: 18 calls in flight: mini (candidate) 16: 1 the test's own,
        15 fetched ahead; gpt-4 (reference) 2``."""
        by_model: dict[tuple[str, str], list[InFlight]] = {}
        for flight in flights:
            by_model.setdefault((flight.target.spec.name, flight.target.role), []).append(flight)
        parts = []
        for (name, role), group in by_model.items():
            ahead = sum(1 for f in group if f.label and f.label.startswith("fetched ahead"))
            own = f": {len(group) - ahead} the test's own, {ahead} fetched ahead" if ahead else ""
            parts.append(f"{name} ({role}) {len(group)}{own}")
        oldest = now - min(f.start for f in flights)
        head = f"{self.test} {oldest:.0f} s: " if self.test else f"{oldest:.0f} s: "
        return head + f"{len(flights)} calls in flight: " + "; ".join(parts)

    def close(self) -> None:
        self._stop.set()
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    # -- pytest hooks (registered as a plugin: which test is running, how many are done) -------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.collected = session.testscollected or len(session.items)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: object) -> Generator[None]:
        with self._lock:  # pytest's reporter writes here: no line of ours in between
            self.test = nodeid
            if self._owed:
                self._reopen(nodeid)
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None]:
        with self._lock:
            if self._owed and (report.when == "call" or not report.passed):  # a result's letter
                self._reopen(report.nodeid, report.location)
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: object) -> Generator[None]:
        with self._lock:
            self.test = None
            self.done += 1
            return (yield)


def _fetched(flight: InFlight) -> bool:
    """A call fetched ahead of its test (swap/ahead.py labels it so)."""
    return bool(flight.label and flight.label.startswith("fetched ahead"))


def end_pytest_line(terminal: pytest.TerminalReporter) -> Owed:
    """End the line pytest has open as pytest ends a file's line before the next file's: with
    its progress (``[ 40%]``) when it shows one, then the newline. Which line it was, to open
    again for pytest's next result (``_reopen``): a file's line of dots (``files``), a test's
    line with ``-v`` (``test``), or none to open (xdist's dots, which name no file)."""
    fill = progress_filler(terminal)
    dots = terminal.config.get_verbosity() <= 0
    files = dots and isinstance(terminal.currentfspath, os.PathLike)
    if files and fill is not None:
        fill()
    was = terminal.currentfspath
    terminal.write("\n")
    terminal.currentfspath = None
    if files:
        return "files"
    return "test" if not dots and isinstance(was, str) else ""


def is_terminal(writer: object) -> bool:
    """Whether pytest writes to a terminal: a CI log (a pipe, a file) gets every line whole."""
    isatty = getattr(writer_file(writer), "isatty", None)
    if not callable(isatty):
        return True
    try:
        return bool(isatty())
    except (OSError, ValueError):  # a closed stream
        return False


NODE_ID = re.compile(r"\S+::\S+")
TOKENS = re.compile(r", \d+ tok\b")  # a call's tokens so far: what a narrow line spares first
SPARE = re.compile(r": \d+ the test's own, (\d+) fetched ahead")  # a grouped line's words
ROLES = re.compile(r" \((?:candidate|reference|judge|passthrough)\)")  # a call's role, next
MIN_NODE_ID = 24  # a test's name is never clipped shorter than this
MIN_HEAD = 4  # what is kept of a node id's start before its last part (``test...::test_x[p]``)


def fit(line: str, width: int) -> str:
    """``line`` fit to the terminal's ``width``, never wrapped mid-word. A test's node id in it
    first loses its middle and keeps its last part whole (``test_sl...::test_ask[smollm2-135m]``:
    the test's name and its parameters, the model among them), then keeps only its end
    (``...request_to_billing[smollm2-135m]``); if that is not enough the calls' token counts go
    (and a grouped line's words), then the calls' roles; only then is the line's end cut with
    ``...``. So a heartbeat at 80 columns still names the test, how long it has run and the model
    it waits on (issue 52)."""
    room = max(width - 1, 20)  # pytest leaves the last column free
    spare = SPARE.sub(r" (\1 ahead)", TOKENS.sub("", line)).replace(" calls in flight:", " calls:")
    bare = ROLES.sub("", spare)
    tries = ((line, True), (line, False), (spare, True), (spare, False), (bare, False))
    for text, whole_last in tries:
        fitted = _clip_ids(text, room, whole_last)
        if len(fitted) <= room:
            return fitted
    return fitted[: room - 3].rstrip() + "..."


def _clip_ids(line: str, room: int, whole_last: bool) -> str:
    """The line's node ids shortened, the longest first, until it fits ``room`` or none can
    lose more (``whole_last``: each keeps its last part whole; else its last ``MIN_NODE_ID``)."""
    while len(line) > room:
        found = [
            (m, floor)
            for m in NODE_ID.finditer(line)
            if len(m.group()) > (floor := _floor(m.group(), whole_last))
        ]
        if not found:
            return line
        longest, floor = max(found, key=lambda pair: len(pair[0].group()))
        keep = max(floor, len(longest.group()) - (len(line) - room))
        clipped = clip_node(longest.group(), keep)
        line = line[: longest.start()] + clipped + line[longest.end() :]
    return line


def _floor(nodeid: str, whole_last: bool) -> int:
    """The shortest a node id is clipped to: its last part whole behind a little of its start,
    or (not ``whole_last``) ``MIN_NODE_ID``."""
    if not whole_last:
        return min(len(nodeid), MIN_NODE_ID)
    return min(len(nodeid), MIN_HEAD + 5 + len(nodeid.rsplit("::", 1)[-1]))


def clip_node(nodeid: str, width: int) -> str:
    """``nodeid`` in ``width`` characters, its middle replaced by ``...``: the test's last part
    (its name and parameters) kept whole after ``...::`` where it fits, else its end."""
    if len(nodeid) <= width:
        return nodeid
    last = nodeid.rsplit("::", 1)[-1]
    head = width - 5 - len(last)
    if head >= MIN_HEAD:
        return nodeid[:head] + "...::" + last
    return "..." + nodeid[len(nodeid) - (width - 3) :]
