"""A model call built once (issue 49), as httpx builds one ``Request`` and passes it down.

The body a server is sent was built in four places (the router, the answers fetched ahead, a
refresh's reference answers and ``forward_chat``) that agreed only by convention, and a claim of a
fetched answer or a kept one matched only while they did. Here it is built once: ``Request``
holds the product's body (what the call's record and the golden key keep), the body sent upstream
(its model name, always streamed with usage, the generation cap, a candidate's pinned seed) and
the golden key; the claim of an answer fetched ahead and the answer cache both read ``sent``.
"""

from __future__ import annotations

from dataclasses import dataclass

from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.registry import provider_of
from pytest_slam.swap.upstream import JSONObject

CANDIDATE_SEED = 1234  # the seed a candidate request gets when the product set none
# What a model's provider adds to each request it is sent (its cap field, its defaults), asked once
# per model and not per call: keyed by the spec's id, with the spec to tell a reused id apart.
_SHAPES: dict[int, tuple[ModelSpec, str, str, JSONObject]] = {}
MAX_SHAPES = 256  # specs made and dropped (tests, a calibration's) start the memo afresh


@dataclass(frozen=True, eq=False)
class Request:
    """One call to one model: built by ``build`` (or ``for_reference``), never rebuilt."""

    body: JSONObject  # the caller's body: the call's record, the golden key
    sent: JSONObject  # the body the server is sent: what a claim and the cache match
    key: str | None = None  # the golden key (a paired test's candidate call, a reference's)
    cap: int | None = None  # the output limit sent when the caller set none


def build(
    body: JSONObject, spec: ModelSpec, role: str, cap: int | None = None, key: str | None = None
) -> Request:
    """The request ``spec`` is sent for ``body`` in the role ``role``."""
    return Request(body, pin_seed(upstream_body(body, spec, cap), role), key, cap)


def for_reference(body: JSONObject, spec: ModelSpec, key: str | None = None) -> Request:
    """What the reference is sent for a request: the product's body, unstreamed (a golden answer
    is one completion, whoever streamed it)."""
    unstreamed = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
    return build(unstreamed, spec, "reference", key=key)


def upstream_body(body: JSONObject, spec: ModelSpec, cap: int | None = None) -> JSONObject:
    """The request as the target should see it: its own model name, always streamed, with usage;
    ``cap`` (generation_cap) as its output limit when the caller set none."""
    out = dict(body)
    out["model"] = spec.model_id or body.get("model")
    out["stream"] = True
    out["stream_options"] = {"include_usage": True}
    cap_field, defaults = _shape(spec)
    if cap is not None:  # hosted OpenAI models (o-series) refuse max_tokens; servers take both
        out[cap_field] = cap
    for key, value in defaults.items():  # llama.cpp: no prompt cache
        out.setdefault(key, value)
    return out


def _shape(spec: ModelSpec) -> tuple[str, JSONObject]:
    """``spec``'s provider's cap field and request defaults, as its first request found them."""
    known = _SHAPES.get(id(spec))
    if known is not None and known[0] is spec and known[1] == spec.provider:
        return known[2], known[3]
    provider = provider_of(spec)
    if len(_SHAPES) >= MAX_SHAPES:
        _SHAPES.clear()
    _SHAPES[id(spec)] = (spec, spec.provider, provider.cap_field, provider.request_defaults(spec))
    return provider.cap_field, _SHAPES[id(spec)][3]


def pin_seed(payload: JSONObject, role: str) -> JSONObject:
    """A candidate's sampling pinned: ``seed`` added when the product set none, so a sampling
    candidate (llama.cpp, vLLM, hosted APIs on a best-effort basis) gives the same answer to the
    same request from run to run. Its temperature stays what the request says; the reference and
    the judge are asked as the request says. ``call.request`` never carries it (the golden key
    is the product's request)."""
    if role == "candidate" and payload.get("seed") is None:
        payload["seed"] = CANDIDATE_SEED
    return payload
