"""vcrpy / pytest-recording in the product: cassettes never hold the swap, and never replay it.

Two kinds of traffic could reach a product's cassette during an opted-in test:

- the plugin's own hops (proxy to candidate, reference, judge, tokenizer): they use the connection
  classes ``http.client`` had before any cassette patched them (upstream.py), so vcrpy never sees them;
- the product's call to the loopback proxy, when the product's HTTP stack is one vcrpy patches
  (httpx, httpx2: the openai SDK 3.x's, from vcrpy 9.4; requests, urllib). Recorded, it would carry
  the proxy's random port and run secret, fail to match on the next run ("closest differ in port"),
  and, replayed, answer the test without the candidate. So each cassette pytest-recording opens gets
  a ``before_record_request`` that drops requests to this process's proxy, after the product's own
  filters: vcrpy then neither records nor plays them, and the call always reaches the candidate.

Requests to anything else (the product's own services, the hosted API outside opted-in tests) are
recorded and replayed by the product's cassettes as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def keep_out(vcr: Any, prefix: str) -> None:  # a vcr.VCR: vcrpy is untyped
    """Make every cassette ``vcr`` opens ignore requests whose URI starts with ``prefix``.

    Wraps the instance's ``get_merged_config`` (what ``use_cassette`` reads when it opens a cassette)
    so the product's ``vcr_config`` and ``vcr`` marks keep their own ``before_record_request``.
    """
    merged: Callable[..., dict[str, object]] = vcr.get_merged_config

    def get_merged_config(**kwargs: object) -> dict[str, object]:
        config = merged(**kwargs)
        inner = config.get("before_record_request")
        if callable(inner):
            config["before_record_request"] = _dropping(prefix, inner)
        return config

    vcr.get_merged_config = get_merged_config


def _dropping(prefix: str, inner: Callable[[object], object]) -> Callable[[object], object]:
    def before_record_request(request: object) -> object:
        if str(getattr(request, "uri", "")).startswith(prefix):
            return None  # vcrpy: not recorded, not played; the request goes through live
        return inner(request)

    return before_record_request
