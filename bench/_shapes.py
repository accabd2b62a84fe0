"""Loopback servers of the shapes users actually have, for bench_servers.py (issue 49).

    python bench/_shapes.py --shape batch    [--batch 32] [--step-ms 20] [--tokens 100,300]
    python bench/_shapes.py --shape capped   [--cap 8] [--latency-ms 300] [--retry-after S]
    python bench/_shapes.py --shape slowing  [--latency-ms 300] [--per-other 0.1]

- ``batch``: a batching engine (vLLM's scheduler, simplified): up to ``--batch`` requests run
  together, one token each per step of ``--step-ms``; a request needs 100 or 300 steps (its
  answer's tokens, by its prompt, alternating); the others queue, first come, first served.
- ``capped``: answers in ``--latency-ms`` while it answers fewer than ``--cap``; past that, a 429
  at once (with ``Retry-After: S`` when ``--retry-after`` is given), as a rate-limited API does.
- ``slowing``: each request takes ``--latency-ms`` alone and ``--per-other`` (10%) longer for every
  other request in flight when it arrives, as a server sharing its compute does.

Each prints its base URL, then serves chat completions (streamed or not; the answer is the
benches' ``CANDIDATE_ANSWER``, its usage the tokens above) and its own counters at
``GET /fake/stats``: chat requests, refusals, peak and time-weighted mean in flight (over the span
from its first request to its last answer), and for ``batch`` the steps and the mean batch.
``POST /fake/stats/reset`` clears them. A process of its own, so it never competes with the bench
or the run for a GIL. Stdlib only; not part of the package (a bench-only server).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
import uuid
import zlib
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _suite import CANDIDATE_ANSWER


@dataclass
class _Job:
    steps: int
    done: threading.Event = field(default_factory=threading.Event)


class Counters:
    """What the server saw, under one lock: requests, refusals, in flight (its time integral)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = self.refusals = self.peak = self.tokens = 0
        self.in_flight = 0
        self.area = 0.0
        self.first: float | None = None
        self.last = 0.0
        self.changed = 0.0
        self.batches: list[int] = []

    def _move(self, delta: int) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first = self.changed = now
        self.area += self.in_flight * (now - self.changed)
        self.in_flight += delta
        self.peak = max(self.peak, self.in_flight)
        self.changed = self.last = now

    def arrive(self, cap: int | None) -> int | None:
        """Count a request; None when it is refused (``cap`` answered already), else the others
        in flight when it came."""
        with self.lock:
            self.requests += 1
            if cap is not None and self.in_flight >= cap:
                self.refusals += 1
                return None
            others = self.in_flight
            self._move(+1)
            return others

    def leave(self, tokens: int) -> None:
        with self.lock:
            self._move(-1)
            self.tokens += tokens

    def stats(self) -> dict[str, float]:
        with self.lock:
            span = self.last - self.first if self.first is not None else 0.0
            busy = [b for b in self.batches if b]
            return {
                "chat_requests": self.requests,
                "tokens": self.tokens,
                "refusals": self.refusals,
                "peak_in_flight": self.peak,
                "mean_in_flight": self.area / span if span > 0 else 0.0,
                "span_s": span,
                "steps": len(busy),
                "mean_batch": sum(busy) / len(busy) if busy else 0.0,
                "peak_batch": max(busy, default=0),
            }


class Batcher:
    """Steps of ``step_s``; each serves up to ``size`` running requests one token each."""

    def __init__(self, size: int, step_s: float, counters: Counters) -> None:
        self.size, self.step_s, self.counters = size, step_s, counters
        self.waiting: deque[_Job] = deque()
        self.cond = threading.Condition()
        threading.Thread(target=self._run, daemon=True).start()

    def serve(self, steps: int) -> None:
        job = _Job(steps)
        with self.cond:
            self.waiting.append(job)
            self.cond.notify()
        job.done.wait()

    def _run(self) -> None:
        running: list[_Job] = []
        while True:
            with self.cond:
                while not running and not self.waiting:
                    self.cond.wait()
                while self.waiting and len(running) < self.size:
                    running.append(self.waiting.popleft())
            with self.counters.lock:
                self.counters.batches.append(len(running))
            time.sleep(self.step_s)
            for job in running:
                job.steps -= 1
                if job.steps <= 0:
                    job.done.set()
            running = [job for job in running if job.steps > 0]


