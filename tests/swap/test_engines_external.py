"""An engine from a distribution outside pytest_slam, found by name, started, called and stopped.

The distribution (tests/ext_dist.py) declares its provider under the ``pytest_slam.engines`` entry
point group; its managed process is the faithful fake of a hosted API
(``python -m pytest_slam.testing.fake_openai``) under pytest-slam's own supervisor, so the run
really starts a server, the product's calls really reach it and the run really stops it.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from ext_dist import make_dist
from patience import patient

from pytest_slam.swap.engines import registry
from pytest_slam.swap.models import ModelSpecError, from_table

ENGINE = '''
"""A third-party engine: the fake OpenAI server as a managed process."""

import sys

from pytest_slam.swap.engines import Engine, ManagedProvider


class FakeServeEngine(Engine):
    kind = "fake-serve"

    def check_available(self):
        pass

    def command(self):
        answer = str(self.spec.engine_args.get("answer", "hello"))
        return [sys.executable, "-m", "pytest_slam.testing.fake_openai", "--port", str(self.port),
                "--answer", answer, "--model", self.spec.model_id]


class FakeServe(ManagedProvider):
    name = "fake-serve"
    engine = FakeServeEngine
'''

ANSWER = "served by the engine of another distribution"

PROJECT = """
[tool.slam]
candidates = ["ext"]
reference = "none"

[tool.slam.models.ext]
provider = "{provider}"
model = "ext-model"
engine = {{ answer = "{answer}" }}
"""

CALLS_IT = """
import json, os, openai, pytest

@pytest.mark.slm
@pytest.mark.parametrize("n", range(int(os.environ.get("EXT_N", "1"))))
def test_ask(slm_model, n):
    reply = openai.OpenAI().chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    (call,) = slm_model.calls
    with open(os.environ["EXT_SEEN"] + str(n), "w") as fh:
        json.dump({"text": reply.choices[0].message.content, "endpoint": call.endpoint}, fh)
"""


def _site(pytester: pytest.Pytester, dist: str, entry: str) -> Path:
    """The distribution, declaring ``entry`` -> the provider class, on this process's path."""
    site = make_dist(
        pytester.path / "site",
        dist,
        {f"{dist}/__init__.py": "", f"{dist}/engine.py": ENGINE},
        {registry.GROUP: {entry: f"{dist}.engine:FakeServe"}},
    )
    pytester.syspathinsert(site)
    return site


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.parametrize("by", ["entry point", "import path"])
def test_an_engine_of_another_distribution_serves_a_run_by_name_and_stops(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, by: str
) -> None:
    dist = "slamext_" + ("ep" if by == "entry point" else "path")
    _site(pytester, dist, "fake-serve-" + dist)
    provider = "fake-serve-" + dist if by == "entry point" else f"{dist}.engine:FakeServe"
    pytester.makefile(".toml", pyproject=PROJECT.format(provider=provider, answer=ANSWER))
    pytester.makepyfile(test_ext=CALLS_IT)
    monkeypatch.setenv("EXT_SEEN", str(pytester.path / "seen"))
    result = pytester.runpytest("-p", "no:cacheprovider")  # in process: this process owns it
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*engine ext: fake-serve, on http://127.0.0.1:*/v1, up in *"])
    call = json.loads((pytester.path / "seen0").read_text())
    assert call["text"] == ANSWER  # the product's call reached the engine the provider started
    port = int(call["endpoint"].rsplit(":", 1)[1].split("/")[0])
    assert not _port_open(port), "the run ended with the external engine still serving"


