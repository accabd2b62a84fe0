"""Only the run uses the swap proxy: another process gets 401, and nothing of its calls is forwarded,
recorded or written to a golden file.

The end-to-end case is a real pytest run (pytester) of a product suite that records goldens from a
FakeOpenAI reference; during its opted-in test a process started with a scrubbed environment (it knows
the proxy's port, not the run's secret) and a raw socket of the test process itself call the proxy.
The second guard, the socket owner's uid, is shown with a process run as another user.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from patience import patient
from report_helpers import read_report
from slam_helpers import PRODUCT, swap_proxy, write_pyproject

from pytest_slam.swap.peer import owner_uid
from pytest_slam.swap.proxy import SwapProxy
from pytest_slam.testing import FakeOpenAI

ATTACKER = """
import http.client, json, sys

port = int(sys.argv[1])
body = json.dumps({"model": "gpt-4", "messages": [{"role": "user", "content": "ATTACKER PROMPT"}]})
paths = [("POST", "/v1/chat/completions"), ("POST", "/slam/ref/v1/chat/completions"),
         ("POST", "/slam/m/mini/v1/chat/completions"), ("GET", "/v1/models"),
         ("POST", "/v1/embeddings"), ("POST", "/not-the-secret/v1/chat/completions")]
statuses = []
for method, path in paths:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=body if method == "POST" else None,
                 headers={"Authorization": "Bearer sk-attacker", "Content-Type": "application/json"})
    statuses.append(conn.getresponse().status)
    conn.close()
print(json.dumps(statuses))
"""

SUITE = """
import json, os, socket, subprocess, sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest, product

pytestmark = pytest.mark.slm

def test_answer():
    assert product.ask("How do I get a refund?")
    if not os.environ.get("SLAM_TEST_ATTACK"):
        return
    port = urlsplit(os.environ["OPENAI_BASE_URL"]).port
    scrubbed = {"PATH": os.environ.get("PATH", "")}  # not the run's environment: no secret, no key
    done = subprocess.run([sys.executable, "attacker.py", str(port)], env=scrubbed,
                          capture_output=True, text=True, timeout=120, check=True)
    with socket.create_connection(("127.0.0.1", port)) as sock:  # a raw socket, no secret
        sock.sendall(b"POST /v1/chat/completions HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 2\\r\\n\\r\\n{}")
        raw = sock.recv(65536)
    Path("attack.json").write_text(json.dumps([*json.loads(done.stdout), int(raw.split()[1])]))
"""


def golden_files(root: Path) -> dict[str, bytes]:
    folder = root / "__slam__"
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def test_a_process_outside_the_run_gets_401_and_leaves_no_trace(
    pytester: pytest.Pytester, fake_gpt4: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI(lambda req: "mini says: " + req["messages"][-1]["content"]) as mini:
        write_pyproject(pytester, mini.base_url, reference=f"{fake_gpt4.base_url}#gpt-4")
        pytester.makepyfile(product=PRODUCT, test_product=SUITE, attacker=ATTACKER)
        clean = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new")
        clean.assert_outcomes(passed=1)
        recorded = golden_files(pytester.path)
        assert recorded and (fake_gpt4.hits, mini.hits) == (1, 1)

        monkeypatch.setenv("SLAM_TEST_ATTACK", "1")
        attacked = pytester.runpytest(
            "-p", "no:cacheprovider", "--slm-record=new", "--slm-report=report.json"
        )
        attacked.assert_outcomes(passed=1)
        requests = fake_gpt4.requests + mini.requests

    assert read_report(pytester.path / "attack.json") == [401] * 7
    assert golden_files(pytester.path) == recorded  # byte for byte: nothing foreign was recorded
    assert (fake_gpt4.hits, mini.hits) == (1, 2)  # each run's own call, nothing of the attacker's
    assert "ATTACKER" not in json.dumps([r.json for r in requests])
    assert "sk-attacker" not in json.dumps([r.headers for r in requests])
    (outcome,) = read_report(pytester.path / "report.json")["outcomes"]
    assert [c["request"]["messages"][0]["content"] for c in outcome["calls"]] == [
        "How do I get a refund?"
    ]


@pytest.fixture
def upstream() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(answer="from upstream") as fake:
        yield fake


@pytest.fixture
def proxy(upstream: FakeOpenAI) -> Iterator[SwapProxy]:
    with swap_proxy(upstream.base_url) as server:
        yield server


def get_status(proxy: SwapProxy, path: str) -> int:
    with socket.create_connection(proxy.server_address, timeout=patient(30)) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        return int(sock.recv(65536).split()[1])


def test_only_the_exact_secret_opens_the_proxy(proxy: SwapProxy, upstream: FakeOpenAI) -> None:
    secret = proxy.secret
    wrong = [secret[:-1] + ("A" if secret[-1] != "A" else "B"), secret[:-1], secret + "x", ""]
    assert [get_status(proxy, f"/{s}/v1/models") for s in wrong] == [401] * 4
    assert upstream.hits == 0
    assert get_status(proxy, f"/{secret}/v1/models") == 200
    assert proxy.base_url.startswith(f"http://127.0.0.1:{proxy.server_address[1]}/{secret}/")


def test_the_owner_of_a_loopback_socket_is_known(proxy: SwapProxy) -> None:
    with socket.create_connection(proxy.server_address) as sock:
        assert owner_uid(sock.getsockname(), proxy.server_address) == os.getuid()
    assert owner_uid(("127.0.0.1", 1), proxy.server_address) is None  # no such socket


SYSTEM_PYTHON = Path("/usr/bin/python3")  # the venv's may sit where another user cannot read


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="running a process as another user needs root and a system python",
)
def test_another_users_process_is_refused_even_with_the_secret(
    proxy: SwapProxy, upstream: FakeOpenAI
) -> None:
    script = (
        "import http.client, sys; c = http.client.HTTPConnection('127.0.0.1', int(sys.argv[1]));"
        "c.request('GET', sys.argv[2]); print(c.getresponse().status)"
    )
    path = f"/{proxy.secret}/v1/models"
    argv = [str(SYSTEM_PYTHON), "-c", script, str(proxy.server_address[1]), path]
    nobody = subprocess.run(argv, user=65534, capture_output=True, text=True, timeout=patient(60))
    same_user = subprocess.run(argv, capture_output=True, text=True, timeout=patient(60))
    assert (nobody.stdout.strip(), same_user.stdout.strip()) == ("401", "200"), nobody.stderr
    assert upstream.hits == 1


def test_a_refused_upload_gets_its_401_and_goes_nowhere(
    proxy: SwapProxy, upstream: FakeOpenAI
) -> None:
    conn = http.client.HTTPConnection(*proxy.server_address, timeout=patient(60))
    conn.request("POST", "/v1/embeddings", body=b"x" * 1_000_000)  # no secret, a big body
    assert conn.getresponse().status == 401
    conn.close()
    assert upstream.hits == 0
