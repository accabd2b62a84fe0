"""httpx (and httpx2, its successor under a new name), sync and async: the openai SDK's default.

``HTTPTransport.handle_request`` and ``AsyncHTTPTransport.handle_async_request`` are wrapped, so a
request to a listed host goes to the proxy: clients built before the redirect was installed
included. With the run's ``server``, a request to the proxy itself, or one redirected to it, does
not go over loopback: the proxy answers it in memory (local.py) and this module turns the answer
into the response, or the timeout and connection errors, the transport would have produced; sync
and asyncio clients alike (an async client under another event loop library keeps the socket).
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

from pytest_slam.swap.local import LocalAnswer
from pytest_slam.swap.stacks.common import HEADER, Patch, Redirect, rule_for
from pytest_slam.util.foreign import httpx_pool

LIBRARIES = ("httpx2", "httpx")
# Requests, responses and transports here are httpx or httpx2 objects, whichever is installed
# (imported by name at run time), hence Any at this boundary.
_loopback: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


class HttpxStack:
    name = "httpx"
    modules = LIBRARIES

    def libraries(self) -> tuple[ModuleType, ...]:
        found: dict[int, ModuleType] = {}
        for name in LIBRARIES:
            module = sys.modules.get(name)  # not imported yet, or still being imported: skipped
            if module is None or not hasattr(module, "HTTPTransport"):
                continue
            found.setdefault(id(module.HTTPTransport), module)  # httpx may be an alias of httpx2
        return tuple(found.values())

    def patches(self, library: ModuleType) -> list[Patch]:
        sync_cls, async_cls = library.HTTPTransport, library.AsyncHTTPTransport
        return [
            Patch(sync_cls, "handle_request", _sync(library, sync_cls.handle_request)),
            Patch(
                async_cls, "handle_async_request", _async(library, async_cls.handle_async_request)
            ),
        ]


STACK = HttpxStack()


def _sync(stack: ModuleType, original: Any) -> Any:
    def handle_request(self: Any, request: Any) -> Any:
        redirect = rule_for(request.url.host, request.url.port, local=True)
        if redirect is None:
            return original(self, request)
        request.read()
        transport = self
        if not redirect.is_server(request.url.host, request.url.port):
            request, transport = _rewrite(redirect, stack, request), _via(self, stack, False)
        answer = _answer_local(redirect, request)
        if answer is None:
            return original(transport, request)
        return _local_response(stack, request, answer)

    return handle_request


def _async(stack: ModuleType, original: Any) -> Any:
    async def handle_async_request(self: Any, request: Any) -> Any:
        redirect = rule_for(request.url.host, request.url.port, local=True)
        if redirect is None:
            return await original(self, request)
        await request.aread()
        transport = self
        if not redirect.is_server(request.url.host, request.url.port):
            request, transport = _rewrite(redirect, stack, request), _via(self, stack, True)
        answer = _answer_local(redirect, request, in_place=False) if _on_asyncio() else None
        if answer is None:
            return await original(transport, request)
        return await _local_response_async(stack, request, answer)

    return handle_async_request


def _on_asyncio() -> bool:
    """Whether the caller runs on an asyncio loop (local.py wakes it there); trio keeps the socket."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _rewrite(redirect: Redirect, stack: ModuleType, request: Any) -> Any:
    """The same request, addressed to the proxy; an Azure deployment becomes the ``model``."""
    url, path, deployment = redirect.target(request.url.raw_path.decode("ascii"))
    content = redirect.rewritten_body(
        request.method, str(request.url), path, request.content, deployment
    )
    new_url = stack.URL(url)
    headers = stack.Headers(request.headers)
    headers["host"] = new_url.netloc.decode("ascii")
    headers["content-length"] = str(len(content))
    headers[HEADER] = f"{request.url.scheme}://{request.url.host}"
    return stack.Request(
        request.method, new_url, headers=headers, content=content, extensions=request.extensions
    )


def _answer_local(redirect: Redirect, request: Any, in_place: bool = True) -> LocalAnswer | None:
    """The proxy's answer in memory; ``in_place``: a plain call may be served in this thread (an
    async caller's never is: its loop must run on)."""
    if redirect.server is None:
        return None
    headers = [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in request.headers.raw]
    target = request.url.raw_path.decode("ascii")
    return redirect.server.answer_local(
        request.method, target, headers, request.content, _timeout(request), in_place
    )


def _timeout(request: Any) -> float | None:
    """The caller's read timeout (httpx keeps it on the request), in seconds; None: none."""
    value = (request.extensions.get("timeout") or {}).get("read")
    return None if value is None else float(value)


