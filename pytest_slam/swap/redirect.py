"""Redirect clients that ``OPENAI_BASE_URL`` cannot reach to the swap proxy, at the HTTP transport.

``AzureOpenAI(...)`` and ``OpenAI(base_url="https://api.openai.com/v1")`` (gateways, settings-driven
clients) ignore ``OPENAI_BASE_URL``, so without this their calls would leave the machine while the
report says "candidate passed" for a test whose calls the swap never saw. While a run is armed,
``install`` wraps ``HTTPTransport.handle_request`` and ``AsyncHTTPTransport.handle_async_request`` of
httpx2 and of httpx (whichever are installed; the openai SDK's default clients use them), so a request
whose host is listed goes to the local proxy instead: clients built before ``install`` included.

The rewrite keeps the method, the body and the caller's headers (its key goes only to the loopback
proxy, which already serves the run), drops Azure's ``api-version`` query, and maps the path
(``<proxy>`` is the proxy base URL, read per request):

- ``https://api.openai.com/v1/chat/completions`` -> ``<proxy>/chat/completions``;
- ``https://R.openai.azure.com/openai/deployments/D/chat/completions?api-version=V`` ->
  ``<proxy>/chat/completions`` with ``model`` set to the deployment D;
- ``https://R.openai.azure.com/openai/v1/responses`` -> ``<proxy>/responses``;
- ``https://gateway.example/llm/v1/embeddings`` (a host the user listed) -> ``<proxy>/embeddings``.

The path is the tail that starts with a known endpoint (``/chat/completions``, ``/responses``, ...);
a path with none keeps what follows a ``/v1`` or ``/openai`` prefix, so the proxy answers it (or
refuses it loudly). A redirected request carries ``x-slam-redirected-from: <scheme>://<host>``.

Raw ``httpx``/``httpx2`` calls to a listed host are redirected the same way. Not reached: clients
on another HTTP stack (``DefaultAioHttpClient``, ``requests``), websockets (Realtime), and a
transport the product wrote itself. Only listed hosts are touched, never other traffic.

With ``server`` (the run's SwapProxy), a synchronous request to the proxy itself, or one redirected
to it, does not go over loopback: the proxy answers it in memory (local.py) and this module turns
the answer into the response, or the timeout and connection errors, that the transport would have
produced. Async clients and other processes keep the socket.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import importlib
import json
import re
import weakref
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlencode

from pytest_slam.records import JSON
from pytest_slam.swap.local import LocalAnswer

DEFAULT_HOSTS = ("api.openai.com", "*.openai.azure.com", "*.cognitiveservices.azure.com")
HEADER = "x-slam-redirected-from"
ENDPOINTS = (
    "/chat/completions",
    "/completions",
    "/responses",
    "/embeddings",
    "/models",
    "/moderations",
    "/audio",
    "/images",
    "/files",
    "/uploads",
    "/batches",
    "/vector_stores",
    "/conversations",
    "/fine_tuning",
    "/realtime",
)
_DEPLOYMENT = re.compile(r"/deployments/([^/]+)(/.*)$")
_PREFIX = re.compile(r"^(?:/openai)?(?:/v1)?(?=/)")
_STACKS = ("httpx2", "httpx")


@dataclass(frozen=True)
class Redirected:
    """One redirected request, for the run's summary (never the proxy URL: it holds the secret)."""

    method: str
    original_url: str
    path: str
    model: str | None = None


class LocalServer(Protocol):
    """The swap proxy as this module reaches it in process (``proxy.SwapProxy``)."""

    @property
    def local(self) -> tuple[str, int]: ...

    def answer_local(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        timeout: float | None = None,
    ) -> LocalAnswer | None: ...


@dataclass
class Redirect:
    """Which hosts go where: ``base_url`` is called per request (the proxy URL carries a secret);
    ``server``, when given, answers requests addressed to it in process (local.py)."""

    base_url: Callable[[], str]
    hosts: tuple[str, ...] = DEFAULT_HOSTS
    on_redirect: Callable[[Redirected], None] | None = None
    server: LocalServer | None = None

    def is_server(self, host: str, port: int | None) -> bool:
        return self.server is not None and (host, port) == self.server.local

    def matches(self, host: str, port: int | None = None) -> bool:
        """A listed host (shell-style patterns such as ``*.openai.azure.com``, or ``host:port``)."""
        names = [host.lower()] + ([f"{host.lower()}:{port}"] if port else [])
        return any(fnmatch.fnmatchcase(n, p.lower()) for n in names for p in self.hosts)

    def target(self, raw_path: str) -> tuple[str, str, str | None]:
        """The proxy URL for a listed host's path and query, the API path, and the Azure deployment."""
        path, _, query = raw_path.partition("?")
        path, deployment = api_path(path)
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k != "api-version"]
        url = self.base_url().rstrip("/") + path
        return (f"{url}?{urlencode(kept)}" if kept else url), path, deployment


