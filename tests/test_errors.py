"""One exception root: every exception class of the package derives from ``SlamError`` with a kind.

The classes are found by importing every module of the package, so a class added later without the
root (or with a kind outside ``errors.KINDS``) fails here. The single-line paths that catch the
root (``slam``'s main, the plugin's configure) are run for real: a ``slam`` command and a pytest
run each print one line for an error of a known kind.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
import report_helpers as synth

import pytest_slam
from pytest_slam.cli import main
from pytest_slam.errors import KINDS, SlamError
from pytest_slam.project import from_table, read_table
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import write_json
from pytest_slam.swap.models import resolve


def exception_classes() -> list[type[BaseException]]:
    """Every exception class defined at the top of a module of the package, the root aside
    (``__main__`` is not imported: importing it runs the command)."""
    found: list[type[BaseException]] = []
    for info in pkgutil.walk_packages(pytest_slam.__path__, "pytest_slam."):
        if info.name.rsplit(".", 1)[-1] == "__main__":
            continue
        module = importlib.import_module(info.name)
        for obj in vars(module).values():
            if (
                inspect.isclass(obj)
                and issubclass(obj, BaseException)
                and obj.__module__ == module.__name__
                and obj is not SlamError
            ):
                found.append(obj)
    return found


CLASSES = exception_classes()


def test_the_walk_finds_the_package_s_exception_classes() -> None:
    names = {cls.__qualname__ for cls in CLASSES}
    # a few from different wings: the walk reaches every wing, nested packages included
    assert {"SettingsError", "GoldenError", "EngineError", "ReportError", "JudgeNotCached"} <= names
    assert len(CLASSES) >= 30


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_every_exception_class_derives_from_the_root_with_a_declared_kind(
    cls: type[BaseException],
) -> None:
    assert issubclass(cls, SlamError), f"{cls.__module__}.{cls.__qualname__} lacks SlamError"
    assert cls.kind in KINDS, f"{cls.__qualname__}.kind = {cls.kind!r}"


def test_every_declared_kind_is_some_class_s_kind() -> None:
    """The set is what the classes say, no more: a kind nothing raises is not one to match on."""
    assert {cls.kind for cls in CLASSES if issubclass(cls, SlamError)} == set(KINDS)


def test_a_kind_outside_the_set_fails_where_the_class_is_declared() -> None:
    with pytest.raises(TypeError, match="kind 'oops' is not one of"):

        class Oops(SlamError, kind="oops"):
            pass


def test_the_bases_an_error_had_before_the_root_still_catch_it() -> None:
    """``except ValueError`` and the like, written before the root, catch what they caught."""
    by_name = {cls.__qualname__: cls for cls in CLASSES}
    before = {
        "SettingsError": ValueError,
        "ModelSpecError": ValueError,
        "ConfigError": ValueError,
        "NotJson": ValueError,
        "NotCarried": ValueError,
        "MissingGolden": LookupError,
        "ReferenceFailed": RuntimeError,
        "EngineError": RuntimeError,
        "MissingExtra": ImportError,
        "EquivalenceError": AssertionError,
        "EgressBlocked": ConnectionRefusedError,
        "UpstreamUnreachable": ConnectionError,
        "UpstreamTimeout": ConnectionError,
        "JudgeUnjudged": by_name["ScorerError"],
        "GoldenReferenceMismatch": by_name["GoldenError"],
    }
    for name, base in before.items():
        assert issubclass(by_name[name], base), name
    blocked = by_name["EgressBlocked"](111, "refused")  # an OSError still: errno for HTTP clients
    assert (blocked.errno, blocked.kind) == (111, "egress")


def test_slam_prints_one_line_for_an_error_a_command_leaves_uncaught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``slam rescore`` resolves the judge the table names; an unknown one (kind "model") reaches
    the command line's root catch: one line, exit 2, no traceback."""
    outcomes = synth.outcomes()
    write_json(tmp_path / "run.json", aggregate(outcomes, synth.run_info()), outcomes)
    (tmp_path / "pyproject.toml").write_text('[tool.slam]\njudge = "no-such-judge"\n')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SlamError) as raised:
        resolve("no-such-judge", {})
    assert raised.value.kind == "model"
    status = main(["rescore", "run.json"])
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err
    assert err.splitlines() == [f"slam rescore: {raised.value}"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pyproject.toml", "run.json"]


@pytest.mark.parametrize(
    ("toml", "kind"),
    [('samples = "three"', "config"), ('judge = "no-such-judge"', "model")],
    ids=["config", "model"],
)
def test_a_pytest_run_prints_one_line_for_an_error_of_each_kind_at_configure(
    pytester: pytest.Pytester, toml: str, kind: str
) -> None:
    pytester.makefile(".toml", pyproject=f"[tool.slam]\n{toml}\n")
    pytester.makepyfile(test_x="import pytest\npytestmark = pytest.mark.slm\ndef test_x(): pass\n")
    with pytest.raises(SlamError) as raised:  # the error the run meets, raised by the same code
        settings = from_table(read_table(pytester.path / "pyproject.toml"), root=pytester.path)
        resolve(settings.judge, settings.model_table)
    assert raised.value.kind == kind
    result = pytester.runpytest("-p", "no:cacheprovider")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, out
    assert "Traceback" not in out and "INTERNALERROR" not in out, out
    lines = [line for line in out.splitlines() if "pytest-slam" in line]
    assert lines == [f"ERROR: pytest-slam: {raised.value}"], out


def test_the_kinds_are_short_words_with_a_meaning() -> None:
    for kind, meaning in KINDS.items():
        assert kind.isalpha() and kind.islower() and len(kind) <= 12, kind
        assert meaning and "\n" not in meaning
