"""pytest-slam's pytest hooks and fixtures. Each hook is a few lines that hand off to the session's
role objects (run/start/session.py says which owns what); pytest-slam's own hooks are in
run/inputs/hookspecs.py.

Importing this module costs nothing: the openai SDK, engines and the proxy are imported and started only
when the run is enabled (``--slm-models`` or a ``[tool.slam]`` table) and a process runs tests.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING

import pytest

from pytest_slam.errors import SlamError
from pytest_slam.run.inputs import options
from pytest_slam.run.test import optin

if TYPE_CHECKING:  # loaded at configure time, so importing the plugin costs nothing
    from pytest_slam.run.start.session import SlamSession
    from pytest_slam.run.wired.fixtures import ReferenceClient, SlamModel

STASH: pytest.StashKey[SlamSession] = pytest.StashKey()
MARKERS = (
    "slm: run this test once per selected model, with its OpenAI calls swapped to that model; "
    "slm(calls=0): it makes no model call on purpose; slm(swap=False): keep it on the original "
    "endpoint, run once; slm(reference=False): no golden answer to pair with",
    "slm_equivalence(by='fuzzy', at_least=None, **options): how this test's answers are compared "
    "with the reference's",
    "slm_budget(e2e_ms=None, ttft_ms=None, tpot_ms=None, cost_usd=None, completion_tokens=None): "
    "per-call limits for this test",
)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """pytest-slam's own hooks, for a project's conftest.py to implement."""
    from pytest_slam.run.inputs import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("slam", "pytest-slam: model-swap regression testing")
    options.add_options(group.addoption)
    parser.addini(
        "slm_paths",
        type="paths",
        default=[],
        help="Folders whose tests run once per model (opted in to pytest-slam)",
    )
    parser.addini(
        options.ALLOWED_HOSTS_INI,
        default="",
        help=f"Hosts opted-in tests may still reach ({options.ALLOWED_HOSTS} overrides it)",
    )
    parser.addini(
        "slm_heartbeat",
        default="",
        help="Seconds after which a model call still running is named, again every as many "
        "(default 10; 0: off; --slm-heartbeat overrides it)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    from pytest_slam.run.start.startup import configure

    try:
        slam = configure(config)
    except (SlamError, ValueError) as exc:  # any of ours, of any kind: one line, no traceback
        raise pytest.UsageError(f"pytest-slam: {exc}") from None
    config.stash[STASH] = slam
    # Reports arrive here from xdist workers too; only the controller collects and writes them.
    config.pluginmanager.register(slam, "slam-session")
    from pytest_slam.run.workers.shardvisits import PLUGIN, ShardIds

    config.pluginmanager.register(ShardIds(), PLUGIN)  # node ids for the report's visits
    if config.pluginmanager.hasplugin("xdist"):
        from pytest_slam.run.start.xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(slam), "slam-xdist")
    if slam.role != "worker":
        from pytest_slam.run.end.lastline import LastLine

        config.pluginmanager.register(LastLine(slam.summary), "slam-last-line")


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    """Engines start before xdist starts its workers, so workers are handed their URLs."""
    slam = session.config.stash.get(STASH, None)
    if slam is not None:
        slam.session_start()


def pytest_unconfigure(config: pytest.Config) -> None:
    slam = config.stash.get(STASH, None)
    if slam is not None:
        slam.close()


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> None:
    """Before pytest builds a test's fixture list: opted-in tests get the model fixture."""
    slam = collector.config.stash.get(STASH, None)
    if slam is None or not callable(obj) or not collector.istestfunction(obj, name):
        return
    if optin.opted_in(collector, obj, slam.selection.opt_in_paths):
        optin.request_model_fixture(obj)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    slam = metafunc.config.stash.get(STASH, None)
    if slam is not None and "slm_model" in metafunc.fixturenames:
        slam.selection.parametrize(metafunc)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    config.stash[STASH].selection.collected(items)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        items[0].config.stash[STASH].selection.deselected([i.nodeid for i in items])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    slam = item.config.stash[STASH]
    if not slam.is_swapped(item):
        return (yield)
    return (yield from slam.entry.run_test(item))


@pytest.hookimpl(wrapper=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Generator[None, object, object]:
    """Around a swapped test's function: ``--slm-repeat`` runs and the obtained-answer writer."""
    slam = pyfuncitem.config.stash.get(STASH, None)
    if slam is None or not slam.is_swapped(pyfuncitem):
        return (yield)
    from pytest_slam.run.start.repeat import around_call

    return (yield from around_call(slam, pyfuncitem))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    slam = item.config.stash[STASH]
    product_exception = slam.entry.shorten(item, call)
    try:
        report = yield
    finally:
        if product_exception is not None:  # pytest_exception_interact (--pdb) gets the real one
            call.excinfo = product_exception
    crash = product_exception.exconly(tryshort=True) if product_exception is not None else None
    slam.entry.annotate(item, report, crash)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    slam = session.config.stash.get(STASH, None)
    if slam is not None:
        session.exitstatus = slam.session_finish(session, exitstatus)


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    slam = config.stash.get(STASH, None)
    if slam is None or slam.role == "worker":
        return
    lines = list(slam.summary.lines)
    if lines:
        from pytest_slam.report.terminal import fit_lines, terminal_width
        from pytest_slam.run.start.progress import is_terminal

        terminalreporter.ensure_newline()
        terminalreporter.section("pytest-slam", sep="=")
        # at a terminal a long line wraps under its indent, its words (paths, ids) whole; a CI
        # log keeps each line whole, one fact a line
        wrap = is_terminal(config.get_terminal_writer())
        width = terminal_width(config)
        for line in lines:
            for part in fit_lines([line], width) if wrap and "\n" not in line else [line]:
                terminalreporter.write_line(part)


@pytest.hookimpl(optionalhook=True)
def pytest_recording_configure(config: pytest.Config, vcr: object) -> None:
    """pytest-recording opens a cassette: calls to this process's swap proxy stay out of it."""
    slam = config.stash.get(STASH, None)
    proxy = getattr(slam, "proxy", None)
    if proxy is not None:
        from pytest_slam.swap.cassettes import keep_out

        keep_out(vcr, f"{proxy.origin}/{proxy.secret}/")


@pytest.fixture
def slm_model(request: pytest.FixtureRequest) -> Generator[SlamModel, None, None]:
    """The candidate model this test run uses: clients, ``chat()`` and the ``calls`` made."""
    slam = request.config.stash[STASH]
    yield from slam.entry.enter_test(request.node, getattr(request, "param", None))


@pytest.fixture
def gpt4_reference(request: pytest.FixtureRequest, slm_model: SlamModel) -> ReferenceClient:
    """The reference model's golden answers: clients, ``chat()`` and ``answer_for(call)``."""
    return request.config.stash[STASH].entry.reference_client(request.node)