def api_path(path: str) -> tuple[str, str | None]:
    """``/openai/deployments/D/chat/completions`` -> (``/chat/completions``, ``D``)."""
    match = _DEPLOYMENT.search(path)
    if match:
        return match.group(2), unquote(match.group(1))
    segments = path.split("/")
    for i in range(1, len(segments)):
        tail = "/" + "/".join(segments[i:])
        if any(tail == e or tail.startswith(e + "/") for e in ENDPOINTS):
            return tail, None
    return _PREFIX.sub("", path, count=1), None


# -- installing ---------------------------------------------------------------------------------

_installed: list[Redirect] = []  # nested runs (pytester inside an armed run): the last one rules
# Transport methods as they were before ``install``, and requests/transports: httpx or httpx2
# objects, whichever is installed (imported by name at run time), hence Any at this boundary.
_originals: dict[tuple[type, str], Any] = {}
_loopback: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
_bypass: ContextVar[bool] = ContextVar("slam_redirect_bypass", default=False)


def install(
    proxy_base_url: Callable[[], str] | str,
    hosts: Iterable[str] = DEFAULT_HOSTS,
    on_redirect: Callable[[Redirected], None] | None = None,
    server: LocalServer | None = None,
) -> Redirect:
    """Send listed hosts' requests to ``proxy_base_url`` until ``uninstall`` of the returned rule;
    with ``server``, synchronous requests to it (and listed hosts') are answered in process."""
    base = proxy_base_url if callable(proxy_base_url) else (lambda: str(proxy_base_url))
    redirect = Redirect(base, tuple(hosts), on_redirect, server)
    for stack in _stacks():
        _wrap(stack)
    _installed.append(redirect)
    return redirect


def uninstall(redirect: Redirect | None = None) -> None:
    """End ``redirect`` (default: the latest); the transports are restored exactly as they were
    when none is left. Safe to call when nothing is installed."""
    if redirect is None and _installed:
        redirect = _installed[-1]
    if redirect in _installed:
        _installed.remove(redirect)
    if _installed:
        return
    for (cls, name), original in _originals.items():
        setattr(cls, name, original)
    _originals.clear()


def active() -> Redirect | None:
    """The redirect in force, or None when the run is not armed."""
    return _installed[-1] if _installed else None


@contextlib.contextmanager
def bypass() -> Iterator[None]:
    """The plugin's own calls (reference recording, a judge, an embeddings scorer) inside this block
    go where they were sent. A context variable: asyncio tasks inherit it, new threads do not."""
    token = _bypass.set(True)
    try:
        yield
    finally:
        _bypass.reset(token)


def _rule_for(request: Any, local: bool = False) -> Redirect | None:
    """The rule for a request to a listed host, or (``local``) to the proxy itself."""
    redirect = active()
    if redirect is None or _bypass.get():
        return None
    host, port = request.url.host, request.url.port
    if (local and redirect.is_server(host, port)) or redirect.matches(host, port):
        return redirect  # the proxy itself first: most requests, and a tuple compare
    return None


@functools.cache
def _stacks() -> tuple[ModuleType, ...]:
    """The installed HTTP stacks, found once per process: a miss costs a full ``sys.path`` search,
    and every opted-in test installs the redirect (0.13-0.15 ms per case when searched each time)."""
    found: dict[int, ModuleType] = {}
    for name in _STACKS:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        found.setdefault(id(module.HTTPTransport), module)  # httpx may be an alias of httpx2
    return tuple(found.values())


