"""Shared fixtures for pytest-slam's own tests: a real llama.cpp engine, a faithful fake of the hosted
reference on loopback, and the real recorded data in ../shared/data.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]


def _load_the_sdk_transport() -> None:
    """Make the openai SDK import its lazily loaded HTTP modules now.

    pytester removes modules first imported during an in-process inner run; if the SDK's transport
    were first loaded there, later clients in this process would raise the transport's own errors
    instead of openai.APIConnectionError.
    """
    import openai

    client = openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-unused", max_retries=0)
    with contextlib.suppress(openai.APIConnectionError):
        client.models.list()


_load_the_sdk_transport()


def _let_ctrl_c_reach_the_runs_we_start() -> None:
    """Undo an inherited "ignore SIGINT", so the interrupt tests' pytest runs get a real Ctrl-C.

    A shell starts a background job (``cmd &`` in a script, nohup) with SIGINT ignored, and an
    ignored signal stays ignored across exec: every pytest run the suite starts would then shrug off
    the SIGINT its test sends. Python's own handler here is reset to the default on exec, so the
    children start as they would from a terminal.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_let_ctrl_c_reach_the_runs_we_start()


def _hypothesis_profiles() -> None:
    """Property tests that do not depend on how busy the machine is.

    Two cores shared with xdist workers and llama.cpp make a data draw slow now and then, which
    Hypothesis calls a failed ``too_slow`` health check or a missed deadline: neither is a bug in
    pytest-slam. ``ci`` (loaded when ``CI=true``) also draws the same examples on every run, so a
    CI failure reproduces; ``dev`` keeps drawing new ones. ``HYPOTHESIS_PROFILE`` picks either.
    """
    from hypothesis import HealthCheck, settings

    lenient = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
    settings.register_profile("dev", **lenient)
    settings.register_profile("ci", derandomize=True, database=None, print_blob=True, **lenient)
    default = "ci" if os.environ.get("CI", "").lower() in ("1", "true", "yes") else "dev"
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", default))


_hypothesis_profiles()

SMOLLM2_ID = "SmolLM2-135M-Instruct"


@pytest.fixture(scope="session", autouse=True)
def _compiled_once(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The suite's Python processes keep their compiled modules, even where the shell says not to.

    With PYTHONDONTWRITEBYTECODE set (some containers and agent shells set it), every pytest run the
    suite starts compiled pytest-slam's ~170 modules from source again, and pytest rewrote their
    asserts again (an entry-point plugin's modules are assert-rewritten): about 1 s of CPU per
    run (2.3 s with a cache, 3.4 s without, for an inner run of one test), over many hundreds of
    runs. Here they are cached under this session's temporary folder (pytest keeps the last
    three), so the checkout gets no ``__pycache__`` folders; the full-disk runs still set the
    variable themselves (disk_helpers.py).
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        yield  # bytecode is cached where Python caches it
        return
    before = (os.environ.pop("PYTHONDONTWRITEBYTECODE"), os.environ.get("PYTHONPYCACHEPREFIX"))
    saved = (sys.dont_write_bytecode, sys.pycache_prefix)
    prefix = str(tmp_path_factory.mktemp("pycache", numbered=False))
    os.environ["PYTHONPYCACHEPREFIX"] = prefix
    sys.dont_write_bytecode, sys.pycache_prefix = False, prefix  # the in-process runs too
    try:
        yield
    finally:
        sys.dont_write_bytecode, sys.pycache_prefix = saved
        os.environ["PYTHONDONTWRITEBYTECODE"] = before[0]
        if before[1] is None:
            os.environ.pop("PYTHONPYCACHEPREFIX", None)
        else:
            os.environ["PYTHONPYCACHEPREFIX"] = before[1]


@pytest.fixture(scope="session")
def smollm2_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real SmolLM2-135M llama.cpp server per test process, on 127.0.0.1."""
    from pytest_slam.swap.engines import start_engine
    from pytest_slam.swap.models import resolve

    spec = resolve("smollm2-135m")
    server = start_engine(spec, tmp_path_factory.mktemp("engine"), timeout_s=120)
    yield spec.base_urls[0]
    server.stop()


@pytest.fixture
def smollm2_endpoint(smollm2_url: str) -> str:
    """The shared engine as an inline endpoint spec, for inner pytest runs that need not start one."""
    return f"{smollm2_url}#{SMOLLM2_ID}"


@pytest.fixture
def fake_gpt4() -> Iterator[object]:
    """A faithful OpenAI-compatible stand-in for the hosted GPT-4 reference, on loopback."""
    from pytest_slam.testing import FakeOpenAI

    with FakeOpenAI(answer=lambda req: "GPT-4 says: " + req["messages"][-1]["content"]) as fake:
        yield fake


@pytest.fixture
def shared_data() -> Path:
    from slam_helpers import SHARED_DATA  # tests/ is on the path once a test module is collected

    if not SHARED_DATA.is_dir():
        pytest.skip(
            f"needs the recorded data in {SHARED_DATA} (../shared/data, or set SLAM_SHARED_DATA)"
        )
    return SHARED_DATA


@pytest.fixture(autouse=True)
def _no_outer_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Inner pytest runs must see the environment a user has, not an outer run's swap."""
    names = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "GITHUB_STEP_SUMMARY")
    for name in (*names, "SLAM_SHARD_KEY", "SLAM_SHARD_KEY_FILE"):  # a test that signs sets its own
        if name in os.environ:
            monkeypatch.delenv(name)
    # The suite's recording runs were written to record and compare in one run, as
    # --slm-with-candidates does; the tests of a reference-only recording (the default a user
    # gets: tests/plugin/test_plugin_record_reference_only.py) delete it.
    monkeypatch.setenv("SLAM_WITH_CANDIDATES", "1")


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, its inner runs without pytest-rerunfailures (its own test loads it again).

    That plugin opens a listening socket and a thread in every pytest run that has xdist and
    never closes them: each in-process inner run left one, and an xdist worker of this suite
    passed 1,024 open files. Set here, after pytester cleared ``PYTEST_ADDOPTS``.
    """
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:rerunfailures")
    return pytester
