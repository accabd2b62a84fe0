"""Providers found by name: the built-ins, then the ``pytest_slam.engines`` entry points (the
entry point's name is the ``provider`` users write), then an import path ``package.module:Class``.

A provider is a class (made with no arguments) or an instance satisfying ``protocol.Provider``.
One from outside the package is fenced: whatever it raises when loaded, built or asked (``Fenced``)
is ``ProviderFault``, one line naming the distribution, the entry point and the fix, which the run
reports as that model's engine error instead of an INTERNALERROR.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import importlib.metadata
import tempfile
from pathlib import Path
from typing import Any

from pytest_slam.errors import SlamError
from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.curated import Curated
from pytest_slam.swap.engines.endpoint import Endpoint, Ollama
from pytest_slam.swap.engines.llamacpp import LlamaCpp
from pytest_slam.swap.engines.openai_api import OpenAI
from pytest_slam.swap.engines.protocol import ModelSpecError, Provider, Running, Say
from pytest_slam.swap.engines.vllm import Vllm
from pytest_slam.swap.thirdparty import FAULTS, CallThread, Origin, fault, origin_of

GROUP = "pytest_slam.engines"
BUILTINS: dict[str, Provider] = {
    p.name: p for p in (LlamaCpp(), Vllm(), Ollama(), OpenAI(), Endpoint(), Curated())
}
_FOUND: dict[str, Provider] = {}  # installed or imported providers, by the name they were asked by


class UnknownProvider(ModelSpecError):
    """A provider name that is neither built in, nor installed, nor importable (``why``: the
    reason an entry point or import path did not load, else empty)."""

    def __init__(self, name: str, why: str = "") -> None:
        self.why = why
        super().__init__(f"unknown provider {name!r}{why}; {choices()}.")


class ProviderFault(ModelSpecError, kind="engine"):
    """An engine provider from outside the package raised: loading, building or asking it."""


def _fault(origin: Origin, doing: str, exc: BaseException) -> ProviderFault:
    return ProviderFault(
        f"engine provider {origin.name!r} raised {doing}: {fault(exc)}; it is "
        f"{origin.describe()}: {origin.fix('set another provider in [tool.slam.models]')}"
    )


START_GRACE_S = 10.0  # beyond engine_timeout_s, for a start() to give up and clean up itself


class Fenced:
    """An outside provider, asked through a fence: what it raises is a ``ProviderFault``
    (pytest-slam's own errors, which it may raise as built-ins do, pass as they are), ``SystemExit``
    included; its ``start()`` runs under a deadline (the ``timeout_s`` it is given, plus
    ``START_GRACE_S``) and must return a running engine, itself fenced."""

    def __init__(self, inner: object, origin: Origin) -> None:
        self._inner, self._origin = inner, origin
        self._thread: CallThread | None = None  # where its start() runs: one, for the process

    def __getattr__(self, attr: str) -> Any:
        try:
            value = getattr(self._inner, attr)
        except AttributeError:
            raise
        except FAULTS as exc:
            raise _fault(self._origin, f"on reading {attr}", exc) from None
        if not callable(value) or isinstance(value, type):
            return value

        @functools.wraps(value)
        def fenced(*args: Any, **kwargs: Any) -> Any:
            if attr == "start":
                return self._start(value, args, kwargs)
            return self._call(attr, value, args, kwargs)

        return fenced

    def _call(self, attr: str, value: Any, args: Any, kwargs: Any) -> Any:
        try:
            return value(*args, **kwargs)
        except SlamError:
            raise
        except FAULTS as exc:
            raise _fault(self._origin, f"in {attr}()", exc) from None

    def _start(self, value: Any, args: Any, kwargs: Any) -> Any:
        """``start()`` on its daemon thread (``CallThread``): a start that never returns is a fault
        at its deadline (the thread, and whatever it started, is left behind), and what it
        returns is checked."""
        timeout_s = float(kwargs.get("timeout_s", args[2] if len(args) > 2 else 0) or 0)
        deadline_s = timeout_s + START_GRACE_S
        if self._thread is None:
            self._thread = CallThread(f"slam-start-{self._origin.name}")
        run = contextvars.copy_context().run

        def call() -> tuple[bool, Any]:
            try:
                return True, run(self._call, "start", value, args, kwargs)
            except BaseException as exc:  # handed to the caller's thread, raised there
                return False, exc

        done = self._thread.run(call, deadline_s)
        if done is None:
            raise ProviderFault(
                f"engine provider {self._origin.name!r}: start() did not return within "
                f"{deadline_s:g} s ([tool.slam] engine_timeout_s {timeout_s:g} s + "
                f"{START_GRACE_S:g} s); it is {self._origin.describe()}: "
                f"{self._origin.fix('set another provider in [tool.slam.models], or raise engine_timeout_s')}"
            )
        ok, result = done
        if not ok:
            raise result
        return Fenced(self._running(result), self._origin)

    def _running(self, server: Any) -> Any:
        """``server`` when it is a running engine (``protocol.Running``), else a fault in one line."""
        try:
            usable = (
                isinstance(server.base_url, str)
                and isinstance(server.start_line(), str)
                and callable(server.stop)
            )
        except FAULTS:
            usable = False
        if not usable:
            shown = repr(server)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise ProviderFault(
                f"engine provider {self._origin.name!r}: start() returned {shown}, not a running "
                "engine (base_url, start_line(), stop(): "
                "pytest_slam.swap.engines.protocol.Running); it is "
                f"{self._origin.describe()}: {self._origin.fix('set another provider in [tool.slam.models]')}"
            )
        return server

    def __repr__(self) -> str:
        return f"Fenced({self._inner!r})"


def installed() -> dict[str, importlib.metadata.EntryPoint]:
    """The engines other distributions declare, by entry point name."""
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=GROUP)}


def known() -> list[str]:
    """Every provider name that resolves without an import path: built-ins first."""
    return [*BUILTINS, *sorted(set(installed()) - set(BUILTINS))]


def choices() -> str:
    """What a provider may be, for a message about one that is not."""
    return (
        f"use one of {', '.join(known())}, or declare one: an entry point in group {GROUP!r} "
        "(its name is the provider) or an import path package.module:Class"
    )


def find(name: str) -> Provider:
    """The provider called ``name``; UnknownProvider says which names are known and how to add one."""
    found = BUILTINS.get(name) or _FOUND.get(name)
    if found is not None:
        return found
    entry = installed().get(name)
    if entry is None and ":" not in name:
        raise UnknownProvider(name)
    origin = origin_of(GROUP, name, entry)
    try:
        if entry is not None:
            obj = entry.load()
        else:
            module, _, attr = name.partition(":")
            obj = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise UnknownProvider(name, f" (it does not load: {exc})") from None
    except FAULTS as exc:  # its module raised on import
        raise _fault(origin, "on import", exc) from None
    try:
        provider = obj() if isinstance(obj, type) else obj
        is_provider = isinstance(provider, Provider)
    except FAULTS as exc:
        raise _fault(origin, "when built", exc) from None
    if not is_provider:
        why = f" ({obj!r} is not an engine provider: pytest_slam.swap.engines.protocol.Provider)"
        raise UnknownProvider(name, why)
    fenced: Provider = Fenced(provider, origin)
    _FOUND[name] = fenced
    return fenced


def provider_of(spec: ModelSpec) -> Provider:
    return find(spec.provider)


def inline(prefix: str) -> Provider | None:
    """The provider an inline spec ``prefix:...`` names (built-in or installed), None if none."""
    if prefix in BUILTINS or prefix in _FOUND or prefix in installed():
        return find(prefix)
    return None


def needs_engine(spec: ModelSpec) -> bool:
    """The run must start this model's server: its provider is managed and no URL is given."""
    return provider_of(spec).managed and not spec.base_urls


def start_engine(
    spec: ModelSpec,
    log_dir: Path | None,
    timeout_s: float,
    slots: int = 1,
    say: Say | None = None,
    beat_s: float = 0.0,
) -> Running:
    """Start the engine a local model needs and return it running; ``spec.base_urls`` is set.

    ``slots``: how many requests the run may send at once (its xdist workers); ``log_dir``: the
    plugin passes a folder under pytest's basetemp, so pytest's retention removes old logs;
    ``say`` and ``beat_s``: progress lines (``ManagedServer.start``).
    """
    log_dir = log_dir or Path(tempfile.mkdtemp(prefix="slam-engines-"))
    server = provider_of(spec).start(spec, log_dir, timeout_s, slots, say, beat_s)
    spec.base_urls = [server.base_url]
    return server