def _wrap(stack: ModuleType) -> None:
    sync_cls, async_cls = stack.HTTPTransport, stack.AsyncHTTPTransport
    if (sync_cls, "handle_request") in _originals:
        return
    sync_original = _originals[(sync_cls, "handle_request")] = sync_cls.handle_request
    async_original = _originals[(async_cls, "handle_async_request")] = (
        async_cls.handle_async_request
    )

    def handle_request(self: Any, request: Any) -> Any:
        redirect = _rule_for(request, local=True)
        if redirect is None:
            return sync_original(self, request)
        request.read()
        transport = self
        if not redirect.is_server(request.url.host, request.url.port):
            request, transport = _rewrite(redirect, stack, request), _via(self, stack, False)
        answer = _answer_local(redirect, request)
        if answer is None:
            return sync_original(transport, request)
        return _local_response(stack, request, answer)

    async def handle_async_request(self: Any, request: Any) -> Any:
        redirect = _rule_for(request)
        if redirect is None:
            return await async_original(self, request)
        await request.aread()
        transport = _via(self, stack, True)
        return await async_original(transport, _rewrite(redirect, stack, request))

    sync_cls.handle_request = handle_request
    async_cls.handle_async_request = handle_async_request


def _rewrite(redirect: Redirect, stack: ModuleType, request: Any) -> Any:
    """The same request, addressed to the proxy; an Azure deployment becomes the ``model``."""
    url, path, deployment = redirect.target(request.url.raw_path.decode("ascii"))
    content = request.content
    if deployment is not None:
        content = _with_model(content, deployment)
    new_url = stack.URL(url)
    headers = stack.Headers(request.headers)
    headers["host"] = new_url.netloc.decode("ascii")
    headers["content-length"] = str(len(content))
    headers[HEADER] = f"{request.url.scheme}://{request.url.host}"
    if redirect.on_redirect is not None:
        model = deployment or _model(content)
        redirect.on_redirect(Redirected(request.method, str(request.url), path, model))
    return stack.Request(
        request.method, new_url, headers=headers, content=content, extensions=request.extensions
    )


def _answer_local(redirect: Redirect, request: Any) -> LocalAnswer | None:
    if redirect.server is None:
        return None
    headers = [(n.decode("latin-1").lower(), v.decode("latin-1")) for n, v in request.headers.raw]
    target = request.url.raw_path.decode("ascii")
    return redirect.server.answer_local(
        request.method, target, headers, request.content, _timeout(request)
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
    if not came or answer.timed_out:
        answer.close()
        raise stack.ReadTimeout(f"pytest-slam: no answer within {timeout:g} s", request=request)
    if answer.failure is not None and not answer.status:
        raise stack.RemoteProtocolError(answer.failure, request=request)
    extensions = {"http_version": b"HTTP/1.1"}
    if answer.payload is not None:
        # A stream, not ``content=``: the client times and closes the body as it does one read
        # off a connection (``response.elapsed``, ``with_streaming_response``).
        headers = [*answer.headers, ("Content-Length", str(len(answer.payload)))]
        return stack.Response(answer.status, headers=headers,
                              stream=stack.ByteStream(answer.payload), request=request,
                              extensions=extensions)  # fmt: skip
    headers = [*answer.headers, ("Transfer-Encoding", "chunked")]
    body = _body_class(stack)(answer, timeout, request)
    return stack.Response(answer.status, headers=headers, stream=body, request=request,
                          extensions=extensions)  # fmt: skip


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


@functools.cache
def _body_class(stack: ModuleType) -> type[_LocalBody]:
    return type("LocalBody", (_LocalBody, stack.SyncByteStream), {"stack": stack})


def _with_model(content: bytes, deployment: str) -> bytes:
    body = _json(content)
    if body is None:
        return content
    return json.dumps({**body, "model": deployment}).encode()


def _model(content: bytes) -> str | None:
    model = (_json(content) or {}).get("model")
    return model if isinstance(model, str) else None


def _json(content: bytes) -> dict[str, JSON] | None:
    try:
        body = json.loads(content) if content else None
    except ValueError:  # a multipart upload (audio, files): not JSON, sent as it is
        return None
    return body if isinstance(body, dict) else None


def _via(transport: Any, stack: ModuleType, is_async: bool) -> Any:
    """The caller's own connection pool, unless it goes through an HTTP proxy that cannot reach
    loopback (``HTTPS_PROXY``): then a plain transport of the same stack, kept beside it."""
    if type(transport._pool).__name__ in ("ConnectionPool", "AsyncConnectionPool"):
        return transport
    direct = _loopback.get(transport)
    if direct is None:
        cls = stack.AsyncHTTPTransport if is_async else stack.HTTPTransport
        direct = _loopback[transport] = cls(trust_env=False)
    return direct
