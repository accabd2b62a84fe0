"""Embeddings during an opted-in test: never sent to the chat candidate, kept in the goldens.

A product that embeds (retrieval, deduplication, routing by similarity) calls ``/v1/embeddings``
through the same ``OPENAI_BASE_URL`` as its chat calls. The swap is about the chat model, and a chat
engine cannot embed (llama.cpp with a chat model answers 501), so during an opted-in test an
embeddings call is answered, in this order:

1. from the golden file of the test's module (the same file as the reference's chat answers, keyed
   like a chat request by ``golden.keys.request_key``; the answer is the whole response as JSON),
   so a replay needs no key and no network;
2. by the model ``[tool.slam] embeddings = "NAME"`` names (its own key, its own model name), or else
   by the endpoint the product had configured before the plugin (its ``OPENAI_BASE_URL``, default
   the OpenAI API), with the caller's own headers: its key goes where it sent it, nowhere else.
   A call redirected from another host (an Azure resource) is not sent to that endpoint with its
   key: it needs ``embeddings = "NAME"``.

What (2) answers is recorded when the run records (``--slm-record=new|all``); in replay mode a
miss fails that call with the command that records it, unless an embeddings model is configured.
Without a reference (``reference = "none"``) nothing is kept and (2) answers every call.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.keys import request_key
from pytest_slam.records import JSON, GoldenAnswer, GoldenRecord, ModelSpec
from pytest_slam.swap import upstream
from pytest_slam.swap.models import api_key

if TYPE_CHECKING:
    from pytest_slam.golden.reference import CallerContext, ReferenceService

REDIRECTED = "x-slam-redirected-from"


class EmbeddingsService:
    """Answers ``/v1/embeddings`` for the swap router: golden replay, else forward (and record)."""

    def __init__(
        self, original_url: str, spec: ModelSpec | None, reference: ReferenceService | None = None
    ) -> None:
        self.original_url = original_url.rstrip("/")
        self.spec = spec  # [tool.slam] embeddings
        self.reference = reference  # its store and record mode

    def serve(
        self, ctx: CallerContext | None, body: dict[str, JSON], headers: list[tuple[str, str]]
    ) -> tuple[int, bytes]:
        """``(status, JSON payload)`` for one embeddings request made while ``ctx`` runs."""
        reference = self.reference
        key = request_key(body)
        if ctx is not None and reference is not None:
            try:
                rec = reference.store.lookup(ctx.module, key)
            except GoldenError as exc:
                return _error(502, f"pytest-slam: {exc}")
            if (
                rec is not None
                and rec.answers
                and not reference._wants_record(ctx.module, key, rec)
            ):
                reference.store.mark_used(ctx.module, key, ctx.test)
                return 200, rec.answers[0].text.encode()
            if reference.mode == "none" and self.spec is None:
                path = reference.store.path_for(ctx.module)
                return _error(
                    404,
                    (
                        f"pytest-slam: no golden embeddings for this request (key {key}) in {path}. "
                        f"Record them from {self.original_url} with: "
                        f"{reference.record_command(ctx.nodeid)}, or set [tool.slam] embeddings = "
                        '"NAME" to a model that serves embeddings'
                    ),
                )
        status, payload = self._forward(body, headers)
        if status == 200 and ctx is not None and reference is not None and reference.mode != "none":
            self._record(ctx, reference, key, body, payload)
        return status, payload

    def _forward(self, body: dict[str, JSON], headers: list[tuple[str, str]]) -> tuple[int, bytes]:
        from pytest_slam.swap.proxy import forwarded_headers

        if self.spec is not None:
            if not self.spec.base_urls:
                return _error(
                    503, f"pytest-slam: embeddings model {self.spec.name!r} has no running server"
                )
            url, where = self.spec.base_urls[0], f"embeddings model {self.spec.name!r}"
            sent = [("Content-Type", "application/json"), ("Accept-Encoding", "identity")]
            key = api_key(self.spec)
            if key:
                sent.append(("Authorization", f"Bearer {key}"))
            data = json.dumps({**body, "model": self.spec.model_id or body.get("model")})
        else:
            origin = next((v for n, v in headers if n == REDIRECTED), None)
            if origin is not None and origin != _origin(self.original_url):
                return _error(
                    409,
                    (
                        f"pytest-slam: an embeddings call to {origin} cannot be answered: its key "
                        f"belongs to {origin}, not to {self.original_url}; set [tool.slam] embeddings "
                        '= "NAME" to a model that serves embeddings'
                    ),
                )
            url, where = self.original_url, self.original_url
            sent = [(n, v) for n, v in forwarded_headers(headers) if n != REDIRECTED]
            data = json.dumps(body)
        try:
            resp = upstream.forward(
                url,
                "POST",
                "/embeddings",
                sent,
                data.encode(),
                upstream.timeout_for(self.spec) if self.spec else 120.0,
            )
            return resp.status, resp.read()
        except upstream.UpstreamUnreachable as exc:
            return _error(502, f"pytest-slam: embeddings endpoint {where} is unreachable ({exc})")

    @staticmethod
    def _record(
        ctx: CallerContext,
        reference: ReferenceService,
        key: str,
        body: dict[str, JSON],
        payload: bytes,
    ) -> None:
        from pytest_slam.records import utc_now

        try:
            data = json.loads(payload)
        except ValueError:
            return  # not an embeddings response: served, never kept
        usage = data.get("usage") if isinstance(data, dict) else None
        answer = GoldenAnswer(
            text=payload.decode("utf-8"),
            model=data.get("model") if isinstance(data, dict) else None,
            recorded_at=utc_now(),
            prompt_tokens=usage.get("prompt_tokens") if isinstance(usage, dict) else None,
        )
        rec = GoldenRecord(key=key, request=body, answers=[answer], tests=[ctx.test])
        try:
            reference.store.record(ctx.module, rec, ctx.test)
        except GoldenError:
            return  # buffered by the store; the run's summary says which files were not written
        reference.rerecorded.add((ctx.module, key))


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}"


def _error(status: int, message: str) -> tuple[int, bytes]:
    return status, json.dumps({"error": {"message": message, "type": "pytest_slam"}}).encode()
