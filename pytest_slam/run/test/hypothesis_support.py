"""Opted-in ``@given`` tests get settings suited to slow model calls.

No deadline (a model call takes hundreds of milliseconds), 10 examples unless the test chose its own,
and no health-check failure for the function-scoped model fixtures: the swap context is per test, and
each example's calls are recorded on it. Applied the way Hypothesis' own pytest plugin adjusts
settings for parametrized tests, and only when Hypothesis is already imported.
"""

from __future__ import annotations

import sys

import pytest

from pytest_slam.util.foreign import hypothesis_settings, set_hypothesis_settings

SLOW_EXAMPLES = 10


def adjust(item: pytest.Item) -> None:
    obj = getattr(item, "obj", None)  # a Function's test function; other items have none
    if "hypothesis" not in sys.modules or not getattr(obj, "is_hypothesis_test", False):
        return
    from hypothesis import HealthCheck, settings

    default = settings.default
    fn: object = getattr(obj, "__func__", obj)
    current = hypothesis_settings(fn) or default
    if current is None or default is None:  # no profile loaded: Hypothesis applies its own
        return
    adjusted = settings(
        parent=current,
        deadline=None,
        max_examples=SLOW_EXAMPLES
        if current.max_examples == default.max_examples
        else current.max_examples,
        suppress_health_check={HealthCheck.function_scoped_fixture, HealthCheck.too_slow}
        | set(current.suppress_health_check),
    )
    set_hypothesis_settings(fn, adjusted)
