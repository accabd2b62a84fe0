"""The review server: the token guards every request, and two reviewers saving at once lose nothing."""

from __future__ import annotations

import json
import re
import threading
from urllib.parse import urlsplit

from review_helpers import http, make_project, review_server

from pytest_slam.review.verdicts import HumanVerdict, read_verdicts


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
    assert not (project / "__slam__/gpt-4/test_product.review.jsonl").exists()


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
            t.join(timeout=60)
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
