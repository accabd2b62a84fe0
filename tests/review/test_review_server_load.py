"""80 reviewers' clicks at once: the review server accepts every connection (none reset by a
full listen backlog) and every verdict is saved. The server runs in this process (as
`slam review` runs it) over a real store; the posts are real HTTP from 80 threads released
together."""

from __future__ import annotations

import threading
from pathlib import Path

from patience import patient
from review_helpers import http, pair

from pytest_slam.golden.store import GoldenStore
from pytest_slam.review.server import ReviewSession, serve, url
from pytest_slam.review.verdicts import read_verdicts, review_path

POSTS = 80


def test_eighty_concurrent_verdict_posts_are_all_answered_and_saved(tmp_path: Path) -> None:
    store = GoldenStore(tmp_path / "__slam__", "gpt-4")
    pairs = [pair(f"k{n:02d}", "cand", 0.5) for n in range(POSTS)]
    server = serve(ReviewSession(store, pairs, "ana"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    start = threading.Barrier(POSTS)
    answers: dict[str, tuple[int, str] | BaseException] = {}
    try:
        verdict = url(server) + "verdict"

        def post(pid: str) -> None:
            start.wait()
            try:
                answers[pid] = http(verdict, {"id": pid, "choice": "a", "note": pid})
            except BaseException as exc:  # a reset connection: what this test is about
                answers[pid] = exc

        posts = [threading.Thread(target=post, args=(p.id,)) for p in pairs]
        for t in posts:
            t.start()
        for t in posts:
            t.join(timeout=patient(120))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=patient(30))
    failed = {pid: a for pid, a in answers.items() if not (isinstance(a, tuple) and a[0] == 200)}
    first = list(failed.values())[:3]
    assert len(answers) == POSTS and not failed, f"{len(failed)} of {POSTS} failed: {first}"
    saved = read_verdicts(review_path(store, pairs[0].module))
    assert sorted(v.key for v in saved) == sorted(p.key for p in pairs)
    assert sorted(v.note for v in saved) == sorted(p.id for p in pairs)
