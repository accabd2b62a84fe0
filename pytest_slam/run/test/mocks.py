"""Whether a test replaced something with a mock: a mocked call is "not swapped", not "no calls".

A test that sent its candidate no call either made no model call at all (a plain test in an
opted-in folder: outcome ``no_calls``, counted apart) or made one that went elsewhere: off the
machine (egress.py), on another model's route, or into a mock. A mock leaves no trace on the
network, so the test's patches are read at the end of its call, while they are still in place:
``setattr`` by pytest's ``monkeypatch``, pytest-mock's ``mocker`` and ``unittest.mock`` patchers
started with ``start()``. Any replaced attribute counts (the OpenAI SDK's ``create``, or the
product's own function that calls it), so a plain test that patches something reads as "not
swapped" and says which attribute; ``@pytest.mark.slm(calls=0)`` then says it makes no model call.
A ``with mock.patch(...)`` block or a ``@mock.patch`` decorator has ended by then, and an object
replaced by hand (``client.chat = Fake()``) is not seen: such a test reads as ``no_calls``. What
patches Mock itself (pytest-mock's wrappers of its ``assert_*``) is no test's mock.
The private state read here is in ``pytest_slam/util/foreign.py``, each with its version test.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from pytest_slam.util.foreign import monkeypatched, started_mock_patchers

# The mocking library's own modules: a patch of Mock itself is never a test's mock of the product
# (pytest-mock wraps Mock's ``assert_*`` methods for the whole run, with started patchers).
MOCK_MODULES = ("unittest.mock", "mock")


def patches(item: pytest.Item) -> list[str]:
    """``module.attr`` (or ``module.Class.attr``) for each attribute the test has replaced now."""
    funcargs: dict[str, Any] = getattr(item, "funcargs", {})
    found = [f"{_where(t)}.{name}" for t, name in monkeypatched(funcargs.get("monkeypatch"))]
    for patcher in started_mock_patchers():  # pytest-mock's ``mocker`` starts its patchers so
        try:
            target = patcher.getter()
        except Exception:  # a target that no longer imports: named by its attribute alone
            target = None
        where = _where(target)
        if any(where.startswith(f"{module}.") for module in MOCK_MODULES):
            continue
        found.append(f"{where}.{getattr(patcher, 'attribute', '?')}")
    return list(dict.fromkeys(found))


def _where(obj: object) -> str:
    if isinstance(obj, ModuleType):
        return obj.__name__
    cls = obj if isinstance(obj, type) else type(obj)
    return f"{cls.__module__}.{cls.__qualname__}"
