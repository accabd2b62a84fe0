"""Connections that would leave the machine during an opted-in test: noticed, named, or refused.

The swap carries the calls it can reach; anything else an opted-in test sends off the machine (a
client with an explicit ``base_url``, a raw HTTP post to the hosted API, a database) would make the
verdict rest on calls the candidate never answered. So one ``sys.addaudithook`` hook watches the
``socket.getaddrinfo`` and ``socket.connect`` events. Audit hooks cannot be removed, so it is
installed once per process, the first time an opted-in test starts, and does nothing (one set
look-up) unless an opted-in test is running (the swap router's ``active`` context).

A lookup of a name other than ``localhost`` counts as leaving the machine, because the lookup
itself goes to the DNS server; a connect counts when its address is not loopback. With
``--slm-block-network`` both fail before any packet is sent, with one line naming the host and the
fix. Hosts in ``--slm-allowed-hosts`` (names, addresses or regular expressions matched against the
whole host, as pytest-recording's ``--allowed-hosts``) are neither refused nor counted; the connect
that follows an allowed name's lookup is allowed with it. The plugin's own hops (to a candidate,
the reference, a judge, an embeddings scorer) are told apart by the call stack: the innermost
pytest-slam frame is not one of the test runners below.
Frames of wrappers that carry anyone's request (the transport redirect) are looked through, so a
product's request to an unlisted host is still the product's.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

from pytest_slam.errors import SlamError

OPTION = "--slm-block-network"
EVENTS = frozenset({"socket.getaddrinfo", "socket.connect"})
LOCAL_NAMES = ("localhost", "localhost.", "")
BLOCKED = " (blocked)"
# Modules that run the test itself: a connection whose innermost pytest-slam frame is one of these
# (or that has none, as on a product thread) is the product's; any other pytest-slam frame is a hop.
TEST_RUNNERS = frozenset(
    f"pytest_slam.{prefix}{name}"
    for prefix in ("", "run.")
    for name in ("plugin", "session", "repeat", "fixtures", "hypothesis_support")
)
# Wrappers around every HTTP request of the process: neither the product's nor a hop of the plugin.
TRANSPARENT = frozenset({"pytest_slam.swap.redirect", "pytest_slam.swap.router.redirect"})
STACKS = (
    "pytest_slam.swap.stacks."  # each client stack wraps a library's send point: transparent too
)
FIX = (
    "for an OpenAI-compatible API list the host in [tool.slam] redirect_hosts so the swap carries "
    "it; else keep the test on the real endpoint with @pytest.mark.slm(swap=False)"
)


class _Active(Protocol):
    @property
    def nodeid(self) -> str: ...


class Router(Protocol):
    """What the watch reads of ``swap.SwapRouter``: the opted-in test that runs now, if any."""

    @property
    def active(self) -> _Active | None: ...


class EgressBlocked(ConnectionRefusedError, SlamError, kind="egress"):
    """A connection refused by ``--slm-block-network``: an OSError, as HTTP clients expect."""


@dataclass
class EgressWatch:
    """What left the machine, per test nodeid, in this process; ``block`` refuses it instead."""

    router: Router
    block: bool = False
    allowed: tuple[str, ...] = ()  # host patterns reached freely (--slm-allowed-hosts)
    seen: dict[str, list[str]] = field(default_factory=dict)
    _pending: dict[object, str] = field(default_factory=dict)  # port -> name just looked up
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def begin(self, nodeid: str) -> None:
        """A test (or a rerun of it) starts: forget what an earlier attempt saw."""
        self.seen.pop(nodeid, None)
        self._pending.clear()

    def for_test(self, nodeid: str) -> list[str]:
        return list(self.seen.get(nodeid, []))

    def notice(self, event: str, host: object, port: object) -> None:
        ctx = self.router.active
        if ctx is None:
            return
        with self._lock:
            if event == "socket.connect" and self._pending.pop(port, None) is not None:
                return  # the connect that follows a lookup already counted (or was allowed)
            if self.allowed and is_allowed(host, self.allowed):
                if event == "socket.getaddrinfo":
                    self._pending[port] = str(host)
                return
            if event == "socket.getaddrinfo" and not self.block:
                self._pending[port] = str(host)
            where = f"{_text(host)}:{port}"
            self.seen.setdefault(ctx.nodeid, []).append(where + (BLOCKED if self.block else ""))
        if self.block:
            raise EgressBlocked(
                f"pytest-slam: blocked a connection to {where} from the opted-in test "
                f"{ctx.nodeid} ({OPTION}); {FIX}"
            )


_WATCH: EgressWatch | None = None
_INSTALLED = False
_HOSTNAME: list[str] = []


def watch_test(
    router: Router, nodeid: str, block: bool, allowed: tuple[str, ...] = ()
) -> EgressWatch:
    """Watch this process's opted-in tests (installing the hook once); ``nodeid`` starts now."""
    global _WATCH, _INSTALLED
    if _WATCH is None or _WATCH.router is not router:
        _WATCH = EgressWatch(router, block)
    _WATCH.block, _WATCH.allowed = block, allowed
    if not _INSTALLED:
        sys.addaudithook(_hook)
        _INSTALLED = True
    _WATCH.begin(nodeid)
    return _WATCH


