"""Where golden files live by default, and why: a flat-layout product must still build.

The old default ``fixtures/slam`` sat at the repository root, where setuptools' flat-layout discovery
took ``fixtures`` for a second top-level package and ``pip install .`` failed. The default is now
``__slam__`` (skipped by that discovery); a project whose goldens are still in ``fixtures/slam`` keeps
using them until it moves them. Real pytest runs (pytester) against loopback fakes, and a real
``pip wheel`` of the product (no network: no build isolation, no index).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from patience import patient

from pytest_slam.testing import FakeOpenAI

APP = """
from openai import OpenAI

client = OpenAI()

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content
"""
SUITE = """
import pytest, app

pytestmark = pytest.mark.slm

def test_ask():
    assert app.ask("How do I get a refund?")
"""
MOVE = "git mv fixtures/slam __slam__"


def flat_product(pytester: pytest.Pytester, reference: FakeOpenAI, candidate: FakeOpenAI,
                 extra: str = "") -> None:  # fmt: skip
    """``app/`` at the root, ``tests/`` beside it, and a pyproject with no packages config."""
    (pytester.path / "app").mkdir()
    (pytester.path / "app" / "__init__.py").write_text(APP)
    (pytester.path / "tests").mkdir()
    (pytester.path / "tests" / "test_app.py").write_text(SUITE)
    pytester.makefile(".toml", pyproject=f"""
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "app"
version = "0.1.0"

[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]
reference = "{reference.base_url}#gpt-4"
{extra}
[tool.slam.models.mini]
base_url = "{candidate.base_url}"
""")  # fmt: skip


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


@pytest.fixture
def mini() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as fake:
        yield fake


def test_a_flat_layout_product_with_committed_goldens_still_builds(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI, tmp_path: Path
) -> None:
    flat_product(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=1)
    golden = pytester.path / "__slam__" / "gpt-4" / "tests" / "test_app.json"
    entries = json.loads(golden.read_text())["entries"]
    assert [e["answers"][0]["text"] for e in entries.values()] == [
        "GPT-4 says: How do I get a refund?"
    ]
    assert not (pytester.path / "fixtures").exists()
    scratch = pytester.path / ".slam"  # locks and the stale report, beside the goldens
    assert (scratch / ".gitignore").read_text().splitlines()[-1] == "*"

    dist = tmp_path / "dist"
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
            "--no-index", "-w", str(dist), str(pytester.path)]  # fmt: skip
    built = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=patient(300))
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("app-0.1.0-*.whl")
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert tops == {"app", "app-0.1.0.dist-info"}  # the goldens are not shipped either


def test_goldens_in_the_old_default_folder_are_still_used(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, mini: FakeOpenAI
) -> None:
    flat_product(pytester, fake_gpt4, mini, extra='golden_dir = "fixtures/slam"')
    run(pytester, "--slm-record=new").assert_outcomes(passed=1)
    assert (pytester.path / "fixtures/slam/gpt-4/tests/test_app.json").is_file()
    recorded = fake_gpt4.hits

    config = (pytester.path / "pyproject.toml").read_text()
    (pytester.path / "pyproject.toml").write_text(
        config.replace('golden_dir = "fixtures/slam"', "")
    )
    replay = run(pytester)  # golden_dir not set: the old folder, read as before
    replay.assert_outcomes(passed=1)
    assert fake_gpt4.hits == recorded and not (pytester.path / "__slam__").exists()
    assert replay.stdout.str().count(MOVE) == 1

    explicit = run(pytester, "--slm-golden-dir=fixtures/slam")  # an explicit folder: no advice
    explicit.assert_outcomes(passed=1)
    assert MOVE not in explicit.stdout.str() and fake_gpt4.hits == recorded

    (pytester.path / "__slam__").mkdir()  # moved (or a new one made): the default wins again
    missed = run(pytester)
    missed.assert_outcomes(failed=1)
    assert "no golden answer of reference 'gpt-4'" in missed.stdout.str()
    assert MOVE not in missed.stdout.str()
