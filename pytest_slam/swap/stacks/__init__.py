"""Client stacks: one module per HTTP library a product may call the API with.

Each ``*_stack.py`` module here exposes ``STACK`` (``common.Stack``): the library's installed
modules and the send points to wrap. The registry finds the modules by name, once per process, so
a new stack is one new module (and its test). ``install`` wraps the send points of every library
the process has imported, and one imported later while the redirect is in force as its import ends
(onimport.py); ``restore`` puts back exactly what was there.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
import sys
from typing import Any

from pytest_slam.swap.stacks.common import Stack
from pytest_slam.swap.stacks.onimport import WrapOnImport

SUFFIX = "_stack"
# Every send point replaced, with what was there before: restored when the last redirect ends.
_originals: dict[tuple[type, str], Any] = {}


@functools.cache
def stacks() -> tuple[Stack, ...]:
    """The stack of each module in this package, found once per process: a miss costs a full
    ``sys.path`` search, and every opted-in test installs the redirect."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith(SUFFIX))
    found: list[Stack] = [importlib.import_module(f"{__name__}.{n}").STACK for n in names]
    return tuple(found)


def installed() -> list[str]:
    """The names of the stacks whose library is installed here (found, not imported)."""
    return [stack.name for stack in stacks() if any(_installed(n) for n in stack.modules)]


@functools.cache
def _installed(name: str) -> bool:
    """Whether the package of module ``name`` is installed: its top-level package is looked up
    (``find_spec`` of a dotted name would import its parent), once per process."""
    try:
        return importlib.util.find_spec(name.partition(".")[0]) is not None
    except (ImportError, ValueError):
        return False


def install() -> None:
    """Wrap the send points of every library the process has imported (once: a nested install
    changes nothing), and watch for the others' import until ``restore``."""
    waiting: set[str] = set()
    for stack in stacks():
        for library in stack.libraries():
            for patch in stack.patches(library):
                key = (patch.owner, patch.name)
                if key not in _originals:  # httpx may be an alias of httpx2: one class, once
                    _originals[key] = getattr(patch.owner, patch.name)
                    setattr(patch.owner, patch.name, patch.new)
        # only an installed library can be imported later: none other keeps the finder armed
        waiting.update(n for n in stack.modules if n not in sys.modules and _installed(n))
    _watch.arm(frozenset(waiting))


def restore() -> None:
    """Put every wrapped send point back as it was before ``install``; stop watching imports."""
    _watch.disarm()
    for (owner, name), original in _originals.items():
        setattr(owner, name, original)
    _originals.clear()


_watch = WrapOnImport(then=install)