def seen_by(nodeid: str) -> list[str]:
    """``host:port`` for each connection the test ``nodeid`` sent off the machine, in order."""
    return _WATCH.for_test(nodeid) if _WATCH is not None else []


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event not in EVENTS:
        return
    watch = _WATCH
    if watch is None or watch.router.active is None:
        return
    if event == "socket.getaddrinfo":
        host, port = args[0], args[1]
    else:
        address = args[1]
        if not isinstance(address, tuple) or len(address) < 2:
            return  # a Unix socket or another local family
        host, port = address[0], address[1]
    if is_local(host) or _plugin_hop():
        return
    watch.notice(event, host, port)


def is_local(host: object) -> bool:
    """Loopback, unspecified, or this machine's own name: a connection there stays here."""
    if host is None:
        return True
    text = _text(host).strip("[]").split("%", 1)[0].lower()
    if text in LOCAL_NAMES or text.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return text == _hostname()
    return address.is_loopback or address.is_unspecified


def is_allowed(host: object, patterns: tuple[str, ...]) -> bool:
    """Whether ``host`` is one of ``patterns``: equal, or matched whole by one as a regular
    expression, letter case aside."""
    text = _text(host).strip("[]").split("%", 1)[0].lower()
    return any(text == p.lower() or re.fullmatch(p, text, re.IGNORECASE) for p in patterns)


def _hostname() -> str:
    if not _HOSTNAME:
        _HOSTNAME.append(socket.gethostname().lower())
    return _HOSTNAME[0]


def _plugin_hop() -> bool:
    """Whether the innermost pytest-slam frame on the stack is the plugin's own network hop."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        transparent = name in TRANSPARENT or name.startswith(STACKS)
        if name.startswith("pytest_slam.") and name != __name__ and not transparent:
            return name not in TEST_RUNNERS
        frame = frame.f_back
    return False


def _text(host: object) -> str:
    return host.decode(errors="replace") if isinstance(host, bytes) else str(host)


def summary_line(tests: list[tuple[str, list[str]]]) -> str | None:
    """One line naming every destination and the test it came from, or None when nothing left."""
    total = sum(len(seen) for _, seen in tests)
    if not total:
        return None
    blocked = all(w.endswith(BLOCKED) for _, seen in tests for w in seen)
    parts = []
    for test, seen in tests:
        for where in dict.fromkeys(seen):
            times = seen.count(where)
            shown = where.removesuffix(BLOCKED) if blocked else where
            parts.append(f"{shown} from {test}" + (f" ({times}x)" if times > 1 else ""))
    verb = f"were refused ({OPTION})" if blocked else "left the machine"
    return (
        f"{total} connection(s) {verb} during opted-in tests: {'; '.join(parts)}. "
        f"These calls were not swapped: {FIX}" + ("" if blocked else f"; {OPTION} makes them fail")
    )
