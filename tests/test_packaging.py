"""The sdist and wheel ship every file of the package that git would commit.

A subpackage that setuptools' discovery misses, or a data file (template, schema) missing from
``[tool.setuptools.package-data]``, works from a checkout and breaks only for users who install the
wheel; this builds both the way a release does (the wheel from the sdist) and compares file lists.
No network: the build runs without isolation, on this environment's setuptools.
"""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
from patience import patient

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "pytest_slam"


def _files_git_would_commit() -> list[str]:
    """Tracked files, plus new ones not ignored, that exist in the working tree now."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of the package's files to compare with")
    argv = ["git", "-C", str(ROOT), "ls-files", "--cached", "--others", "--exclude-standard", "-z"]
    listed = subprocess.run(argv, capture_output=True, check=True).stdout.decode().split("\0")
    return sorted(name for name in listed if name and (ROOT / name).is_file())


@pytest.fixture(scope="module")
def package_files() -> set[str]:
    return {name for name in _files_git_would_commit() if name.startswith(f"{PACKAGE}/")}


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clean copy of the checkout (no build/ or egg-info leftovers) built into sdist and wheel."""
    source = tmp_path_factory.mktemp("source")
    for name in _files_git_would_commit():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("dist")
    argv = [sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(source)]
    built = subprocess.run(argv, capture_output=True, text=True, timeout=patient(300))
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    return out


def _only(dist: Path, pattern: str) -> Path:
    (found,) = dist.glob(pattern)
    return found


def _sdist_names(dist: Path) -> set[str]:
    """The sdist's file names, without its top folder."""
    with tarfile.open(_only(dist, "*.tar.gz")) as sdist:
        return {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}


def test_the_wheel_ships_every_package_file(dist: Path, package_files: set[str]) -> None:
    names = zipfile.ZipFile(_only(dist, "*.whl")).namelist()
    shipped = {name for name in names if name.startswith(f"{PACKAGE}/")}
    assert sorted(package_files - shipped) == [], "missing from the wheel: add to package-data"
    assert sorted(shipped - package_files) == [], "in the wheel but not in git"


def test_the_sdist_ships_every_package_file(dist: Path, package_files: set[str]) -> None:
    names = _sdist_names(dist)
    assert sorted(package_files - names) == []


def test_the_sdist_carries_the_project_s_documents(dist: Path) -> None:
    """README, CHANGELOG, CONTRIBUTING and the docs site with its generator: a packager reads them
    from the sdist (MANIFEST.in), and the suite's docs tests read the pages."""
    names = _sdist_names(dist)
    assert {"README.md", "CHANGELOG.md", "CONTRIBUTING.md", "mkdocs.yml"} <= names
    pages = {name for name in _files_git_would_commit() if name.startswith("docs/")}
    assert "docs/generate.py" in pages and "docs/reference/cli.md" in pages
    assert sorted(pages - names) == [], "missing from the sdist: see MANIFEST.in"


def test_the_wheel_registers_the_plugin_and_the_command(dist: Path) -> None:
    with zipfile.ZipFile(_only(dist, "*.whl")) as wheel:
        (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
        parser = configparser.ConfigParser()
        parser.read_string(wheel.read(entry_points).decode())
    assert parser["pytest11"]["slam"] == "pytest_slam.plugin"
    assert parser["console_scripts"]["slam"] == "pytest_slam.cli:main"
