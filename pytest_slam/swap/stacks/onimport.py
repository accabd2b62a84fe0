"""A library imported while a redirect is in force is wrapped as its import ends.

The registry wraps only the libraries a process has already imported: importing one just to wrap
it costs a run that never uses it (requests: 66 ms at the first opted-in test). A product that
imports its HTTP library only inside a test still has that library's calls redirected: while a
redirect is installed this finder sits first on ``sys.meta_path``, and when a watched module's own
loader has run it calls ``then``. Only the watched names are touched; the module keeps its own
loader once it has run.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any


class WrapOnImport(importlib.abc.MetaPathFinder):
    def __init__(self, then: Callable[[], None]) -> None:
        self.then = then
        self.names: frozenset[str] = frozenset()
        self._finding = False  # the other finders are asked from inside this one

    def arm(self, names: frozenset[str]) -> None:
        """Watch ``names`` (none: the finder leaves ``sys.meta_path``)."""
        self.names = names
        if names and self not in sys.meta_path:
            sys.meta_path.insert(0, self)
        elif not names:
            self.disarm()

    def disarm(self) -> None:
        self.names = frozenset()
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names or self._finding:
            return None
        self._finding = True
        try:
            spec = next(
                (
                    found
                    for finder in sys.meta_path
                    if finder is not self and hasattr(finder, "find_spec")
                    for found in [finder.find_spec(fullname, path, target)]
                    if found is not None
                ),
                None,
            )
        finally:
            self._finding = False
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenCall(spec.loader, self.then)
        return spec


class _ThenCall(importlib.abc.Loader):
    """The module's own loader, then ``then``; the module is left with its own loader."""

    def __init__(self, loader: Any, then: Callable[[], None]) -> None:
        self.loader, self.then = loader, then

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        created: ModuleType | None = self.loader.create_module(spec)
        return created

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        self.then()

    def __getattr__(self, name: str) -> Any:  # get_data, is_package, ...: the module's own loader
        return getattr(self.loader, name)
