"""A candidate served by several replicas (``base_urls``) while one of them dies and comes back.

Real FakeOpenAI servers on loopback, stopped and started again on the same port; the calls go
through the real swap path (``forward_chat``, and the proxy with the real openai client in the
pytester run). Every request is counted at the servers: a request is never sent twice.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import pytest
from report_helpers import read_report
from slam_helpers import PRODUCT

from pytest_slam.records import ModelSpec
from pytest_slam.swap.chat import ChatResult, Target, forward_chat
from pytest_slam.swap.fleet import Replicas
from pytest_slam.testing import FakeOpenAI


@pytest.fixture
def trio() -> Iterator[list[FakeOpenAI]]:
    servers = [FakeOpenAI(answer=f"from {name}").start() for name in "abc"]
    yield servers
    for server in servers:
        server.stop()


def _ask(replicas: Replicas, question: str) -> ChatResult:
    spec = ModelSpec("fleet", "endpoint", "qwen", base_urls=list(replicas.urls))
    target = Target(spec, replicas.pick(), None, replicas=replicas)
    return forward_chat(
        target, {"model": "gpt-4", "messages": [{"role": "user", "content": question}]}
    )


def _questions(servers: list[FakeOpenAI]) -> Counter[str]:
    return Counter(r.json["messages"][0]["content"] for s in servers for r in s.requests)


def test_a_dead_replica_is_stepped_around_then_tried_again(trio: list[FakeOpenAI]) -> None:
    a, b, c = trio
    replicas = Replicas("fleet", tuple(s.base_url for s in trio), rest_s=0.3)
    first = [_ask(replicas, f"q{i}") for i in range(3)]
    assert [r.call.endpoint for r in first] == [a.base_url, b.base_url, c.base_url]
    b.stop()
    during = [_ask(replicas, f"q{i}") for i in range(3, 9)]
    assert all(r.call.ok and r.completion is not None for r in during)
    assert b.base_url not in {r.call.endpoint for r in during}
    assert replicas.moved == 1  # only the first call after the death found it; then it rested
    b.start()  # the same port: the replica is back
    time.sleep(0.35)
    after = [_ask(replicas, f"q{i}") for i in range(9, 12)]
    assert b.base_url in {r.call.endpoint for r in after}
    assert sum(s.hits for s in trio) == 12 and set(_questions(trio).values()) == {1}
    for r in first + during + after:  # the endpoint recorded is the replica that answered
        assert r.call.text == f"from {'abc'[[s.base_url for s in trio].index(r.call.endpoint)]}"
    refused, moved = replicas.lines()
    assert refused.startswith(
        f"model 'fleet': replica {b.base_url} refused the connection 1 time(s)"
    )
    assert (
        "ConnectionRefusedError" in refused and "took requests again after resting (1x)" in refused
    )
    assert "1 call(s) went to the next replica" in moved and "no request was sent twice" in moved


def test_a_replica_that_fails_after_the_request_went_out_fails_the_call() -> None:
    with FakeOpenAI(fail=["timeout"], timeout_sleep_s=0.05) as a, FakeOpenAI() as b:
        replicas = Replicas("fleet", (a.base_url, b.base_url))
        result = _ask(replicas, "once only")
        assert result.call.error_kind == "unreachable" and result.call.endpoint == a.base_url
        assert (a.hits, b.hits) == (1, 0)  # sent once, never to the next replica
        assert replicas.lines() == []


def test_every_replica_refusing_is_one_failed_call(trio: list[FakeOpenAI]) -> None:
    urls = tuple(s.base_url for s in trio)
    for server in trio:
        server.stop()
    replicas = Replicas("fleet", urls)
    result = _ask(replicas, "anyone?")
    assert result.status == 502 and result.call.error_kind == "unreachable"
    assert "every replica refused the connection" in (result.call.error or "")
    assert replicas.moved == 0 and len(replicas.lines()) == 4  # three refusing, one tally


class _KillAfter:
    """Stops ``server`` once ``tests`` tests have finished: a replica dying mid-run."""

    def __init__(self, server: FakeOpenAI, tests: int) -> None:
        self.server, self.left = server, tests

    def pytest_runtest_logfinish(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.server.stop()


def test_a_run_survives_a_replica_killed_mid_run(
    pytester: pytest.Pytester, trio: list[FakeOpenAI]
) -> None:
    a, b, c = trio
    pytester.makepyfile(product=PRODUCT)
    pytester.makefile(".toml", pyproject=f"""
[tool.pytest.ini_options]
pythonpath = ["."]
[tool.slam]
reference = "none"
candidates = ["fleet"]
[tool.slam.models.fleet]
model = "Qwen/Qwen2.5-72B-Instruct"
base_urls = ["{a.base_url}", "{b.base_url}", "{c.base_url}"]
""")  # fmt: skip
    pytester.makepyfile(test_fleet="""
        import pytest, product

        @pytest.mark.slm
        @pytest.mark.parametrize("n", range(12))
        def test_ask(n):
            assert product.ask(f"question {n}").startswith("from ")
        """)  # fmt: skip
    result = pytester.runpytest("--slm-report=run.json", plugins=[_KillAfter(b, 4)])
    result.assert_outcomes(passed=12)
    assert b.hits == 1  # test 2 (in turn a, b, c, a), then it died
    assert sum(s.hits for s in trio) == 12  # one request per test: none sent twice
    assert set(_questions(trio).values()) == {1} and len(_questions(trio)) == 12
    report = read_report(pytester.path / "run.json")
    calls = [call for o in report["outcomes"] for call in o["calls"]]
    assert len(calls) == 12 and all(call["error"] is None for call in calls)
    assert Counter(call["endpoint"] for call in calls) == {s.base_url: s.hits for s in trio}
    result.stdout.fnmatch_lines([
        f"*model 'fleet': replica {b.base_url} refused the connection 1 time(s) (*ConnectionRefused*",
        "*model 'fleet': 1 call(s) went to the next replica because theirs refused the connection*",
    ])  # fmt: skip