class Shape:
    """How long a request takes, or whether it is refused, by the ``--shape`` asked."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.counters = args, Counters()
        self.tokens = [int(t) for t in args.tokens.split(",")]
        self.batcher = None
        if args.shape == "batch":
            self.batcher = Batcher(args.batch, args.step_ms / 1000, self.counters)

    def tokens_of(self, body: dict[str, Any]) -> int:
        text = json.dumps(body.get("messages"), sort_keys=True).encode()
        return self.tokens[zlib.crc32(text) % len(self.tokens)] if self.batcher else 10

    def serve(self, body: dict[str, Any]) -> int | None:
        """Serve one request (sleeping as the shape says); its tokens, or None when refused."""
        args = self.args
        others = self.counters.arrive(args.cap if args.shape == "capped" else None)
        if others is None:
            return None
        tokens = self.tokens_of(body)
        try:
            if self.batcher is not None:
                self.batcher.serve(tokens)
            elif args.shape == "slowing":
                time.sleep(args.latency_ms / 1000 * (1 + args.per_other * others))
            else:
                time.sleep(args.latency_ms / 1000)
            return tokens
        finally:
            self.counters.leave(tokens)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    shape: Shape

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(
        self, status: int, data: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/fake/stats":
            self._send(200, json.dumps(self.shape.counters.stats()).encode(), "application/json")
        else:
            self._send(404, b"{}", "application/json")

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/fake/stats/reset":
            with self.shape.counters.lock:
                self.shape.counters.reset()
            return self._send(200, b"{}", "application/json")
        body = json.loads(raw or b"{}")
        tokens = self.shape.serve(body)
        if tokens is None:
            error = {"error": {"message": "Rate limit reached.", "type": "requests",
                               "code": "rate_limit_exceeded"}}  # fmt: skip
            after = self.shape.args.retry_after
            headers = {} if after is None else {"retry-after": str(after)}
            return self._send(429, json.dumps(error).encode(), "application/json", headers)
        head = {"id": f"chatcmpl-{uuid.uuid4().hex[:20]}", "created": int(time.time()),
                "model": "small-model"}  # fmt: skip
        usage = {"prompt_tokens": 30, "completion_tokens": tokens, "total_tokens": 30 + tokens}
        if not body.get("stream"):
            message = {"role": "assistant", "content": CANDIDATE_ANSWER}
            choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
            out = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return self._send(200, json.dumps(out).encode(), "application/json")
        chunk = {**head, "object": "chat.completion.chunk"}
        deltas = [{"role": "assistant", "content": ""}, {"content": CANDIDATE_ANSWER}, {}]
        events = [
            {**chunk, "choices": [{"index": 0, "delta": d, "logprobs": None,
                                   "finish_reason": "stop" if not d else None}]}
            for d in deltas
        ]  # fmt: skip
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": usage})
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        self._send(200, data.encode(), "text/event-stream")


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python bench/_shapes.py")
    parser.add_argument("--shape", choices=("batch", "capped", "slowing", "plain"), required=True)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--tokens", default="100,300")
    parser.add_argument("--cap", type=int, default=8)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--retry-after", default=None, help="Retry-After sent with a 429")
    parser.add_argument("--per-other", type=float, default=0.1)
    args = parser.parse_args(argv)
    Handler.shape = Shape(args)
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"http://127.0.0.1:{server.server_address[1]}/v1", flush=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    stop.wait()
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
