"""Which tests take part: the opt-in rules and the model parametrization.

A test opts in when it uses ``slm_model`` or ``gpt4_reference``; when it, its class or its module is
marked ``slm``; when its folder is listed in ``[tool.slam] paths`` or the ``slm_paths`` ini key; or when a
``conftest.py`` above it sets ``slm_opt_in = True``. Everything else is left exactly as it was.

``@pytest.mark.slm(swap=False)`` on a test (or class) exempts it from an opted-in module or folder:
it runs once, unparametrized, its calls passing through to the original endpoint (tests that expect
the real API's own errors). The closest ``slm`` mark decides.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = ("slm_model", "gpt4_reference")
MARK = "slm"
CONFTEST_FLAG = "slm_opt_in"


MARK_KWARGS = ("reference", "calls", "swap")


def opted_in(collector: pytest.Collector, obj: object, paths: list[Path]) -> bool:
    """Whether a test function about to be collected takes part (its marks, its folder)."""
    own = getattr(obj, "pytestmark", [])
    marks = [
        m for m in (own if isinstance(own, list) else [own]) if getattr(m, "name", None) == MARK
    ]
    closest = marks[-1] if marks else collector.get_closest_marker(MARK)
    if closest is not None:
        return closest.kwargs.get("swap", True) is not False
    path = Path(str(collector.path)).resolve()
    if any(path.is_relative_to(folder) for folder in paths):
        return True
    return _conftest_opt_in(collector.config, path)


def mark_problem(item: pytest.Item) -> str | None:
    """What is wrong with the test's ``slm`` mark, as one line naming the fix; None when right."""
    mark = item.get_closest_marker(MARK)
    if mark is None:
        return None
    unknown = sorted(set(mark.kwargs) - set(MARK_KWARGS))
    where = f"pytest-slam: {item.nodeid}: @pytest.mark.slm"
    if unknown:
        return f"{where} does not take {', '.join(unknown)}; it takes {', '.join(MARK_KWARGS)}"
    calls = mark.kwargs.get("calls", None)
    if calls is not None and (calls != 0 or isinstance(calls, bool)):
        return f"{where}(calls={calls!r}): only calls=0 (the test makes no model call) is meant"
    if mark.kwargs.get("swap", True) is False:
        return (
            f"{where}(swap=False) keeps the test on the original endpoint, but it uses the "
            "slm_model fixture; drop one of the two"
        )
    return None


def request_model_fixture(obj: object) -> None:
    """Make an opted-in test use ``slm_model`` even if it never names it, so it is parametrized."""
    pytest.mark.usefixtures("slm_model")(obj)


def _conftest_opt_in(config: pytest.Config, path: Path) -> bool:
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if not file or Path(file).name != "conftest.py":
            continue
        if getattr(plugin, CONFTEST_FLAG, False) and path.is_relative_to(
            Path(file).resolve().parent
        ):
            return True
    return False


def parametrize(metafunc: pytest.Metafunc, names: list[str]) -> None:
    """Run the test once per model; the ids are the model names."""
    metafunc.parametrize("slm_model", names, indirect=True, ids=names, scope="function")


def base_test_id(nodeid: str, model: str) -> str:
    """The nodeid without the model parameter: one test, compared across models."""
    head, sep, params = nodeid.partition("[")
    if not sep:
        return nodeid
    parts = params[:-1]
    for candidate in (f"-{model}", f"{model}-", model):
        if candidate in parts:
            parts = parts.replace(candidate, "", 1)
            break
    return f"{head}[{parts}]" if parts else head


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]
