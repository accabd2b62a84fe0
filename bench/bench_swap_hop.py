"""The swap's hot path alone: one chat call through the swap against the same call made direct.

    python bench/bench_swap_hop.py [--calls 300] [--rounds 9] [--profile]

In one process, as in a test run: the product's openai client, the SwapRouter and SwapProxy that
the plugin starts, and a running test context that records each call. The server (FakeOpenAI) runs
in its own process. Each round times ``--calls`` calls direct to the server, as many through the
proxy's loopback socket, and as many handed to the proxy in memory (swap/local.py, as an opted-in
test's calls are); the swap streams from the server to time the first token, rebuilds the
completion and records a Call. The figures are round-by-round differences against direct.
``--profile`` then runs 1,000 in-memory calls with cProfile on the thread that serves them.

Compare two trees of the package by running this twice, once with ``PYTHONPATH=OTHER_TREE``.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import sys
import time
from collections.abc import Iterator
from typing import Any

from _common import Sample, fake_server, footer, header, ratio, table
from _suite import CANDIDATE_ANSWER

WAYS = {  # arm -> label
    "direct": "direct to the server",
    "socket": "swapped over the loopback socket",
    "local": "swapped in memory (an opted-in test)",
}
MESSAGES = [
    {"role": "system", "content": "You triage support tickets. Answer with the category."},
    {"role": "user", "content": "Ticket 1: I was charged twice for my plan."},
]


def calls(client: Any, n: int, stream: bool) -> tuple[float, float]:
    """(wall ms, CPU ms of the whole process: client and proxy threads) per call."""
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(n):
        reply = client.chat.completions.create(
            model="gpt-4", messages=MESSAGES, temperature=0, max_tokens=64, stream=stream
        )
        if stream:
            for _chunk in reply:
                pass
    return (time.perf_counter() - wall) / n * 1000, (time.process_time() - cpu) / n * 1000


class Hop:
    def __init__(self, url: str) -> None:
        import openai

        from pytest_slam.swap.models import resolve
        from pytest_slam.swap.proxy import SwapProxy
        from pytest_slam.swap.router import SwapRouter, TestContext, Upstream

        spec = resolve(url + "#small-model")
        self.router = SwapRouter({spec.name: spec}, Upstream())
        self.proxy = SwapProxy(self.router).start()
        self.ctx = TestContext("tests/test_x.py::test_x", "test_x", "tests/test_x.py", spec)
        self.router.active = self.ctx
        self.direct = openai.OpenAI(base_url=url, api_key="sk-bench")
        self.swapped = openai.OpenAI(base_url=self.proxy.base_url, api_key="sk-bench")
        self.samples: dict[str, Sample] = {}

    @contextlib.contextmanager
    def way(self, name: str) -> Iterator[Any]:
        """The client for one arm; ``local`` arms the in-memory path as an opted-in test does."""
        from pytest_slam.swap import redirect

        if name == "direct":
            yield self.direct
            return
        rule = (
            redirect.install(lambda: self.proxy.base_url, server=self.proxy)
            if name == "local"
            else None
        )
        try:
            yield self.swapped
        finally:
            if rule is not None:
                redirect.uninstall(rule)

    def round(self, n: int, stream: bool) -> None:
        kind = "stream" if stream else "plain"
        for name in WAYS:
            with self.way(name) as client:
                wall, cpu = calls(client, n, stream)
            self.samples.setdefault(f"{kind}.{name}.wall", Sample()).add(wall)
            self.samples.setdefault(f"{kind}.{name}.cpu", Sample()).add(cpu)
        self.ctx.calls.clear()

    def diff(self, kind: str, name: str, unit: str) -> Sample:
        a, b = self.samples[f"{kind}.{name}.{unit}"], self.samples[f"{kind}.direct.{unit}"]
        return Sample([x - y for x, y in zip(a.values, b.values, strict=True)])

    def profile(self, n: int) -> pstats.Stats:
        """cProfile on the serving thread only (the client's thread is the product's cost)."""
        from pytest_slam.swap import proxy

        prof = cProfile.Profile()
        original = proxy.Exchange.serve  # one request, whichever way it came

        def serve(exchange: Any, *args: Any) -> None:
            prof.enable()
            try:
                original(exchange, *args)
            finally:
                prof.disable()

        proxy.Exchange.serve = serve  # bench-only, restored below
        try:
            with self.way("local") as client:
                calls(client, n, stream=False)
        finally:
            proxy.Exchange.serve = original
        return pstats.Stats(prof)


def report(hop: Hop, n: int) -> None:
    s = hop.samples
    print(f"### One call, direct vs through the swap ({n} calls a round, median (min-max))\n")
    rows = []
    for kind, label in (("plain", "non-streaming caller"), ("stream", "streaming caller")):
        base = s[f"{kind}.direct.wall"].median
        for name in WAYS:
            wall, cpu = s[f"{kind}.{name}.wall"], s[f"{kind}.{name}.cpu"]
            rows.append([f"{label}, {WAYS[name]}", wall.show(), cpu.show(),
                         ratio(wall.median, base)])  # fmt: skip
        for name in ("socket", "local"):
            rows.append([f"{label}: {WAYS[name]} adds", hop.diff(kind, name, "wall").show(),
                         hop.diff(kind, name, "cpu").show(), "-"])  # fmt: skip
    table(["call", "wall ms/call", "CPU ms/call (process)", "wall vs direct"], rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300, help="Calls per arm and round")
    parser.add_argument("--rounds", type=int, default=9, help="Rounds")
    parser.add_argument("--profile", action="store_true", help="Then profile the proxy thread")
    args = parser.parse_args(argv)
    header("The swap's hot path (proxy hop)", "python bench/bench_swap_hop.py " + " ".join(argv))
    with fake_server(answer=CANDIDATE_ANSWER, model="small-model") as url:
        hop = Hop(url)
        for stream in (False, True):
            for name in WAYS:  # warm up
                with hop.way(name) as client:
                    calls(client, 20, stream)
        for _ in range(args.rounds):
            hop.round(args.calls, stream=False)
            hop.round(args.calls, stream=True)
        report(hop, args.calls)
        if args.profile:
            print("\n### cProfile of the serving thread, 1,000 non-streaming calls in memory\n")
            print("```")
            hop.profile(1000).sort_stats("tottime").print_stats(25)
            print("```")
        hop.proxy.stop()
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
