"""The words users bring from neighbouring tools: pytest-recording's ``once`` and
``--allowed-hosts``, pytest-benchmark's ``--benchmark-compare-fail`` (as ``--slm-baseline-fail``).

Real pytest runs (pytester) of a product suite whose reference and candidate are FakeOpenAI servers
on loopback; the allowed host is a real TCP server on this machine, reached by its own non-loopback
address, so that the egress guard sees a connection off loopback and nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from slam_helpers import (
    MINI_PYPROJECT,
    PRODUCT,
    REPORTED_TESTS,
    Answers,
    said,
    write_pyproject,
)

from pytest_slam.run.inputs import options
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def project(
    pytester: pytest.Pytester, fake_gpt4: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[pytest.Pytester, Answers]]:
    monkeypatch.setenv("COLUMNS", "200")  # each summary line on one line
    answers = Answers()
    with FakeOpenAI(answers, model="gpt-4o-mini-2024-07-18") as candidate:
        pytester.makepyfile(product=PRODUCT, test_product=REPORTED_TESTS)
        pytester.makefile(".toml", pyproject=MINI_PYPROJECT.format(
            reference=fake_gpt4.base_url, candidate=candidate.base_url))  # fmt: skip
        yield pytester, answers


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("-p", "no:cacheprovider", *args)


def test_once_records_as_new_and_says_so_in_one_line(project: Any) -> None:
    pytester, _ = project
    first = run(pytester, "--slm-record=once")
    assert first.ret == 0, first.stdout.str()
    assert (
        "pytest-slam: --slm-record=once (pytest-recording's word) read as --slm-record=new; "
        "write that to say it in pytest-slam's words"
    ) in said(first)
    goldens = list((pytester.path / "__slam__").rglob("test_product.json"))
    assert len(goldens) == 1  # recorded, as new records what is missing
    replay = run(pytester)  # none: the goldens once wrote are what replay reads
    assert replay.ret == 0, replay.stdout.str()
    assert "read as" not in said(replay)


def test_a_record_mode_of_no_tool_is_a_usage_error_naming_the_three(project: Any) -> None:
    pytester, _ = project
    result = run(pytester, "--slm-record=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "*--slm-record: 'sometimes' is not a record mode: none (replay only), new (record what "
        "is missing) or all (re-record everything)"
    ])  # fmt: skip


def test_baseline_fail_sets_a_tolerance_over_the_table(project: Any) -> None:
    """The candidate's equivalence drops: a regression by the default tolerance, none when
    --slm-baseline-fail allows the drop; the latency tolerance comes from the command line too."""
    pytester, answers = project
    loose_latency = "p95_e2e_ms:60000"  # loopback timings on a busy machine: noise, not a change
    first = run(pytester, "--slm-record=new", "--slm-report=base.json")
    assert first.ret == 0, first.stdout.str()
    answers.good = False
    strict = run(pytester, "--slm-baseline=base.json", f"--slm-baseline-fail={loose_latency}")
    assert strict.ret == EXIT_GATE_FAILED, strict.stdout.str()
    strict.stdout.fnmatch_lines(["  - mini: equivalence_all_calls 1.00 -> *"])
    loose = run(
        pytester,
        "--slm-baseline=base.json",
        f"--slm-baseline-fail=equivalence:1,{loose_latency}",
    )
    assert loose.ret == 0, loose.stdout.str()
    assert "equivalence_all_calls 1.00 ->" not in loose.stdout.str()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("p95_e2e_ms:20%", {"latency_increase_pct": 20.0}),
        ("p95_e2e_ms:50", {"latency_increase_ms": 50.0}),
        ("equivalence:0.05, cost:10%", {"equivalence_drop": 0.05, "cost_increase_pct": 10.0}),
        ("latency_increase_ms:0", {"latency_increase_ms": 0.0}),
    ],
)
def test_baseline_fail_maps_onto_the_baseline_table(text: str, expected: dict[str, float]) -> None:
    assert options.baseline_tolerances(text) == expected


@pytest.mark.parametrize(
    "text", ["p95:20%", "cost:0.1", "equivalence:5%", "p95_e2e_ms:-1", "p95_e2e_ms:nan", "x", ""]
)
def test_baseline_fail_refuses_what_it_cannot_map(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="write METRIC:LIMIT"):
        options.baseline_fail(text)


def test_baseline_fail_is_a_usage_error_at_the_door(project: Any) -> None:
    pytester, _ = project
    result = run(pytester, "--slm-baseline-fail=p95:20")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--slm-baseline-fail: 'p95:20': write METRIC:LIMIT*"])


# -- --slm-allowed-hosts ----------------------------------------------------------------------------

REACH = """
import socket, pytest, product

pytestmark = pytest.mark.slm

def test_reach_the_server():
    assert product.ask("Hello?")
    with socket.create_connection(("{host}", {port}), timeout=10) as conn:
        conn.sendall(b"ping")
        assert conn.recv(4) == b"pong"
"""


def own_address() -> str:
    """This machine's address on its default route (a UDP connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # TEST-NET-3: a route, no packet
        except OSError:
            pytest.skip("this machine has no network interface but loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127.") or address == "0.0.0.0":
        pytest.skip("this machine has no network interface but loopback")
    return address


@pytest.fixture
def server() -> Iterator[tuple[str, int]]:
    """A real TCP server on every interface, answering pong to each ping."""
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                if conn.recv(4) == b"ping":
                    conn.sendall(b"pong")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield own_address(), listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def test_an_allowed_host_is_reached_and_an_other_blocked(
    pytester: pytest.Pytester, server: tuple[str, int]
) -> None:
    host, port = server
    with FakeOpenAI(answer="Hi", model="gpt-4o-mini") as candidate:
        pytester.makepyfile(product=PRODUCT, test_reach=REACH.format(host=host, port=port))
        write_pyproject(pytester, candidate.base_url)
        blocked = run(pytester, "--slm-block-network")
        blocked.assert_outcomes(failed=1)
        assert f"blocked a connection to {host}:{port}" in blocked.stdout.str()
        exact = run(pytester, "--slm-block-network", f"--slm-allowed-hosts=other.example,{host}")
        exact.assert_outcomes(passed=1)
        pattern = host.rsplit(".", 1)[0].replace(".", r"\.") + r"\.\d+"
        by_pattern = run(pytester, "--slm-block-network", f"--slm-allowed-hosts={pattern}")
        by_pattern.assert_outcomes(passed=1)
        by_ini = run(pytester, "--slm-block-network", "-o", f"slm_allowed_hosts=x.test {host}")
        by_ini.assert_outcomes(passed=1)
        counted = run(pytester)  # not blocked, not allowed: named as leaving the machine
        counted.assert_outcomes(passed=1)
        assert f"{host}:{port} from test_reach.py::test_reach_the_server" in said(counted)
        for allowed in (exact, by_pattern, by_ini):
            assert "left the machine" not in said(allowed) and "refused" not in said(allowed)


def test_a_broken_host_pattern_is_a_usage_error(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("-p", "no:cacheprovider", "--slm-allowed-hosts=db(")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--slm-allowed-hosts: 'db(' is not a host or a regular expression (missing )*"]
    )