def _local_response(stack: ModuleType, request: Any, answer: LocalAnswer) -> Any:
    """The httpx response a transport would build from the answer, within the caller's read
    timeout; the errors are the ones the transport raises for a slow or broken server. The
    framing headers are the ones the socket's answer carries (a length, or chunked)."""
    timeout = _timeout(request)
    try:
        came = answer.wait(timeout)
    except BaseException:  # an interrupt while waiting: the server side stops, as on a socket
        answer.close()
        raise
    return _response(stack, request, answer, came, timeout, _body_class(stack))


async def _local_response_async(stack: ModuleType, request: Any, answer: LocalAnswer) -> Any:
    """``_local_response`` for an asyncio caller: the head awaited, a stream read as it comes."""
    timeout = _timeout(request)
    try:
        came = await answer.wait_async(timeout)
    except BaseException:  # cancelled while waiting: the server side stops, as on a socket
        answer.close()
        raise
    return _response(stack, request, answer, came, timeout, _async_body_class(stack))


def _response(
    stack: ModuleType,
    request: Any,
    answer: LocalAnswer,
    came: bool,
    timeout: float | None,
    body_class: type[Any],
) -> Any:
    """The response from an answer whose head ``came`` (or not) within the caller's ``timeout``."""
    if not came or answer.timed_out:
        answer.close()
        raise stack.ReadTimeout(f"pytest-slam: no answer within {timeout:g} s", request=request)
    if answer.unconnected is not None:  # as the transport raises it for the endpoint itself
        error = stack.ConnectTimeout if answer.unconnected == "timeout" else stack.ConnectError
        raise error(answer.failure, request=request)
    if answer.failure is not None and not answer.status:
        raise stack.RemoteProtocolError(answer.failure, request=request)
    extensions = {"http_version": b"HTTP/1.1"}
    if answer.payload is not None:
        # A stream, not ``content=``: the client times and closes the body as it does one read
        # off a connection (``response.elapsed``, ``with_streaming_response``).
        headers = [*answer.headers, ("Content-Length", str(len(answer.payload)))]
        return stack.Response(
            answer.status,
            headers=headers,
            stream=stack.ByteStream(answer.payload),
            request=request,
            extensions=extensions,
        )
    headers = [*answer.headers, ("Transfer-Encoding", "chunked")]
    body = body_class(answer, timeout, request)
    return stack.Response(
        answer.status, headers=headers, stream=body, request=request, extensions=extensions
    )


class _LocalBody:
    """A streamed local answer as a response body; mixed into ``stack.SyncByteStream`` (httpx
    checks the type) by ``_body_class``, one class per HTTP stack."""

    stack: ModuleType

    def __init__(self, answer: LocalAnswer, timeout: float | None, request: Any) -> None:
        self.answer, self.timeout, self.request = answer, timeout, request

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self.answer.chunks(self.timeout)
        except TimeoutError as exc:
            raise self.stack.ReadTimeout(f"pytest-slam: {exc}", request=self.request) from None
        except ConnectionError as exc:
            raise self.stack.RemoteProtocolError(str(exc), request=self.request) from None

    def close(self) -> None:
        """The caller is done (or gave up): the server side stops as at a closed socket."""
        self.answer.close()


class _AsyncLocalBody(_LocalBody):
    """``_LocalBody`` for an asyncio caller; mixed into ``stack.AsyncByteStream``."""

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self.answer.chunks_async(self.timeout):
                yield chunk
        except TimeoutError as exc:
            raise self.stack.ReadTimeout(f"pytest-slam: {exc}", request=self.request) from None
        except ConnectionError as exc:
            raise self.stack.RemoteProtocolError(str(exc), request=self.request) from None

    async def aclose(self) -> None:
        self.answer.close()


@functools.cache
def _body_class(stack: ModuleType) -> type[_LocalBody]:
    return type("LocalBody", (_LocalBody, stack.SyncByteStream), {"stack": stack})


@functools.cache
def _async_body_class(stack: ModuleType) -> type[_AsyncLocalBody]:
    return type("AsyncLocalBody", (_AsyncLocalBody, stack.AsyncByteStream), {"stack": stack})


def _via(transport: Any, stack: ModuleType, is_async: bool) -> Any:
    """The caller's own connection pool, unless it goes through an HTTP proxy that cannot reach
    loopback (``HTTPS_PROXY``): then a plain transport of the same stack, kept beside it."""
    if type(httpx_pool(transport)).__name__ in ("ConnectionPool", "AsyncConnectionPool"):
        return transport
    direct = _loopback.get(transport)
    if direct is None:
        cls = stack.AsyncHTTPTransport if is_async else stack.HTTPTransport
        direct = _loopback[transport] = cls(trust_env=False)
    return direct
