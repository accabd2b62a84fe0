"""The review server: the token, the page's own origin, an exact JSON type, the same user and a
deadline guard every request; two reviewers saving at once lose nothing."""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from patience import patient
from review_helpers import http, make_project, review_server

from pytest_slam.golden.store import GoldenStore
from pytest_slam.report.jsonreport import load_report
from pytest_slam.review.pairs import collect
from pytest_slam.review.server import ReviewSession, serve, url
from pytest_slam.review.verdicts import HumanVerdict, read_verdicts

REVIEW_FILE = "__slam__/gpt-4/test_product.review.jsonl"


def ids(page: str) -> list[str]:
    return re.findall(r'<section class="pair" data-id="([0-9a-f]+)"', page)


def test_without_the_token_every_request_gets_403(pytester) -> None:
    project = make_project(pytester)
    with review_server(project, "--reviewer", "ana") as url:
        parts = urlsplit(url)
        root = f"{parts.scheme}://{parts.netloc}"
        token = parts.path.strip("/")
        status, page = http(url)
        assert status == 200 and len(ids(page)) == 6
        pair = ids(page)[0]
        for path in ("/", "/verdict", f"/{token[:-1]}/", "/favicon.ico", f"/x{token}/"):
            status, text = http(root + path)
            assert status == 403 and "open the exact URL `slam review` printed" in text
        forged = http(f"{root}/wrong/verdict", {"id": pair, "choice": "a", "note": ""})
        assert forged[0] == 403
        rebound = http(url, host=f"evil.example:{parts.port}")  # a DNS-rebinding page
        assert rebound[0] == 403
        assert http(url + "verdict", {"id": pair, "choice": "maybe"})[0] == 400
    assert not (project / REVIEW_FILE).exists()


def test_two_reviewers_posting_at_once_lose_no_verdict(pytester) -> None:
    project = make_project(pytester)
    with review_server(project, "--reviewer", "ana") as ana, \
            review_server(project, "--reviewer", "ben") as ben:  # fmt: skip
        posts = [(url, pid, choice) for url, choice in ((ana, "a"), (ben, "b"))
                 for pid in ids(http(url)[1])]  # fmt: skip
        assert len(posts) == 12
        start = threading.Barrier(len(posts))
        statuses: list[int] = []

        def post(url: str, pid: str, choice: str) -> None:
            start.wait()
            statuses.append(http(url + "verdict", {"id": pid, "choice": choice, "note": url})[0])

        threads = [threading.Thread(target=post, args=p) for p in posts]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=patient(60))
        assert statuses == [200] * 12
        assert ids(http(ana)[1]) == [] and 'data-done="6"' in http(ben)[1]
    path = project / "__slam__/gpt-4/test_product.review.jsonl"
    verdicts = read_verdicts(path)
    assert len(verdicts) == 12
    assert sorted(v.reviewer for v in verdicts) == ["ana"] * 6 + ["ben"] * 6
    in_file = [
        HumanVerdict.from_dict(json.loads(line)).ident for line in path.read_text().splitlines()
    ]
    assert in_file == sorted(in_file)  # sorted lines: a pull request and a merge read well


def test_a_post_from_another_origin_or_not_exactly_json_is_refused(pytester) -> None:
    project = make_project(pytester)
    with review_server(project, "--reviewer", "ana") as address:
        own = f"http://127.0.0.1:{urlsplit(address).port}"
        first, second = ids(http(address)[1])[:2]
        verdict = address + "verdict"
        for origin in (
            "http://evil.example",
            "null",
            f"http://127.0.0.1:{urlsplit(address).port + 1}",
        ):
            status, text = http(verdict, {"id": first, "choice": "a"}, headers={"Origin": origin})
            assert (status, json.loads(text)) == (
                403, {"error": "forbidden: a verdict is saved only from the review page itself"}
            )  # fmt: skip
        for ctype in ("text/plain; application/json", "application/jsonx", "text/plain",
                      "application/json; charset=latin-1", "multipart/form-data"):  # fmt: skip
            status, text = http(
                verdict, {"id": first, "choice": "a"}, headers={"Content-Type": ctype}
            )
            assert status == 400 and "application/json" in json.loads(text)["error"], ctype
        assert not (project / REVIEW_FILE).exists()  # nothing refused was saved
        as_the_page = {"Origin": own, "Content-Type": "application/json; charset=UTF-8"}
        assert http(verdict, {"id": first, "choice": "a"}, headers=as_the_page)[0] == 200
        assert http(verdict, {"id": second, "choice": "tie"})[0] == 200  # no Origin: not a browser
    assert len(read_verdicts(project / REVIEW_FILE)) == 2


