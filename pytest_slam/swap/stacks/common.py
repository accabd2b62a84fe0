"""What every client stack shares: which hosts go where, the run's rule in force, the rewrite.

A stack module (``*_stack.py`` in this package) wraps one HTTP library's send points; each wrapper
asks ``rule_for`` whether a request is the swap's, and builds its library's request from
``Redirect.target`` and ``rewritten_body``. The rule itself knows no HTTP library.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import re
from collections.abc import Callable, Iterator
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


@dataclass(frozen=True)
class Redirected:
    """One redirected request, for the run's summary (never the proxy URL: it holds the secret)."""

    method: str
    original_url: str
    path: str
    model: str | None = None


class LocalServer(Protocol):
    """The swap proxy as a stack reaches it in process (``proxy.SwapProxy``)."""

    @property
    def local(self) -> tuple[str, int]: ...

    def answer_local(
        self,
        method: str,
        target: str,
        headers: list[tuple[str, str]],
        body: bytes,
        timeout: float | None = None,
        in_place: bool = True,
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

    def rewritten_body(
        self, method: str, original_url: str, path: str, content: bytes, deployment: str | None
    ) -> bytes:
        """The body sent to the proxy (an Azure deployment becomes its ``model``); the redirect
        is noted for the run's summary."""
        if deployment is not None:
            content = _with_model(content, deployment)
        if self.on_redirect is not None:
            model = deployment or _model(content)
            self.on_redirect(Redirected(method, original_url, path, model))
        return content


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


# -- the rule in force ------------------------------------------------------------------------

INSTALLED: list[Redirect] = []  # nested runs (pytester inside an armed run): the last one rules
_bypass: ContextVar[bool] = ContextVar("slam_redirect_bypass", default=False)


def active() -> Redirect | None:
    """The redirect in force, or None when the run is not armed."""
    return INSTALLED[-1] if INSTALLED else None


@contextlib.contextmanager
def bypass() -> Iterator[None]:
    """The plugin's own calls (reference recording, a judge, an embeddings scorer) inside this block
    go where they were sent. A context variable: asyncio tasks inherit it, new threads do not."""
    token = _bypass.set(True)
    try:
        yield
    finally:
        _bypass.reset(token)


def rule_for(host: str, port: int | None, local: bool = False) -> Redirect | None:
    """The rule for a request to a listed host, or (``local``) to the proxy itself."""
    redirect = active()
    if redirect is None or _bypass.get():
        return None
    if (local and redirect.is_server(host, port)) or redirect.matches(host, port):
        return redirect  # the proxy itself first: most requests, and a tuple compare
    return None


# -- what a stack module provides ---------------------------------------------------------------


@dataclass(frozen=True)
class Patch:
    """One send point replaced while a redirect is installed: ``setattr(owner, name, new)``."""

    owner: type
    name: str
    new: Any  # a function standing in for the library's own method (its types are the library's)


class Stack(Protocol):
    """One HTTP library (``STACK`` of a ``*_stack.py`` module in this package)."""

    name: str
    modules: tuple[str, ...]  # the names of its modules that have send points to wrap

    def libraries(self) -> tuple[ModuleType, ...]:
        """Those of its modules the process has imported (``sys.modules``): never an import."""
        ...

    def patches(self, library: ModuleType) -> list[Patch]:
        """The wrapped send points of ``library``, built from its methods as they are now."""
        ...