def test_under_xdist_the_controller_starts_the_external_engine_once_for_every_worker(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _site(pytester, "slamext_xdist", "fake-serve-xdist")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    pytester.makefile(".toml", pyproject=PROJECT.format(provider="fake-serve-xdist", answer=ANSWER))
    pytester.makepyfile(test_ext=CALLS_IT)
    monkeypatch.setenv("EXT_SEEN", str(pytester.path / "seen"))
    monkeypatch.setenv("EXT_N", "4")
    result = pytester.runpytest_subprocess("-p", "xdist", "-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=4)
    calls = [json.loads((pytester.path / f"seen{n}").read_text()) for n in range(4)]
    assert {c["text"] for c in calls} == {ANSWER}
    (endpoint,) = {c["endpoint"] for c in calls}  # one engine, shared by both workers
    port = int(endpoint.rsplit(":", 1)[1].split("/")[0])
    assert not _port_open(port)


def test_an_installed_engine_is_listed_and_a_misspelt_one_says_how_to_declare_one(
    pytester: pytest.Pytester,
) -> None:
    _site(pytester, "slamext_listed", "fake-serve-listed")
    assert "fake-serve-listed" in registry.known()
    assert registry.find("fake-serve-listed").managed
    with pytest.raises(ModelSpecError) as info:
        from_table("m", {"provider": "fake-serve-lsited"})
    line = str(info.value)
    assert "\n" not in line
    for part in (
        "[tool.slam.models.m] provider='fake-serve-lsited'",
        ", ".join([*registry.BUILTINS, "fake-serve-listed"]),  # built-ins first, as registered
        "entry point in group 'pytest_slam.engines'",
        "package.module:Class",
    ):
        assert part in line, line


def test_an_import_path_that_is_no_provider_says_why(pytester: pytest.Pytester) -> None:
    with pytest.raises(ModelSpecError, match=r"provider='os:getcwd' \(<built-in function getcwd> "):
        from_table("m", {"provider": "os:getcwd", "base_url": "http://x/v1"})
    with pytest.raises(ModelSpecError, match=r"'no_such_pkg\.x:P' \(it does not load: No module"):
        from_table("m", {"provider": "no_such_pkg.x:P"})


BROKEN = '''
"""A third-party engine with faults: its class raises when built, or its engine when started."""

from pytest_slam.swap.engines import Engine, ManagedProvider


class NoCuda(ManagedProvider):
    name = "no-cuda"

    def __init__(self):
        raise RuntimeError("this engine needs CUDA 13")


class NoGpuEngine(Engine):
    kind = "no-gpu"

    def check_available(self):
        pass

    def command(self):
        raise OSError("no GPU found")


class NoGpu(ManagedProvider):
    name = "no-gpu"
    engine = NoGpuEngine
'''

BROKEN_ORIGIN = (
    "(group pytest_slam.engines), of distribution slamext-broken 3.0: fix or upgrade "
    "slamext-broken (pip install -U slamext-broken), or set another provider in [tool.slam.models]"
)


def _broken(pytester: pytest.Pytester) -> None:
    site = make_dist(
        pytester.path / "site", "slamext-broken",
        {"slamext_broken/__init__.py": BROKEN},
        {registry.GROUP: {"no-cuda": "slamext_broken:NoCuda", "no-gpu": "slamext_broken:NoGpu"}},
        version="3.0",
    )  # fmt: skip
    pytester.syspathinsert(site)
    pytester.makepyfile(test_ext=CALLS_IT)


def test_an_engine_whose_class_raises_is_one_line_naming_its_distribution(
    pytester: pytest.Pytester,
) -> None:
    _broken(pytester)
    pytester.makefile(".toml", pyproject=PROJECT.format(provider="no-cuda", answer=ANSWER))
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    (line,) = [line for line in out.splitlines() if "pytest-slam" in line]
    assert line == (
        "ERROR: pytest-slam: engine provider 'no-cuda' raised when built: RuntimeError: this engine "
        "needs CUDA 13 (at slamext_broken/__init__.py:11); it is entry point no-cuda = "
        f"slamext_broken:NoCuda {BROKEN_ORIGIN}"
    )


def test_an_engine_that_raises_as_it_starts_fails_its_test_in_one_line_and_the_run_ends(
    pytester: pytest.Pytester,
) -> None:
    _broken(pytester)
    pytester.makefile(".toml", pyproject=PROJECT.format(provider="no-gpu", answer=ANSWER))
    result = pytester.runpytest("-p", "no:cacheprovider")
    # the test whose call started the engine (run/start/session.py)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    result.stdout.fnmatch_lines([
        "engine provider 'no-gpu' raised in start(): OSError: no GPU found (at "
        "slamext_broken/__init__.py:21); it is entry point no-gpu = slamext_broken:NoGpu "
        f"{BROKEN_ORIGIN}",
    ])  # fmt: skip


RUDE = '''
"""A third-party engine whose start() hangs, calls sys.exit, or returns no running engine."""

import sys
import time

from pytest_slam.swap.engines import ManagedProvider


class Hangs(ManagedProvider):
    name = "hangs"

    def start(self, spec, log_dir, timeout_s, slots=1, say=None, beat_s=0.0):
        time.sleep(600)  # waiting on a GPU queue that never frees


class Exits(ManagedProvider):
    name = "exits"

    def start(self, spec, log_dir, timeout_s, slots=1, say=None, beat_s=0.0):
        sys.exit(3)


class Returns42(ManagedProvider):
    name = "returns-42"

    def start(self, spec, log_dir, timeout_s, slots=1, say=None, beat_s=0.0):
        return 42
'''
RUDE_ORIGIN = (
    "(group pytest_slam.engines), of distribution slamext-rude 1.5: fix or upgrade slamext-rude"
)


@pytest.mark.parametrize(
    ("provider", "said"),
    [
        ("hangs", "engine provider 'hangs': start() did not return within 10.5 s ([tool.slam] "
                  "engine_timeout_s 0.5 s + 10 s); it is entry point hangs = slamext_rude:Hangs "
                  f"{RUDE_ORIGIN} (pip install -U slamext-rude), or set another provider in "
                  "[tool.slam.models], or raise engine_timeout_s"),
        ("exits", "engine provider 'exits' raised in start(): SystemExit: sys.exit(3) called (at "
                  "slamext_rude/__init__.py:*); it is entry point exits = slamext_rude:Exits "
                  f"{RUDE_ORIGIN}*"),
        ("returns-42", "engine provider 'returns-42': start() returned 42, not a running engine "
                       "(base_url, start_line(), stop(): pytest_slam.swap.engines.protocol."
                       f"Running); it is entry point returns-42 = slamext_rude:Returns42 {RUDE_ORIGIN}*"),
    ],
)  # fmt: skip
def test_an_engine_whose_start_hangs_exits_or_returns_junk_is_one_line_and_the_run_ends(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, provider: str, said: str
) -> None:
    site = make_dist(
        pytester.path / "site", "slamext-rude", {"slamext_rude/__init__.py": RUDE},
        {registry.GROUP: {"hangs": "slamext_rude:Hangs", "exits": "slamext_rude:Exits",
                          "returns-42": "slamext_rude:Returns42"}},
        version="1.5",
    )  # fmt: skip
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    project = PROJECT.format(provider=provider, answer=ANSWER)
    pytester.makefile(
        ".toml", pyproject=project.replace("[tool.slam]\n", "[tool.slam]\nengine_timeout_s = 0.5\n")
    )
    pytester.makepyfile(test_ext=CALLS_IT)
    # a subprocess: a hung start() is left behind on its thread in it, not in this process
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", timeout=patient(300))
    result.assert_outcomes(failed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in out and "Traceback" not in out, out
    result.stdout.fnmatch_lines([said])
