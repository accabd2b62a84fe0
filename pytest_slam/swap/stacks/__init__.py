"""Client stacks: one module per HTTP library a product may call the API with.

Each ``*_stack.py`` module here exposes ``STACK`` (``common.Stack``): the library's installed
modules and the send points to wrap. The registry finds the modules by name, once per process, so
a new stack is one new module (and its test). ``install`` wraps every installed library's send
points; ``restore`` puts back exactly what was there.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from typing import Any

from pytest_slam.swap.stacks.common import Stack

SUFFIX = "_stack"
# Every send point replaced, with what was there before: restored when the last redirect ends.
_originals: dict[tuple[type, str], Any] = {}
_wrapped: set[int] = set()  # the libraries (module ids) whose send points are wrapped now


@functools.cache
def stacks() -> tuple[Stack, ...]:
    """The stack of each module in this package, found once per process: a miss costs a full
    ``sys.path`` search, and every opted-in test installs the redirect."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.endswith(SUFFIX))
    found: list[Stack] = [importlib.import_module(f"{__name__}.{n}").STACK for n in names]
    return tuple(found)


@functools.cache
def _libraries() -> tuple[tuple[Stack, Any], ...]:
    return tuple((stack, lib) for stack in stacks() for lib in stack.libraries())


def installed() -> list[str]:
    """The names of the stacks whose library is installed here."""
    return list(dict.fromkeys(stack.name for stack, _ in _libraries()))


def install() -> None:
    """Wrap the send points of every installed library (once: a nested install changes nothing)."""
    for stack, library in _libraries():
        if id(library) in _wrapped:
            continue
        _wrapped.add(id(library))
        for patch in stack.patches(library):
            _originals[(patch.owner, patch.name)] = getattr(patch.owner, patch.name)
            setattr(patch.owner, patch.name, patch.new)


def restore() -> None:
    """Put every wrapped send point back as it was before ``install``."""
    for (owner, name), original in _originals.items():
        setattr(owner, name, original)
    _originals.clear()
    _wrapped.clear()
