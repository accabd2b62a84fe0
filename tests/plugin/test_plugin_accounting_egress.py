"""What an opted-in test sends off the machine is named in the summary, and can be refused.

No network exists here and none may be used: every test below either refuses the connection
before any packet is sent (``--slm-block-network`` raises in the audit hook, before the DNS
lookup), or asks ``getaddrinfo`` for a numeric host only (``AI_NUMERICHOST``: a name fails at once,
nothing is sent), or calls the hook with an address and no socket at all.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT, said, write_pyproject

from pytest_slam.swap import egress
from pytest_slam.testing import FakeOpenAI

# A host no swap covers (the OpenAI and Azure hosts are redirected to the candidate at the transport).
RAW_POST = """
import sys, pytest, product
import httpx2 as httpx  # the HTTP client the openai SDK installs

pytestmark = pytest.mark.slm
NET = {"on": False}

def safety_net(event, args):
    # Added after pytest-slam's hook, so it runs only if that one let the lookup through.
    if NET["on"] and event == "socket.getaddrinfo" and args[0] == "gateway.example.com":
        raise RuntimeError("safety net: pytest-slam let a DNS lookup through")

def test_raw_post():
    assert product.ask("Hello?")  # the swap is in place, and with it pytest-slam's hook
    sys.addaudithook(safety_net)
    NET["on"] = True
    try:
        with pytest.raises(httpx.ConnectError, match="blocked a connection to gateway.example.com:443"):
            httpx.post("https://gateway.example.com/v1/chat/completions", json={}, timeout=2)
    finally:
        NET["on"] = False

@pytest.mark.slm(swap=False)
def test_an_exempt_test_is_left_alone():
    import socket
    with pytest.raises(socket.gaierror):  # AI_NUMERICHOST: fails at once, no lookup is sent
        socket.getaddrinfo("gateway.example.com", 443, flags=socket.AI_NUMERICHOST)
"""
LOOKUP = """
import socket, pytest, product

pytestmark = pytest.mark.slm

def test_lookup():
    assert product.ask("Hello?")
    with pytest.raises(socket.gaierror):  # AI_NUMERICHOST: fails at once, no lookup is sent
        socket.getaddrinfo("gateway.example.com", 443, flags=socket.AI_NUMERICHOST)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> Any:
    with FakeOpenAI(answer="Hi", model="gpt-4o-mini") as candidate:
        pytester.makepyfile(product=PRODUCT)
        write_pyproject(pytester, candidate.base_url)
        yield pytester


def egress_of(pytester: pytest.Pytester) -> dict[str, list[str]]:
    report = read_report(pytester.path / "r.json")
    return {o["nodeid"]: o["egress"] for o in report["outcomes"]}


def test_block_network_refuses_a_raw_post_and_names_the_host(project: pytest.Pytester) -> None:
    project.makepyfile(test_product=RAW_POST)
    result = project.runpytest(
        "-p", "no:cacheprovider", "--slm-block-network", "--slm-report=r.json"
    )
    result.assert_outcomes(passed=2)
    text = said(result)
    assert (
        "1 connection(s) were refused (--slm-block-network) during opted-in tests: "
        "gateway.example.com:443 from test_product.py::test_raw_post (mini)"
    ) in text
    assert "@pytest.mark.slm(swap=False)" in text
    assert egress_of(project) == {
        "test_product.py::test_raw_post[mini]": ["gateway.example.com:443 (blocked)"]
    }


def test_without_blocking_the_summary_names_what_left(project: pytest.Pytester) -> None:
    project.makepyfile(test_product=LOOKUP)
    result = project.runpytest("-p", "no:cacheprovider", "--slm-report=r.json", "--junitxml=j.xml")
    result.assert_outcomes(passed=1)
    text = said(result)
    assert (
        "1 connection(s) left the machine during opted-in tests: "
        "gateway.example.com:443 from test_product.py::test_lookup (mini)"
    ) in text
    assert "--slm-block-network makes them fail" in text
    assert egress_of(project) == {"test_product.py::test_lookup[mini]": ["gateway.example.com:443"]}
    assert (
        'name="slam_egress" value="gateway.example.com:443"' in (project.path / "j.xml").read_text()
    )


@pytest.fixture
def watch() -> Any:
    """The process's watch, with a stand-in router whose opted-in test is running."""
    router = types.SimpleNamespace(active=types.SimpleNamespace(nodeid="t.py::test_x[m]"))
    yield egress.watch_test(router, "t.py::test_x[m]", block=False)
    router.active = None  # inert again: the hook stays installed for this process


def _connect_from(*modules: str, address: tuple[str, int]) -> None:
    """Raise the ``socket.connect`` audit event as code in the last of ``modules`` would, called
    by the one before it, and so on (the first is outermost); no socket exists."""
    call = egress._hook
    for module in reversed(modules):
        scope = {"__name__": module, "inner": call}
        exec("def call(event, args):\n    return inner(event, args)\n", scope)
        call = scope["call"]
    call("socket.connect", (None, address))


def test_the_plugins_own_hops_are_not_counted(watch: Any) -> None:
    _connect_from(
        "pytest_slam.swap.upstream", address=("192.0.2.1", 443)
    )  # the swap's hop to a model
    _connect_from("product.billing", address=("127.0.0.1", 5432))  # loopback stays here
    _connect_from("product.billing", address=("192.0.2.1", 5432))
    # a transport wrapper carries anyone's request: looked through, to whoever called it
    _connect_from("product.llm", "pytest_slam.swap.redirect", address=("192.0.2.2", 443))
    _connect_from(
        "pytest_slam.compare.semantic", "pytest_slam.swap.redirect", address=("192.0.2.3", 443)
    )
    assert watch.for_test("t.py::test_x[m]") == ["192.0.2.1:5432", "192.0.2.2:443"]


def test_loopback_names_and_addresses_are_local() -> None:
    assert all(map(egress.is_local, ["127.0.0.1", "::1", "[::1]", "localhost", "0.0.0.0", None]))
    assert not any(map(egress.is_local, ["192.0.2.1", "10.255.255.1", "gateway.example.com"]))
