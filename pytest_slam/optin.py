"""Which tests take part: the opt-in rules and the model parametrization.

A test opts in when it uses ``slm_model`` or ``gpt4_reference``; when it, its class or its module is
marked ``slm``; when its folder is listed in ``[tool.slam] paths`` or the ``slm_paths`` ini key; or when a
``conftest.py`` above it sets ``slm_opt_in = True``. Everything else is left exactly as it was.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = ("slm_model", "gpt4_reference")
MARK = "slm"
CONFTEST_FLAG = "slm_opt_in"


def opted_in(collector: pytest.Collector, obj: object, paths: list[Path]) -> bool:
    """Whether a test function about to be collected takes part (its marks, its folder)."""
    own = getattr(obj, "pytestmark", [])
    if any(getattr(m, "name", None) == MARK for m in (own if isinstance(own, list) else [own])):
        return True
    if collector.get_closest_marker(MARK) is not None:
        return True
    path = Path(str(collector.path)).resolve()
    if any(path.is_relative_to(folder) for folder in paths):
        return True
    return _conftest_opt_in(collector.config, path)


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
