"""Whether a test replaced part of the OpenAI SDK: a mocked client is "not swapped", not "no calls".

A test that sent its candidate no call either made no model call at all (a plain test in an
opted-in folder: outcome ``no_calls``, counted apart) or made one that went elsewhere: off the
machine (egress.py), on another model's route, or into a mock. A mock leaves no trace on the
network, so the test's patches are read at the end of its call, while they are still in place:
pytest's ``monkeypatch``, pytest-mock's ``mocker`` and ``unittest.mock`` patchers started with
``start()``. A ``with mock.patch(...)`` block or a ``@mock.patch`` decorator has ended by then, and
an SDK replaced by hand (``client.chat = Fake()``) is not seen: such a test reads as ``no_calls``.
"""

from __future__ import annotations

import unittest.mock
from types import ModuleType
from typing import Any

import pytest

SDK = "openai"


def sdk_patches(item: pytest.Item) -> list[str]:
    """``module.Class.attr`` for each attribute of the OpenAI SDK the test has replaced now."""
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    found = []
    for target, name, _old in getattr(funcargs.get("monkeypatch"), "_setattr", ()):
        if _from_sdk(target):
            found.append(f"{_where(target)}.{name}")
    patchers = list(getattr(unittest.mock._patch, "_active_patches", ()))
    patchers += [p for p, _mock in getattr(funcargs.get("mocker"), "_patches_and_mocks", ())]
    for patcher in patchers:
        try:
            target = patcher.getter()
        except Exception:  # a target that no longer imports is not an SDK patch we can name
            continue
        if _from_sdk(target):
            found.append(f"{_where(target)}.{patcher.attribute}")
    return list(dict.fromkeys(found))


def _module_of(obj: object) -> str:
    if isinstance(obj, ModuleType):
        return obj.__name__
    return str(getattr(obj if isinstance(obj, type) else type(obj), "__module__", "") or "")


def _from_sdk(obj: object) -> bool:
    module = _module_of(obj)
    return module == SDK or module.startswith(SDK + ".")


def _where(obj: object) -> str:
    if isinstance(obj, ModuleType):
        return obj.__name__
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
