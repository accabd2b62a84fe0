"""Redirect clients that ``OPENAI_BASE_URL`` cannot reach to the swap proxy, at the HTTP transport.

``AzureOpenAI(...)`` and ``OpenAI(base_url="https://api.openai.com/v1")`` (gateways, settings-driven
clients) ignore ``OPENAI_BASE_URL``, so without this their calls would leave the machine while the
report says "candidate passed" for a test whose calls the swap never saw. While a run is armed,
``install`` wraps the send points of each HTTP library that is installed (``swap/stacks/``: one
module per library, on the model of vcrpy's stubs: httpx/httpx2 sync and async, which the openai
SDK's default clients use, and requests), so a request whose host is listed goes to the local
proxy instead: clients built before ``install`` included.

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

Raw calls of a wrapped library to a listed host are redirected the same way. Not reached: clients
on a library with no stack here (aiohttp, the SDK's ``DefaultAioHttpClient``), websockets
(Realtime), and a transport the product wrote itself. Only listed hosts are touched, never other
traffic. With ``server`` (the run's SwapProxy), a stack may answer a request in memory instead of
over loopback (the httpx stack does so for synchronous requests: local.py).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pytest_slam.swap import stacks
from pytest_slam.swap.stacks.common import (
    DEFAULT_HOSTS,
    HEADER,
    INSTALLED,
    LocalServer,
    Redirect,
    Redirected,
    active,
    api_path,
    bypass,
)

__all__ = [
    "DEFAULT_HOSTS",
    "HEADER",
    "Redirect",
    "Redirected",
    "active",
    "api_path",
    "bypass",
    "install",
    "uninstall",
]


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
    stacks.install()
    INSTALLED.append(redirect)
    return redirect


def uninstall(redirect: Redirect | None = None) -> None:
    """End ``redirect`` (default: the latest); the send points are restored exactly as they were
    when none is left. Safe to call when nothing is installed."""
    if redirect is None and INSTALLED:
        redirect = INSTALLED[-1]
    if redirect in INSTALLED:
        INSTALLED.remove(redirect)
    if not INSTALLED:
        stacks.restore()