@contextlib.contextmanager
def in_process(project: Path, request_s: float) -> Iterator[str]:
    """The review server of `slam review`, run in this process with a short request deadline."""
    store = GoldenStore(project / "__slam__", "gpt-4")
    pairs = collect(load_report(project / "slam-report.json").outcomes, store)[0]
    server = serve(ReviewSession(store, pairs, "ana"), request_s=request_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=patient(30))


def trickle(
    address: str, head: bytes, rest: bytes, every_s: float, limit_s: float
) -> tuple[bytes, float]:
    """Send ``head``, then ``rest`` a byte at a time; what the server said before it closed the
    connection, and when (seconds after the first byte; ``limit_s`` if it never closed)."""
    parts = urlsplit(address)
    start = time.monotonic()
    said = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=limit_s) as sock:
        sock.sendall(head)
        for byte in rest:
            readable, _, _ = select.select([sock], [], [], every_s)
            if readable:
                break
            try:
                sock.sendall(bytes([byte]))
            except OSError:  # cut off while sending
                break
        while time.monotonic() - start < limit_s:
            try:
                chunk = sock.recv(4096)
            except OSError:  # reset: closed with our bytes unread
                break
            if not chunk:
                break
            said += chunk
    return said, time.monotonic() - start


def test_a_client_trickling_its_request_is_cut_off_at_the_deadline(pytester) -> None:
    project = make_project(pytester)
    with in_process(project, request_s=1.0) as address:
        parts = urlsplit(address)
        pair = ids(http(address)[1])[0]
        body = json.dumps({"id": pair, "choice": "a", "note": ""}).encode()
        head = (f"POST {parts.path}verdict HTTP/1.1\r\nHost: {parts.netloc}\r\n"
                "Content-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()  # fmt: skip
        # a body a byte every 0.2 s needs 10+ s; the head alone, without the token, as long
        for first, rest in (
            (head, body),
            (b"G", b"ET / HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 20),
        ):
            said, after = trickle(address, first, rest, every_s=0.2, limit_s=patient(8.0))
            assert said.startswith(b"HTTP/1.1 408 Request Timeout\r\n"), said
            # cut off near the 1 s deadline (later on a busy machine), before the client is done
            assert 0.9 < after < min(patient(5.0), 0.2 * len(rest)), (after, len(rest))
        assert http(address)[0] == 200  # the server still serves
    assert not (project / REVIEW_FILE).exists()


SYSTEM_PYTHON = Path("/usr/bin/python3")  # the venv's may sit where another user cannot read


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0 or not SYSTEM_PYTHON.exists(),
    reason="running a process as another user needs root and a system python",
)
def test_another_users_process_is_refused_even_with_the_token(pytester) -> None:
    project = make_project(pytester)
    script = (  # the URL comes on stdin: no token in any argv
        "import sys, urllib.request, urllib.error\n"
        "try:\n    r = urllib.request.urlopen(sys.stdin.read(), timeout=30); print(r.status)\n"
        "except urllib.error.HTTPError as e:\n    print(e.code, e.read().decode())\n"
    )
    with review_server(project, "--reviewer", "ana") as address:
        argv = [str(SYSTEM_PYTHON), "-c", script]
        nobody = subprocess.run(argv, input=address, user=65534, capture_output=True, text=True,
                                timeout=patient(60))  # fmt: skip
        same_user = subprocess.run(
            argv, input=address, capture_output=True, text=True, timeout=patient(60)
        )
    assert nobody.stdout.strip() == (
        "403 forbidden: this review server serves only the user who started `slam review`"
    ), nobody.stderr
    assert same_user.stdout.strip() == "200", same_user.stderr


def test_a_verdict_nested_past_the_parser_is_refused_and_the_server_serves_on(pytester) -> None:
    import urllib.error
    import urllib.request

    project = make_project(pytester)
    with review_server(project, "--reviewer", "ana") as address:
        first = ids(http(address)[1])[0]
        nested = urllib.request.Request(address + "verdict", data=b"[" * 60000, method="POST")
        nested.add_header("Content-Type", "application/json")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(nested, timeout=30)
        assert refused.value.code == 400
        assert http(address + "verdict", {"id": first, "choice": "a"})[0] == 200
    assert len(read_verdicts(project / REVIEW_FILE)) == 1
