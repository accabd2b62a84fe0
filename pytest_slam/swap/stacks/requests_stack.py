"""requests: ``HTTPAdapter.send``, the one send point of every ``requests`` call and Session.

A request to a listed host is sent to the proxy instead, over loopback and never through an HTTP
proxy from the environment (``HTTPS_PROXY`` cannot reach loopback). The response the caller gets
names the URL it asked for, as the httpx stack's does: the proxy URL carries the run's secret.
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

from pytest_slam.swap.stacks.common import HEADER, Patch, Redirect, rule_for

# ``requests.PreparedRequest`` and ``Response`` objects: requests is imported by name at run time,
# hence Any at this boundary.


class RequestsStack:
    name = "requests"
    modules = ("requests.adapters",)

    def libraries(self) -> tuple[ModuleType, ...]:
        adapters = sys.modules.get("requests.adapters")
        return () if adapters is None or not hasattr(adapters, "HTTPAdapter") else (adapters,)

    def patches(self, library: ModuleType) -> list[Patch]:
        adapter = library.HTTPAdapter
        return [Patch(adapter, "send", _send(adapter.send))]


STACK = RequestsStack()


def _send(original: Any) -> Any:
    def send(
        self: Any,
        request: Any,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> Any:
        parts = urlsplit(request.url)
        redirect = rule_for(parts.hostname or "", parts.port)
        if redirect is None:
            return original(
                self,
                request,
                stream=stream,
                timeout=timeout,
                verify=verify,
                cert=cert,
                proxies=proxies,
            )
        response = original(
            self,
            _rewrite(redirect, request),
            stream=stream,
            timeout=timeout,
            verify=verify,
            cert=cert,
            proxies={},
        )
        response.request, response.url = request, request.url
        return response

    return send


def _rewrite(redirect: Redirect, request: Any) -> Any:
    """The same request, addressed to the proxy; an Azure deployment becomes the ``model``. A
    streamed body (a generator, a file) goes as it is."""
    parts = urlsplit(request.url)
    url, path, deployment = redirect.target(parts.path + (f"?{parts.query}" if parts.query else ""))
    body = request.body
    whole = isinstance(body, bytes | str)
    content = (body.encode() if isinstance(body, str) else body) if whole else b""
    content = redirect.rewritten_body(request.method, request.url, path, content, deployment)
    new = request.copy()
    new.url = url
    if whole:
        new.body = content
        new.headers["Content-Length"] = str(len(content))
    if "Host" in new.headers:
        new.headers["Host"] = urlsplit(url).netloc
    new.headers[HEADER] = f"{parts.scheme}://{parts.hostname}"
    return new
