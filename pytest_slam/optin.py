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


def opted_in(metafunc: pytest.Metafunc, paths: list[Path]) -> bool:
    if any(name in metafunc.fixturenames for name in FIXTURES):
        return True
    if metafunc.definition.get_closest_marker(MARK) is not None:
        return True
    path = Path(str(metafunc.definition.path)).resolve()
    if any(path.is_relative_to(folder) for folder in paths):
        return True
    return _conftest_opt_in(metafunc.config, path)


def _conftest_opt_in(config: pytest.Config, path: Path) -> bool:
    for plugin in config.pluginmanager.get_plugins():
        file = getattr(plugin, "__file__", None)
        if not file or Path(file).name != "conftest.py":
            continue
        if getattr(plugin, CONFTEST_FLAG, False) and path.is_relative_to(Path(file).resolve().parent):
            return True
    return False


def parametrize(metafunc: pytest.Metafunc, names: list[str]) -> None:
    """Run the test once per model, ids being the model names, even if it never names the fixture."""
    if "slm_model" not in metafunc.fixturenames:
        # The closure list is the item's own: adding the name makes pytest set the fixture up.
        metafunc.fixturenames.append("slm_model")
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
