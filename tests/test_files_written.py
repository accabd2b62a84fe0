"""Files pytest-slam leaves behind: written whole by one writer, with the mode the umask asks for,
and engine logs under pytest's basetemp (so its retention removes them).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_slam.report import jsonreport
from pytest_slam.util.files import atomic_write, current_umask


@pytest.fixture
def umask() -> Iterator[object]:
    """Set the process umask for one test (subprocesses inherit it), then put it back."""
    old = os.umask(0o022)
    os.umask(old)

    def set_to(mask: int) -> None:
        os.umask(mask)

    try:
        yield set_to
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("mask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_a_new_file_gets_the_mode_the_umask_asks_for(tmp_path, umask, mask, mode) -> None:
    umask(mask)
    assert current_umask() == mask
    written = atomic_write(tmp_path / "sub" / "a.json", "{}\n")
    assert written.read_text() == "{}\n"
    assert _mode(written) == mode
    assert [p.name for p in written.parent.iterdir()] == ["a.json"]  # no temp file left


def test_a_rewritten_file_keeps_its_mode(tmp_path, umask) -> None:
    target = tmp_path / "a.json"
    target.write_text("old")
    target.chmod(0o640)
    umask(0o002)
    atomic_write(target, "new")
    assert (target.read_text(), _mode(target)) == ("new", 0o640)


def test_reports_use_the_package_writer() -> None:
    assert jsonreport.atomic_write is atomic_write


PASSING = "import pytest\n\n@pytest.mark.slm\ndef test_x(slm_model):\n    pass\n"


def test_reports_of_a_real_run_honor_the_umask(pytester: pytest.Pytester, umask) -> None:
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(test_x=PASSING)
    umask(0o002)
    result = pytester.runpytest_subprocess(
        "--slm-models=http://127.0.0.1:9/v1#nobody", "--slm-report=r.json", "--slm-html=r.html"
    )
    result.assert_outcomes(passed=1)
    assert _mode(pytester.path / "r.json") == 0o664
    assert _mode(pytester.path / "r.html") == 0o664


def test_engine_logs_go_under_pytests_basetemp(pytester: pytest.Pytester) -> None:
    bad = pytester.path / "broken.gguf"
    bad.write_bytes(b"this is not a gguf file")
    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    # a call starts the engine (a serial run starts engines at the first call they serve)
    pytester.makepyfile(test_x=PASSING.replace("    pass\n", "    slm_model.chat('hi')\n"))
    base = pytester.path / "base"
    result = pytester.runpytest_subprocess(f"--slm-models=llamacpp:{bad}", f"--basetemp={base}")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*Last lines of {base}/slam-engines*/engine-*.log:"])
    assert list(base.glob("slam-engines*/engine-*.log"))


def test_a_run_with_no_local_engine_makes_no_engine_log_folder(pytester: pytest.Pytester) -> None:
    from pytest_slam.testing import FakeOpenAI

    pytester.makefile(".toml", pyproject="[tool.slam]\nreference = 'none'\n")
    pytester.makepyfile(test_x=PASSING.replace("    pass\n", "    slm_model.chat('hi')\n"))
    base = pytester.path / "base"
    with FakeOpenAI(answer="hello", model="mini") as fake:
        result = pytester.runpytest_subprocess(
            f"--slm-models={fake.base_url}#mini", f"--basetemp={base}"
        )
        assert fake.hits == 1  # the call was answered: the engines were looked at, none needed
    result.assert_outcomes(passed=1)
    assert not list(base.glob("slam-engines*"))
