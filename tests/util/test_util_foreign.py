"""Each private read of another library (pytest_slam/util/foreign.py), against its installed version.

These are the version tests: a release that renames one of these attributes turns the feature
that reads it quietly off (the helpers fall back), so each test here asserts what the attribute
gives on the real library, and names the library and its version when it does not.
"""

from __future__ import annotations

import importlib.metadata
import json
import unittest.mock
from pathlib import Path

import pytest

from pytest_slam.util import foreign


def _version(dist: str) -> str:
    return f"{dist} {importlib.metadata.version(dist)}"


class _Target:
    value = "original"


def test_pytest_location_line_names_a_test_as_its_verbose_line_does(
    pytestconfig: pytest.Config,
) -> None:
    terminal = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    assert terminal is not None
    locate = foreign.location_line(terminal)
    assert locate is not None, f"{_version('pytest')}: TerminalReporter._locationline is gone"
    line = locate("tests/test_x.py::test_y", "tests/test_x.py", 3, "test_y")
    assert "test_x.py::test_y" in line


def test_pytest_location_line_with_vv_names_where_the_test_was_defined(
    pytester: pytest.Pytester,
) -> None:
    """With ``-vv`` pytest adds where a test was defined when that is another file (pytest 9.2
    reads it off a structured node id: a string there was an INTERNALERROR after a heartbeat)."""
    config = pytester.parseconfigure("-vv")
    terminal = config.pluginmanager.get_plugin("terminalreporter")
    locate = foreign.location_line(terminal)
    assert locate is not None, f"{_version('pytest')}: TerminalReporter._locationline is gone"
    line = locate("tests/test_x.py::test_y", "tests/helpers.py", 3, "test_y")
    assert line.startswith("tests/test_x.py::test_y <- "), line
    assert "helpers.py" in line


def test_pytest_progress_filler_is_there_when_the_progress_is_shown(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeconftest(
        """
        from pytest_slam.util import foreign

        def pytest_terminal_summary(terminalreporter):
            fill = foreign.progress_filler(terminalreporter)
            terminalreporter.write_line(f"FILLER {fill is not None}")
        """
    )
    pytester.makepyfile("def test_a(): pass")
    shown = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:slam")
    assert "FILLER True" in shown.stdout.str(), _version("pytest")
    hidden = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:slam", "-o", "console_output_style=classic"
    )
    assert "FILLER False" in hidden.stdout.str(), _version("pytest")


def test_pytest_tmp_path_factory_is_the_sessions_before_any_fixture(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> None:
    found = foreign.tmp_path_factory(pytestconfig)
    assert found is tmp_path_factory, f"{_version('pytest')}: Config._tmp_path_factory moved"


def test_pytest_monkeypatch_lists_each_setattr_it_holds() -> None:
    patch = pytest.MonkeyPatch()
    try:
        patch.setattr(_Target, "value", "patched")
        assert foreign.monkeypatched(patch) == [(_Target, "value")], _version("pytest")
    finally:
        patch.undo()
    assert foreign.monkeypatched(patch) == []


def test_mock_started_patchers_are_the_ones_stopall_would_stop() -> None:
    patcher = unittest.mock.patch.object(_Target, "value", "patched")
    assert patcher not in foreign.started_mock_patchers()
    patcher.start()
    try:
        assert patcher in foreign.started_mock_patchers(), "unittest.mock._patch._active_patches"
    finally:
        patcher.stop()
    assert patcher not in foreign.started_mock_patchers()


def test_pytest_mock_patchers_are_started_mock_patchers(pytester: pytest.Pytester) -> None:
    """Why the mocker needs no read of its own: its patchers are ``unittest.mock``'s, started."""
    pytester.makepyfile(
        """
        from pytest_slam.util import foreign

        class Target:
            value = 1

        def test_mocker(mocker):
            before = foreign.started_mock_patchers()  # pytest-mock's own, for the whole run
            mocker.patch.object(Target, "value", 2)
            started = [p for p in foreign.started_mock_patchers() if all(p is not b for b in before)]
            assert [(p.getter(), p.attribute) for p in started] == [(Target, "value")]
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:slam")
    result.assert_outcomes(passed=1)


def test_argparse_subcommands_are_the_parsers_subparsers() -> None:
    import argparse

    top = argparse.ArgumentParser(prog="slam")
    commands = top.add_subparsers()
    golden = commands.add_parser("golden")
    golden.add_subparsers().add_parser("prune")
    found = foreign.subcommands(top)
    assert list(found) == ["golden"] and found["golden"] is golden, "argparse _actions moved"
    assert list(foreign.subcommands(golden)) == ["prune"]
    assert foreign.subcommands(argparse.ArgumentParser()) == {}


def test_hypothesis_settings_set_here_are_the_ones_a_given_test_runs_with() -> None:
    from hypothesis import given, settings, strategies

    seen: list[int] = []

    @settings(max_examples=3, database=None)
    @given(strategies.integers())
    def counted(x: int) -> None:
        seen.append(x)

    current = foreign.hypothesis_settings(counted)
    assert current is not None and current.max_examples == 3, _version("hypothesis")
    foreign.set_hypothesis_settings(counted, settings(parent=current, max_examples=7))
    counted()
    assert len(seen) == 7, f"{_version('hypothesis')} did not run with the settings set"


def test_httpx_transport_pool_is_a_plain_connection_pool() -> None:
    httpx = pytest.importorskip("httpx2")
    transport = httpx.HTTPTransport()
    try:
        assert type(foreign.httpx_pool(transport)).__name__ == "ConnectionPool", _version("httpx2")
    finally:
        transport.close()


def test_vcrpy_stubs_name_the_class_they_stand_in_for(tmp_path: Path) -> None:
    import http.client

    import vcr

    real = http.client.HTTPConnection
    assert foreign.vcr_stub_base(real) is real
    with vcr.use_cassette(str(tmp_path / "c.yaml")):
        stub = http.client.HTTPConnection
        assert stub.__module__.startswith("vcr."), f"{_version('vcrpy')} no longer stubs it"
        assert foreign.vcr_stub_base(stub) is real, _version("vcrpy")


def test_xdist_pending_are_the_tests_a_worker_was_handed_and_has_not_run(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        test_three="""
        import json, pytest
        from pytest_slam.util import foreign

        def test_a(pytestconfig, tmp_path_factory):
            seen = foreign.xdist_pending(pytestconfig)
            (tmp_path_factory.getbasetemp().parent / "seen.json").write_text(json.dumps(seen))

        def test_b(): pass

        def test_c(): pass
        """
    )
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "1", "-p", "no:randomly")
    result.assert_outcomes(passed=3)
    [seen] = pytester.path.parent.glob("**/seen.json") or [None]
    found = json.loads(seen.read_text()) if seen else None
    # the next test at least (xdist hands a worker more as it finishes), never one already run
    assert found and 1 in found and set(found) <= {1, 2}, f"{_version('pytest-xdist')}: {found}"


def test_pytest_terminal_writer_file_is_the_stream_it_writes_to(
    pytestconfig: pytest.Config,
) -> None:
    import io

    from _pytest._io import TerminalWriter

    stream = io.StringIO()
    assert foreign.writer_file(TerminalWriter(stream)) is stream, _version("pytest")
    assert foreign.writer_file(pytestconfig.get_terminal_writer()) is not None, _version("pytest")
