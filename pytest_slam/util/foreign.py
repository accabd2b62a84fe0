"""Every private attribute of another library that pytest-slam reads or writes, one helper each.

Where a library has a public way, the code uses it (``config.get_terminal_writer()``,
``pytest.xfail.Exception``, ``pytest.TerminalReporter``). What is left has no public equivalent,
and each such read is here, named for what it gives, with the fallback its caller relies on when
a release renames it (the feature it serves degrades; nothing raises). ``tests/test_foreign.py``
checks each one against the installed version of its library, so such a rename fails there, by
name, instead of turning a feature silently off.
"""

from __future__ import annotations

import argparse
import unittest.mock
from collections.abc import Callable
from typing import Any

# -- pytest ---------------------------------------------------------------------------------------


def location_line(terminal: object) -> Callable[[str, str, int | None, str], str] | None:
    """How pytest names a test at the start of its ``-v`` line (``TerminalReporter._locationline``),
    to reopen that line after a heartbeat; None: the line is not reopened."""
    locate = getattr(terminal, "_locationline", None)
    if not callable(locate):
        return None
    parse = pytest_node_id()

    def named(nodeid: str, fspath: str, lineno: int | None, domain: str) -> str:
        # a pytest before 9.2 takes the node id as the string
        return str(locate(nodeid if parse is None else parse(nodeid), fspath, lineno, domain))

    return named


def pytest_node_id() -> Callable[[str], object] | None:
    """``NodeId.parse`` where pytest names tests by a structured node id (9.2: its
    ``_locationline`` reads ``nodeid.path`` with ``-vv``, and from a folder other than the
    rootdir); None where it takes the string."""
    try:
        from _pytest.nodeid import NodeId  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    parse = getattr(NodeId, "parse", None)
    return parse if callable(parse) else None


def progress_filler(terminal: object) -> Callable[[], None] | None:
    """What writes pytest's ``[ 40%]`` at the end of a file's line of dots, when it shows one
    (``_show_progress_info``, ``_write_progress_information_filling_space``); None: it shows none,
    or this pytest has no such writer (the heartbeat then ends the line without it)."""
    fill = getattr(terminal, "_write_progress_information_filling_space", None)
    shown = getattr(terminal, "_show_progress_info", False)
    return fill if shown and callable(fill) else None


def writer_file(writer: object) -> object | None:
    """The stream pytest's ``TerminalWriter`` writes to (its ``_file``); None where this pytest
    keeps it elsewhere (the caller then treats it as a terminal, as before)."""
    return getattr(writer, "_file", None)


def tmp_path_factory(config: object) -> Any | None:
    """pytest's session ``TempPathFactory`` before any fixture exists (``Config._tmp_path_factory``,
    set by its tmpdir plugin at configure); None with ``-p no:tmpdir``."""
    return getattr(config, "_tmp_path_factory", None)


def monkeypatched(monkeypatch: object) -> list[tuple[object, str]]:
    """(target, attribute) of each ``setattr`` a ``MonkeyPatch`` holds now (its ``_setattr``)."""
    return [(target, name) for target, name, _old in getattr(monkeypatch, "_setattr", ())]


# -- pytest-xdist ----------------------------------------------------------------------------------


def xdist_pending(config: object) -> list[int]:
    """The indices of the tests this xdist worker has been handed and not yet started: the next
    one (``WorkerInteractor.nextitem_index``) and its ``torun`` queue, which have no public
    reader; [] when they are not there (the worker then fetches nothing ahead, and asks each
    call live)."""
    manager = getattr(config, "pluginmanager", None)
    for plugin in manager.get_plugins() if manager is not None else ():
        if type(plugin).__name__ != "WorkerInteractor":
            continue
        lock = getattr(getattr(plugin, "torun", None), "lock", None)
        if not callable(lock):
            return []
        with lock() as queued:
            pending = [getattr(plugin, "nextitem_index", None), *queued]
        return [i for i in pending if isinstance(i, int) and not isinstance(i, bool)]
    return []


# -- argparse ---------------------------------------------------------------------------------------


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (its ``_actions``' ``_SubParsersAction``), for ``slam help
    COMMAND``; none when it has no subparsers."""
    for action in getattr(parser, "_actions", ()):
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


# -- unittest.mock (and pytest-mock) -------------------------------------------------------------


def started_mock_patchers() -> list[Any]:
    """The ``unittest.mock`` patchers started with ``start()`` and not stopped yet
    (``mock._patch._active_patches``, what ``mock.patch.stopall`` stops). pytest-mock's ``mocker``
    starts its patchers so: they are among these, with no read of its own internals."""
    return list(getattr(unittest.mock._patch, "_active_patches", ()))


# -- Hypothesis -------------------------------------------------------------------------------------

_HYPOTHESIS_SETTINGS = "_hypothesis_internal_use_settings"


def hypothesis_settings(fn: object) -> Any | None:
    """The settings a ``@given`` test runs with, when ``@settings`` or a profile set them on it;
    None: none set on the function (Hypothesis uses its default)."""
    return getattr(fn, _HYPOTHESIS_SETTINGS, None)


def set_hypothesis_settings(fn: object, settings: object) -> None:
    """Give a ``@given`` test other settings, where Hypothesis reads them when it runs the test
    (as its own pytest plugin does for parametrized tests): ``@settings`` cannot be applied to a
    function twice."""
    vars(fn)[_HYPOTHESIS_SETTINGS] = settings


# -- httpx and vcrpy ----------------------------------------------------------------------------------


def httpx_pool(transport: object) -> object:
    """An httpx (or httpx2) ``HTTPTransport``'s connection pool (its ``_pool``): a plain
    ``ConnectionPool`` reaches loopback, an HTTP proxy's pool may not; None: unknown."""
    return getattr(transport, "_pool", None)


def vcr_stub_base(cls: type) -> type:
    """The class a vcrpy stub stands in for (``_baseclass`` of its ``VCRHTTPConnection``), or
    ``cls`` itself when it is not a stub."""
    if not cls.__module__.startswith("vcr."):
        return cls
    real = getattr(cls, "_baseclass", cls)
    return real if isinstance(real, type) else cls
