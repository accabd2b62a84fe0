"""The suite's Hypothesis profile (conftest.py): a busy machine never fails a property test."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

SLOW_DRAWS = """
import time
from hypothesis import given, settings, strategies as st

slow = st.integers().map(lambda n: time.sleep(0.5) or n)  # a draw as slow as on two busy cores

@settings(max_examples=5)
@given(slow)
def test_slow(n):
    assert isinstance(n, int)
"""


def test_the_loaded_profile_allows_slow_machines() -> None:
    assert settings.default.deadline is None
    assert HealthCheck.too_slow in settings.default.suppress_health_check


def test_ci_profile_repeats_the_same_examples() -> None:
    ci = settings.get_profile("ci")
    assert ci.derandomize and ci.deadline is None
    assert HealthCheck.too_slow in ci.suppress_health_check


def test_slow_draws_pass_with_the_profile_and_fail_without(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Hypothesis loads its own forgiving "ci" profile when it sees CI=true (as CI sets it):
    # the run "without" must look like a developer's machine.
    for name in ("CI", "HYPOTHESIS_PROFILE", "GITHUB_ACTIONS", "TF_BUILD"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_slow=SLOW_DRAWS)
    with_profile = pytester.runpytest("-p", "no:slam")  # in this process: the profile applies
    with_profile.assert_outcomes(passed=1)
    without = pytester.runpytest_subprocess("-p", "no:slam")  # Hypothesis' own defaults
    without.assert_outcomes(failed=1)
    without.stdout.fnmatch_lines(["*FailedHealthCheck*"])


def test_waits_scale_with_the_load_or_the_factor_given(monkeypatch: pytest.MonkeyPatch) -> None:
    """patience.py: a bound on waiting grows on a busy machine (issue 51: a fixed 120 s
    subprocess timeout failed a test at load 20 that passes alone in 19 s)."""
    import os

    from patience import MOST, PATIENCE_ENV, patient

    monkeypatch.setenv(PATIENCE_ENV, "3")
    assert patient(120) == 360
    monkeypatch.delenv(PATIENCE_ENV)
    per_core = os.getloadavg()[0] / (os.cpu_count() or 1)
    assert patient(120) == pytest.approx(120 * min(MOST, max(1.0, per_core)), rel=0.5)
    assert 120 <= patient(120) <= 120 * MOST


def test_the_processes_the_suite_starts_keep_their_bytecode() -> None:
    """conftest.py: with PYTHONDONTWRITEBYTECODE in the shell, each inner pytest run compiled and
    assert-rewrote pytest-slam's modules again (about 1 s of CPU a run); they are cached."""
    import subprocess
    import sys

    from patience import patient

    code = "import sys; print(sys.dont_write_bytecode)"
    child = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=patient(60)
    )
    assert child.stdout.strip() == "False", child.stderr
    assert not sys.dont_write_bytecode  # and the in-process runs
