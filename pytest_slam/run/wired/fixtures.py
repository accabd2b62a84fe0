"""The objects the ``slm_model`` and ``gpt4_reference`` fixtures hand to a test.

Both give ready OpenAI clients (sync and async) bound to the loopback proxy, so product code can run once
with the candidate and once with the reference through the same code path, and a small ``chat()``.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from pytest_slam.records import Call, GoldenRecord, ModelSpec
from pytest_slam.swap.router import TestContext

if TYPE_CHECKING:  # the openai SDK loads when a test first asks for a client
    import openai

    from pytest_slam.golden.reference import ReferenceService

CLIENT_KEY = "sk-slam-local"  # the proxy ignores it; the SDK insists on one


def _messages(prompt: str | list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
        return [{"role": "system", "content": system}, *messages] if system else messages
    return list(prompt)


class _Clients:
    base_url: str

    @cached_property
    def client(self) -> openai.OpenAI:
        import openai

        return openai.OpenAI(base_url=self.base_url, api_key=CLIENT_KEY, max_retries=0)

    @cached_property
    def async_client(self) -> openai.AsyncOpenAI:
        import openai

        return openai.AsyncOpenAI(base_url=self.base_url, api_key=CLIENT_KEY, max_retries=0)

    def _create(
        self, prompt: str | list[dict[str, Any]], system: str | None, **kwargs: Any
    ) -> object:
        kwargs.setdefault("model", "gpt-4")
        kwargs.setdefault("temperature", 0)
        kwargs["messages"] = _messages(prompt, system)  # the test's own messages, as given
        return self.client.chat.completions.create(**kwargs)


class SlamModel(_Clients):
    """The candidate model of this test run: ``slm_model.name``, ``.client``, ``.chat()``, ``.calls``."""

    def __init__(self, spec: ModelSpec, base_url: str, ctx: TestContext) -> None:
        self.spec, self.base_url, self.ctx = spec, base_url, ctx

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def calls(self) -> list[Call]:
        """Every candidate call this test made so far, through any client."""
        return list(self.ctx.calls)

    def chat(
        self, prompt: str | list[dict[str, Any]], system: str | None = None, **kwargs: Any
    ) -> Call:
        """One chat call to the candidate; returns its Call record (text, usage, timings)."""
        before = len(self.ctx.calls)
        self._create(prompt, system, **kwargs)
        return self.ctx.calls[before]

    def __repr__(self) -> str:
        return f"<slm_model {self.name}>"


class ReferenceClient(_Clients):
    """The reference model as the golden store answers it (replay), or records it (--slm-record)."""

    def __init__(self, base_url: str, ctx: TestContext, service: ReferenceService) -> None:
        self.base_url, self.ctx, self.service = base_url, ctx, service

    def chat(
        self, prompt: str | list[dict[str, Any]], system: str | None = None, **kwargs: Any
    ) -> Call:
        before = len(self.ctx.reference_calls)
        self._create(prompt, system, **kwargs)
        return self.ctx.reference_calls[before]

    def answer_for(self, call: Call) -> GoldenRecord:
        """The reference's golden answer to the same request a candidate call served."""
        return self.service.answer(self.ctx.module, self.ctx.test, call.request, self.ctx.nodeid)

    def text_for(self, call: Call) -> str:
        rec = self.answer_for(call)
        return rec.answers[0].text
