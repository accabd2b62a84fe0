"""The swap proxy without its socket: a call of the test process handed over in memory.

The openai SDK's synchronous client in the test process is the caller of almost every swapped call.
Over loopback, each call paid for HTTP framing and parsing on both sides and for the GIL traded
between the caller's thread and the proxy's handler: 0.9 ms of a 2.4 ms call (bench_swap_hop.py).
redirect.py hands such a request to ``SwapProxy.answer_local`` instead, which serves it with the
same ``Exchange`` the socket handler uses: a plain call in the caller's own thread (with its read
timeout as a deadline), a stream on a worker thread while the caller reads it as it is written.
So the call sees what it would over the socket: the same status, headers, body or stream, the same
retries after an error, and the same timeout when the model is slow; an answer the caller gave up
on is recorded as unanswered, as it is over the socket.

An asyncio caller (``AsyncOpenAI``) is served the same way, always by a worker (its exchange calls
upstream with blocking I/O, which must not run on the event loop): it awaits the answer's head and
chunks, woken from the worker's thread (``wait_async``, ``chunks_async``), so no thread is held
while it waits. Another async library (trio) keeps the socket.

``LocalAnswer`` is the Responder the exchange writes and the caller reads. ``Workers`` are daemon
threads: a model that hangs must never hold up the interpreter's exit (a ThreadPoolExecutor's
threads are joined at exit), and a busy worker never queues a call behind it (a new thread starts
when none is idle, as the socket server starts one per connection).
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported by the async reader alone: a sync run never needs it
    import asyncio

_END = object()  # the last item of an answer's body


class LocalAnswer:
    """One answer in memory: the head is set once, then body chunks until the end mark.

    The head's signal is a plain lock, held from the start and released when the head is set
    (a lock costs a fraction of an Event, and every swapped call makes one); a whole answer needs
    no chunk queue, so a streamed one makes its queue with its head.
    """

    def __init__(self) -> None:
        self.status = 0
        self.headers: list[tuple[str, str]] = []
        self.payload: bytes | None = None  # a whole answer's body
        self.failure: str | None = None  # why the server side broke off
        self.unconnected: str | None = None  # no connection upstream: "refused" or "timeout"
        self.closed = False  # the caller is gone: writing more is a broken pipe
        self.ended = False
        self.timed_out = False  # the caller's own timeout ended it (proxy.py, ``time_out``)
        self.on_complete: Callable[[], None] | None = None  # the worker is free from here on
        self._head = threading.Lock()
        self._head.acquire()
        self._signalled = False
        self._chunks: queue.SimpleQueue[object] | None = None
        self._wake: Callable[[], None] | None = None  # an async reader's, called by the writer
        self._async: asyncio.Event | None = None  # what ``_wake`` sets, on the reader's loop

    # -- written by the worker (proxy.Responder) --------------------------------------------------

    def whole(self, status: int, headers: list[tuple[str, str]], payload: bytes) -> None:
        if self._signalled:  # a second answer: as a socket that already sent one, a broken call
            self.drop("pytest-slam: the swap proxy answered the call twice")
            return
        self.payload = payload
        self._complete()
        self._start(status, headers)

    def head(self, status: int, headers: list[tuple[str, str]]) -> None:
        self._chunks = queue.SimpleQueue()
        self._start(status, headers)

    def data(self, data: bytes) -> None:
        if self.closed:  # as a socket write to a caller that hung up
            raise BrokenPipeError("pytest-slam: the caller closed the response")
        if data and self._chunks is not None:
            self._chunks.put(data)
            self._woken()

    def end(self, last: bytes = b"") -> None:
        if self._chunks is None:  # an end with no head: nothing a caller could read
            self.drop("pytest-slam: the swap proxy ended the call without an answer")
            return
        self.data(last)
        self._complete()
        self._chunks.put(_END)
        self._woken()

    def _complete(self) -> None:
        """Before the caller can see the last of the answer (it may send its next call at once)."""
        self.ended = True
        if self.on_complete is not None:
            self.on_complete()

    def _start(self, status: int, headers: list[tuple[str, str]]) -> None:
        self.status, self.headers = status, headers
        self._signal()

    def _signal(self) -> None:
        if not self._signalled:
            self._signalled = True
            self._head.release()
            self._woken()

    def _woken(self) -> None:
        """Tell an async reader, from the writer's thread, that there is more to read."""
        wake = self._wake
        if wake is not None:
            wake()

    def time_out(self) -> None:
        """Served by a worker, an answer not asked now took longer than the caller's timeout
        (router.py): the caller reads a timeout, as it would from a live answer, before the head."""
        self.timed_out = True

    def unreachable(self, why: str, timed_out: bool) -> None:
        """The model could not be connected to: the caller raises its client's connection error
        (``ConnectError``, or ``ConnectTimeout`` when ``timed_out``), as for the endpoint itself."""
        self.unconnected = "timeout" if timed_out else "refused"
        self.drop(why)

    def drop(self, why: str) -> None:
        """The server side failed before or during the answer: the caller sees a broken connection."""
        self.failure = why
        self._complete()
        if self._chunks is not None:
            self._chunks.put(_END)
            self._woken()
        self._signal()

    def finish(self) -> None:
        """After the exchange, whatever happened: an answer never ended is a broken one."""
        if not self.ended:
            self.drop("pytest-slam: the swap proxy ended the call without a whole answer")

    # -- read by the caller -----------------------------------------------------------------------

    def wait(self, timeout: float | None) -> bool:
        """Whether the head came within ``timeout`` seconds (None: wait as long as it takes)."""
        return self._head.acquire(timeout=-1 if timeout is None else timeout)

    def chunks(self, timeout: float | None) -> Iterator[bytes]:
        """The streamed body; TimeoutError when a chunk takes longer than ``timeout``, and
        ConnectionError when the server side broke off."""
        if self._chunks is None:  # broke off before its head
            raise ConnectionError(self.failure or "pytest-slam: the call has no body")
        while True:
            try:
                data = self._data(self._chunks.get(timeout=timeout))
            except queue.Empty:
                raise TimeoutError(f"no data for {timeout:g} s") from None
            if data is None:
                return
            yield data

    def _data(self, item: object) -> bytes | None:
        """A chunk off the queue: its bytes, None at the end, ConnectionError when it broke off."""
        if item is _END:
            if self.failure is not None:
                raise ConnectionError(self.failure)
            return None
        assert isinstance(item, bytes)
        return item

    # -- read by an asyncio caller ------------------------------------------------------------------

    def _event(self) -> asyncio.Event:
        """An event of the running loop, set whenever the writer adds to the answer; made once,
        before the reader looks at the answer, so nothing written can be missed."""
        import asyncio

        event = self._async
        if event is None:
            loop, event = asyncio.get_running_loop(), asyncio.Event()
            self._async = event

            def wake() -> None:
                if event.is_set():  # not read since the last wake (it clears before it waits)
                    return
                with contextlib.suppress(RuntimeError):  # its loop closed: nobody reads any more
                    loop.call_soon_threadsafe(event.set)

            self._wake = wake
        return event

    async def wait_async(self, timeout: float | None) -> bool:
        """``wait`` for an asyncio caller: the event loop runs on while the head is awaited."""
        import asyncio

        event = self._event()
        if not self._signalled:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(event.wait(), timeout)
        return self._signalled

    async def chunks_async(self, timeout: float | None) -> AsyncIterator[bytes]:
        """``chunks`` for an asyncio caller, with the same TimeoutError and ConnectionError."""
        import asyncio

        if self._chunks is None:
            raise ConnectionError(self.failure or "pytest-slam: the call has no body")
        event = self._event()
        while True:
            try:
                data = self._data(self._chunks.get_nowait())
            except queue.Empty:
                event.clear()
                if self._chunks.empty():  # nothing came between the look and the clear
                    try:
                        await asyncio.wait_for(event.wait(), timeout)
                    except TimeoutError:
                        raise TimeoutError(f"no data for {timeout:g} s") from None
                continue
            if data is None:
                return
            yield data

    def close(self) -> None:
        self.closed = True

    def gone(self) -> bool:
        return self.closed


Job = Callable[[Callable[[], None]], None]  # called with ``release``: the caller waits no more


class Workers:
    """Daemon threads that run exchanges, one per call in flight, kept for the next call.

    A job calls ``release`` when its caller has all it waits for, before waking that caller: a
    caller that sends its next call at once then finds this worker free, rather than starting a
    thread (with a fresh connection upstream) for every call.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._idle = 0
        self._threads = 0
        self._lock = threading.Lock()
        self._ids = itertools.count(1)

    @property
    def started(self) -> int:
        """Threads started so far (and not yet stopped)."""
        return self._threads

    def submit(self, job: Job) -> None:
        with self._lock:
            if self._idle:
                self._idle -= 1
            else:
                self._threads += 1
                name = f"{self.name}-{next(self._ids)}"
                threading.Thread(target=self._run, name=name, daemon=True).start()
        self._jobs.put(job)

    def stop(self) -> None:
        """Idle workers end now; a busy one ends after its call (it is a daemon either way)."""
        with self._lock:
            count, self._threads, self._idle = self._threads, 0, 0
        for _ in range(count):
            self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            released = False

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    with self._lock:
                        self._idle += 1

            job(
                release
            )  # never raises: SwapProxy.answer_local's job catches what the exchange raises
            release()
