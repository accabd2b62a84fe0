"""The reference model's side of a swap: golden answers replayed, or recorded from the real model.

Replay is the default and what CI runs: a request with no golden answer fails the test with the exact
command that records it. Recording asks the real reference (a hosted API, or any model spec) with
retries and backoff. Every recorded answer is a paid call, so it is in its golden file (under the
file's lock, replaced atomically) before the call that paid for it returns: a run killed later
keeps it. A failed recording writes nothing.
Latency is never served from the cache: a replayed answer carries the latency measured when it was
recorded, and it is shown as such.
Re-recording (``--slm-record=all``) keeps an old answer as it is, ``recorded_at`` and latency
included, when the reference gives the same answer again: two refreshes with the same answers leave
the golden files byte for byte the same, so a pull request shows only answers that changed.
"""

from __future__ import annotations

import email.utils
import http.client
import re
import shlex
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Protocol

from pytest_slam.errors import SlamError
from pytest_slam.golden import misses
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.paid import Paid
from pytest_slam.golden.prefetch import ReferenceQueue
from pytest_slam.golden.redact import scrub_answer
from pytest_slam.golden.store import GoldenStore
from pytest_slam.golden.turns import reference_turn, with_turn
from pytest_slam.records import (
    JSON,
    Call,
    GoldenAnswer,
    GoldenRecord,
    ModelSpec,
    to_us,
    utc_moment,
    utc_now,
)
from pytest_slam.swap.chat import LIMIT_KEYS, ChatResult, Relay, Target, forward_chat
from pytest_slam.swap.engines.registry import provider_of
from pytest_slam.swap.limits import Limiter
from pytest_slam.swap.models import api_key
from pytest_slam.swap.request import Request, for_reference

RETRY_STATUSES = {408, 409, 429, 500, 502, 503, 504}
MAX_RETRY_AFTER_S = 30.0
MAX_READ = 64  # entries read for a call and kept for its pairing, at most (a few KiB each)
SAME_ANSWER_FIELDS = ("text", "model", "finish_reason", "tool_calls", "prompt_tokens",
                      "completion_tokens", "system_fingerprint")  # fmt: skip


class MissingGolden(LookupError, SlamError, kind="golden"):
    """No golden answer for a request, in replay mode."""


class ReferenceFailed(RuntimeError, SlamError, kind="upstream"):
    """The real reference could not be reached or kept failing while recording."""


def completion_from(rec: GoldenRecord, sample: int = 0) -> dict[str, JSON]:
    """The ChatCompletion the reference returned, rebuilt from its golden answer: every choice
    (``n``), logprobs, finish reasons, the usage object with its details, the system fingerprint.

    Tool calls keep their recorded ids (one without an id gets ``call_N``): the product sends them
    back in its next request, whose golden key replaces ids by their order anyway (golden.keys).
    """
    from pytest_slam.swap.chat import completion_choice

    ans = rec.answers[sample]
    first = {
        "index": 0,
        "text": ans.text,
        "finish_reason": ans.finish_reason,
        "tool_calls": _with_ids(ans.tool_calls),
        "logprobs": ans.logprobs,
    }
    others = [{**c, "tool_calls": _with_ids(c.get("tool_calls"))} for c in ans.other_choices or ()]
    usage = None
    if ans.prompt_tokens is not None and ans.completion_tokens is not None:
        usage = {
            "prompt_tokens": ans.prompt_tokens,
            "completion_tokens": ans.completion_tokens,
            "total_tokens": ans.prompt_tokens + ans.completion_tokens,
            **(ans.usage_details or {}),
        }
    return {
        "id": f"chatcmpl-golden-{rec.key}",
        "object": "chat.completion",
        "created": 0,
        "model": ans.model or "",
        "system_fingerprint": ans.system_fingerprint,
        "usage": usage,
        "choices": [completion_choice(c) for c in [first, *others]],
    }


def _with_ids(tool_calls: list[dict[str, JSON]] | None) -> list[dict[str, JSON]] | None:
    """Recorded tool calls, each with an id and a type (hand-written goldens may lack them)."""
    if not tool_calls:
        return None
    return [
        {"type": "function", **tc, "id": tc.get("id") or f"call_{i}"}
        for i, tc in enumerate(tool_calls)
    ]


def _ms(value: float | None) -> float | None:
    """Milliseconds to 0.1 ms: finer digits are noise in a diff, not information."""
    return None if value is None else round(value, 1)


MODEL_FILE_SUFFIXES = (".gguf", ".ggml", ".bin", ".safetensors", ".onnx", ".pt", ".pth")


def model_id(returned: str | None) -> str | None:
    """The model an answer names, as an id: a server that names its model by its file (llama.cpp
    without an alias says ``/home/me/.venv/.../SmolLM2-135M-Instruct.Q4_1.gguf``) gives the file's
    stem, so a committed golden never holds a machine's path. Ids such as ``org/model`` are kept."""
    if not returned:
        return returned
    name = returned.replace("\\", "/")
    is_path = name.startswith(("/", "~", "./", "../")) or re.match(r"^[A-Za-z]:/", name)
    if not is_path and not name.lower().endswith(MODEL_FILE_SUFFIXES):
        return returned
    stem = PurePosixPath(name).name
    for suffix in MODEL_FILE_SUFFIXES:
        if stem.lower().endswith(suffix):
            stem = stem[: -len(suffix)]
    return stem or None


def answer_from(call: Call) -> GoldenAnswer:
    return GoldenAnswer(
        text=call.text,
        model=model_id(call.response_model),
        recorded_at=utc_now(),
        finish_reason=call.finish_reason,
        tool_calls=call.tool_calls,
        prompt_tokens=call.prompt_tokens,
        completion_tokens=call.completion_tokens,
        ttft_ms=_ms(call.ttft_ms),
        e2e_ms=_ms(call.e2e_ms),
        system_fingerprint=call.system_fingerprint,
        logprobs=call.logprobs,
        other_choices=call.other_choices,
        usage_details=call.usage_details,
    )


def same_answer(old: GoldenAnswer, new: GoldenAnswer) -> bool:
    """The same answer, whenever and however fast it came (what a re-record must not churn)."""
    return all(getattr(old, name) == getattr(new, name) for name in SAME_ANSWER_FIELDS)


def kept_answers(old: GoldenRecord | None, new: list[GoldenAnswer]) -> list[GoldenAnswer]:
    """``new``, with each sample that equals the old one at its place replaced by the old one."""
    if old is None:
        return new
    return [
        old.answers[i] if i < len(old.answers) and same_answer(old.answers[i], ans) else ans
        for i, ans in enumerate(new)
    ]


class CallerContext(Protocol):
    """The opted-in test a call is made in: where its answers are filed and who gets the call."""

    @property
    def module(self) -> str: ...
    @property
    def test(self) -> str: ...
    @property
    def nodeid(self) -> str: ...
    def add(self, call: Call) -> None: ...


@dataclass
class ReferenceService:
    """Answers for the reference model: from the golden store, or recorded when the mode allows.

    ``record_args`` are the options a user must add to ``pytest --slm-record=new NODEID`` to run
    the same test again (``--slm-models=...`` when the models came from the command line).
    """

    spec: ModelSpec
    store: GoldenStore
    mode: str = "none"  # none | new | all
    samples: int = 1
    retries: int = 4
    timeout_s: float = 120.0
    backoff_s: float = 0.5
    rerecorded: set[tuple[str, str]] = field(default_factory=set)
    # (module, key) -> why recording it before the candidate's call failed (``reference_first``)
    failed_first: dict[tuple[str, str], Exception] = field(default_factory=dict)
    record_args: str = ""
    none_recorded: bool | None = None  # no golden file at all (read at the first miss)
    limiter: Limiter | None = None  # the reference's calls in flight (swap/limits.py)
    ahead: ReferenceQueue | None = None  # a refresh's answers fetched ahead (golden/prefetch.py)
    paid: Paid | None = None  # answers paid for and not yet recorded (golden/paid.py)
    # a replay's entries read before their candidate was asked (``miss_before``), handed once to
    # the pairing's ``answer`` after the test: one read of the golden file per call, not two
    _read: dict[tuple[str, str], GoldenRecord] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.store.write_through = True  # a paid answer (or judge verdict) is never only in memory
        self.store.fold_logs = self.mode != "none"  # a replay writes no golden file
        # only a refresh knows its requests before the tests ask them (the goldens hold them;
        # ``new`` records what they lack); one call at a time fetches nothing ahead, and where
        # nothing is, calls are asked one at a time as before (no limit to adapt or say)
        limiter, served = self.limiter, provider_of(self.spec).served
        if self.mode == "all" and served and limiter is not None and limiter.ceiling > 1:
            longest = (self.timeout_s + self.backoff_s * 2**self.retries) * (self.retries + 1)
            self.ahead = ReferenceQueue(self.spec, limiter, self._fetch, longest)
        else:
            self.limiter = None
        self.paid = Paid(self.store.root, self.spec) if self.mode != "none" else None

    def reused(self) -> tuple[int, float] | None:
        """How many answers this run took from an earlier refresh's paid ones instead of asking
        (golden/paid.py), and when the earliest was paid; None: none."""
        paid = self.paid
        if paid is None or not paid.used or paid.paid_at is None:
            return None
        return paid.used, paid.paid_at

    @staticmethod
    def key(body: dict[str, JSON]) -> str:
        """A request's golden key (golden.keys.request_key), computed once a call by the swap."""
        return request_key(body)

    def answer(
        self,
        module: str,
        test: str,
        body: dict[str, JSON],
        selector: str,
        turn: int | None = None,
        key: str | None = None,
    ) -> GoldenRecord:
        """The golden record for ``body`` as asked by ``test`` as its call ``turn`` (1-based),
        marked visited (``found`` is the read alone); records it if the mode says so, which asks
        the real reference.

        A request with no exact entry gets the reference's turn at its place (``golden.turns``):
        its key is then not the request's, which is how the caller knows the conversation
        diverged. ``--slm-record=new`` records only a place that has no reference turn of the
        same strict shape yet, so a record run adds no entry per run of a sampling candidate;
        ``all`` records every request anew (the last recorded wins its place). ``selector`` is
        the node id that runs the test again, for the command a miss names. ``key``: the
        request's key when the caller has it already (``Call.request_key``).
        """
        key = key or request_key(body)
        rec = self._read.pop((module, key), None) or self.found(module, test, body, turn, key)
        if rec is not None and (rec.key != key or not self._wants_record(module, key, rec)):
            self.store.mark_used(module, rec.key, test, turn)  # this run visited the entry
            return rec
        failed = self.failed_first.get((module, key))
        if failed is not None:  # recording it before the candidate's call failed: once a run
            raise failed
        if self.mode == "none":
            raise MissingGolden(self._missing_message(module, key, selector, turn))
        rec = self.record(module, test, key, body, rec, turn)
        self.rerecorded.add((module, key))
        return rec

    def found(
        self,
        module: str,
        test: str,
        body: dict[str, JSON],
        turn: int | None = None,
        key: str | None = None,
    ) -> GoldenRecord | None:
        """What the golden file holds for ``body``, read and nothing else: no entry is marked
        visited, no model is asked. The exact entry, else (not under ``--slm-record=all``) the
        reference's turn at call ``turn`` of ``test`` (its key then is not the request's); None
        when neither is there. ``answer`` adds the visit and the recording. A request that is not
        the one its place holds is noted, so that place is not fetched ahead again for nothing
        (golden/misses.py)."""
        key = key or request_key(body)
        rec = self.store.lookup(module, key)
        if rec is None and turn is not None:  # not the request its golden place holds
            misses.note(self.store, module, test, turn, body)
        if rec is not None or turn is None or self.mode == "all":
            return rec
        return self.reference_turn(module, test, turn, body)

    def reference_turn(
        self, module: str, test: str, turn: int, body: dict[str, JSON]
    ) -> GoldenRecord | None:
        """The reference's answer at call ``turn`` of ``test`` to a request of the same shape
        (the strict shape only when recording: a changed follow-up prompt is recorded)."""
        placed = self.store.at_place(module, test, turn)
        return reference_turn(placed, test, turn, body, lenient=self.mode == "none")

    def reference_first(
        self, ctx: CallerContext, body: dict[str, JSON], key: str | None = None
    ) -> int | None:
        """The reference's answer length for a candidate call's cap (``completion_tokens``); in a
        record run, a request with no golden answer yet is recorded first, before the candidate is
        asked, so the candidate's cap comes from the reference's answer and not the fallback.

        A recording that fails here is not asked again in this run: the pairing step says why.
        """
        if self.mode != "none" and not any(body.get(limit) is not None for limit in LIMIT_KEYS):
            key = key or request_key(body)
            where = (ctx.module, key)
            if where not in self.failed_first:
                try:
                    self.answer(ctx.module, ctx.test, body, ctx.nodeid, key=key)
                except (ReferenceFailed, GoldenError, ValueError) as exc:
                    self.failed_first[where] = exc
        return self.completion_tokens(ctx.module, body, key)

    def miss_before(
        self,
        ctx: CallerContext,
        body: dict[str, JSON],
        turn: int,
        key: str | None = None,
        follows: int | None = None,
    ) -> tuple[str, str] | None:
        """In replay, ``(key, message)`` when ``body`` has no golden answer at call ``turn`` of the
        test, found before the candidate is asked (the lookup needs only the request); None when
        it has one, when the mode records, or when the file is unreadable (the pairing says).
        ``follows``: the earlier call of the test whose candidate answer the request carries (a
        framework's retry): then the message says so, and never to record it."""
        if self.mode != "none":
            return None
        try:
            key = key or request_key(body)
            rec = self.found(ctx.module, ctx.test, body, turn, key)
            if rec is not None and rec.key == key and rec.answers:  # the exact entry: kept
                if len(self._read) >= MAX_READ:  # answers the pairing never asked (a broken test)
                    self._read.clear()
                self._read[(ctx.module, key)] = rec
            if rec is not None and (rec.answers or rec.key != key):  # as ``answer`` serves it
                return None
        except (GoldenError, ValueError):
            return None
        if follows is not None:
            return key, retry_message(follows)
        return key, self._missing_message(ctx.module, key, ctx.nodeid, turn)

    def completion_tokens(
        self, module: str, body: dict[str, JSON], key: str | None = None
    ) -> int | None:
        """The completion length of the recorded answer to ``body`` (for the generation cap), or
        None: not recorded, no count, or an unreadable file (the pairing step says that one).

        Also None, without a key or a lookup, when the request sets its own limit: the cap never
        changes such a request (``generation_cap``), and this runs on every call in the proxy.
        """
        if any(body.get(limit) is not None for limit in LIMIT_KEYS):
            return None
        try:
            rec = self.store.lookup(module, key or request_key(body))
        except (GoldenError, ValueError):
            return None
        tokens = [a.completion_tokens for a in rec.answers] if rec is not None else []
        known = [t for t in tokens if isinstance(t, int)]
        return max(known) if known else None

    def _wants_record(self, module: str, key: str, rec: GoldenRecord) -> bool:
        """``all`` re-records each entry once per run; ``new`` fills in missing answers/samples."""
        if self.mode == "all":
            return (module, key) not in self.rerecorded
        if self.mode == "new":
            return len(rec.answers) < self.samples
        return not rec.answers

    def record_command(self, selector: str) -> str:
        """The exact command that records the answers ``selector`` asks for."""
        args = f" {self.record_args}" if self.record_args else ""
        needs = f" (needs ${self.spec.api_key_env})" if self.spec.api_key_env else ""
        return f"pytest --slm-record=new{args} {shlex.quote(selector)}{needs}"

    def _missing_message(
        self, module: str, key: str, selector: str, turn: int | None = None
    ) -> str:
        path = _shown(self.store.path_for(module))
        place = "" if turn is None else f", nor for call {turn} of this test"
        message = (
            f"no golden answer of reference {self.store.reference!r} for this request "
            f"(key {key}){place} in {path}. Record it from the real reference with: "
            f"{self.record_command(selector)}"
        )
        others = self.store.other_references(module)
        if self.none_recorded is None:
            self.none_recorded = not others and not self.store.modules()
        if self.none_recorded:
            message += (
                ". No golden answer is recorded in this project yet: record them as above, or "
                "run without a reference, latency and cost only: --slm-reference=none"
            )
        if others:
            found = "; ".join(f"{ref!r} in {_shown(where)}" for ref, where in others)
            message += (
                ". Note: this module has golden answers recorded from another reference "
                f"({found}), but this run's reference is {self.store.reference!r}: set "
                "[tool.slam] reference (or --slm-reference) to the one they came from, or record "
                "them anew"
            )
        return message

    def record(
        self,
        module: str,
        test: str,
        key: str,
        body: dict[str, JSON],
        old: GoldenRecord | None = None,
        turn: int | None = None,
    ) -> GoldenRecord:
        """Ask the real reference (every sample first; a failure writes nothing), then save it,
        with its place (call ``turn`` of ``test``) when known.

        The answers are redacted first (``scrub_answer``): this run scores, compares and shows
        the text the golden file keeps, as a replay does, and a re-record compares like with like.
        """
        asked = [self._asked(module, key, body) for _ in range(self.samples)]
        fresh = [scrub_answer(answer_from(call)) for call in asked]
        answers = kept_answers(old, fresh)
        unchanged = old is not None and answers == old.answers
        rec = GoldenRecord(
            key=key,
            request=body,
            answers=answers,
            tests=[test],
            judge=dict(old.judge) if unchanged and old else {},
            turns=with_turn({}, test, turn),
        )
        self.store.record(module, rec, test)
        if self.paid is not None:  # in the golden file now
            self.paid.spend(body)
        return self.store.lookup(module, key) or rec

    def _asked(self, module: str, key: str, body: dict[str, JSON]) -> Call:
        """The reference's answer to ``body``: the call fetched ahead for this very request in a
        refresh (as measured when it was sent; its failure raised as a live one's), else asked."""
        fetched = self.ahead.asked(module, key, body) if self.ahead is not None else None
        if fetched is None and self.paid is not None:  # paid by an earlier, unfinished refresh
            fetched = self.paid.take(body)
        return fetched if fetched is not None else self.ask(body)

    def _fetch(self, body: dict[str, JSON], stop: threading.Event) -> Call | Exception | None:
        """A call fetched ahead (golden/prefetch.py): the answer, the failure its recording
        raises, or None when the run ended first."""
        kept = self.paid.take(body) if self.paid is not None else None
        if kept is not None:  # paid by an earlier refresh that ended before recording it
            return kept
        try:
            call = self._call(body, stop)
        except ReferenceFailed as exc:
            return exc
        if call is not None and self.paid is not None:  # kept until recorded, a kill or not
            self.paid.keep(body, call)
        return call

    def ask(self, body: dict[str, JSON]) -> Call:
        """One real call to the reference, retried with exponential backoff on 429, 5xx and timeouts."""
        call = self._call(body)
        assert call is not None  # only a fetch ahead is stopped
        return call

    def _call(self, body: dict[str, JSON], stop: threading.Event | None = None) -> Call | None:
        """``ask``; ``stop`` (a fetch ahead): waits for a place under the limit and ends, None,
        once the run has."""
        if not provider_of(self.spec).served or not self.spec.base_urls:
            raise ReferenceFailed(
                f"the reference {self.spec.name!r} cannot be asked: its answers are written by hand. "
                "Add the answer to the golden file, or import it with `slam golden import FILE`."
            )
        env = self.spec.api_key_env
        if env and not api_key(self.spec):  # asked anyway, the API would be "unreachable" or 401
            raise ReferenceFailed(
                f"recording from reference {self.spec.name!r} needs its key, and ${env} is not "
                f"set (no key: nothing was asked or written); set {env} in the environment, or "
                "replay the recorded answers only (--slm-record=none)"
            )
        target = Target(self.spec, self.spec.base_urls[0], api_key(self.spec), role="reference")
        request = for_reference(body, self.spec)
        delay, error = self.backoff_s, ""
        for attempt in range(1, self.retries + 2):
            tried = self._attempt(target, request, stop)
            if tried is None:
                return None
            result, error = tried
            if result is not None and result.call.ok:
                return result.call
            retryable = result is None or result.status in RETRY_STATUSES
            if not retryable or attempt > self.retries:
                break
            wait = max(delay, _retry_after(result) if result is not None else 0.0)
            if stop is None:
                time.sleep(wait)
            elif stop.wait(wait):
                return None
            delay *= 2
        raise ReferenceFailed(
            f"recording from reference {self.spec.name!r} at {target.base_url} failed after "
            f"{attempt} attempt(s): {error.rstrip('.')}. Nothing was written for this request; "
            "run again when the reference answers (or raise [tool.slam] reference_retries / "
            "reference_timeout_s)"
        )

    def _attempt(
        self, target: Target, request: Request, stop: threading.Event | None = None
    ) -> tuple[ChatResult | None, str] | None:
        """One try: the result, or None (with why) when the connection failed or timed out.

        In a refresh that fetches ahead, under the reference's limit (limits.py, the same for a
        fetched and a live call): counted in flight, a fetch waits for a place (None: the run
        ended first), and a 429, the load the run made, lowers the limit and is asked again
        once its hold has passed. Elsewhere one call at a time, as it always was."""

        def send() -> ChatResult:
            return forward_chat(target, request.body, timeout=self.timeout_s, sent=request.sent)

        try:
            sent = self.limiter.send(send, stop)[0] if self.limiter is not None else send()
        except (OSError, http.client.HTTPException, ValueError) as exc:  # broke mid-stream
            return None, f"{type(exc).__name__}: {exc}"
        if sent is None or (stop is not None and stop.is_set()):  # the run ended meanwhile
            return None
        if sent.call.error_kind == "unreachable":
            return None, sent.call.error or ""
        return sent, sent.call.error or ""

    def chat(
        self,
        ctx: CallerContext | None,
        body: dict[str, JSON],
        relay: Relay | None,
        role: str = "reference",
    ) -> ChatResult:
        """Serve the ``gpt4_reference`` client: the golden answer, as the API would return it.

        A miss or a failed recording becomes an API error carrying the message, so the test's
        client raises it instead of a bare connection error. ``role`` ``candidate``: the test's
        own call in a run that records the reference only (its tests run on the reference).
        """
        from pytest_slam.swap.proxy import RouteError

        if ctx is None:
            raise RouteError(409, "pytest-slam: gpt4_reference was called outside an opted-in test")
        try:
            rec = self.answer(ctx.module, ctx.test, body, ctx.nodeid)
        except MissingGolden as exc:
            raise RouteError(404, f"pytest-slam: {exc}") from None
        except (ReferenceFailed, GoldenError) as exc:
            raise RouteError(502, f"pytest-slam: {exc}") from None
        ans = rec.answers[0]
        call = Call(
            model=self.spec.name,
            role=role,
            request=body,
            text=ans.text,
            finish_reason=ans.finish_reason,
            response_model=ans.model,
            tool_calls=ans.tool_calls,
            prompt_tokens=ans.prompt_tokens,
            completion_tokens=ans.completion_tokens,
            ttft_ms=ans.ttft_ms,
            e2e_ms=ans.e2e_ms,
            replayed=(ctx.module, rec.key) not in self.rerecorded,
            key=rec.key,
            streamed=bool(body.get("stream")),
            started_at=to_us(time.time()),
        )
        ctx.add(call)
        return ChatResult(call, completion=completion_from(rec))


RETRY_MARK = "a framework's retry"  # run/test/outcomes.py adds the first call's verdict after it


def retry_message(follows: int) -> str:
    """A replay miss on a request that carries the candidate's own answer to call ``follows``:
    the reference never saw that answer, so no golden answer exists, and recording one would ask
    the reference to continue the candidate's conversation. Call ``follows`` is where to look."""
    return (
        f"no golden answer: this request carries the candidate's answer to call {follows} "
        f"({RETRY_MARK} after it, e.g. instructor asking again after prose to a tool request), "
        "a conversation the reference never had; do not record it: call "
        f"{follows}'s answer is the failure"
    )


def _shown(path: Path) -> Path:
    """A path as the user typed it: relative to the working folder when it is inside it."""
    try:
        return path.relative_to(Path.cwd())
    except ValueError:
        return path


def _retry_after(result: ChatResult) -> float:
    """Seconds from a Retry-After the server sent with a 429 (absent here: 0)."""
    header = result.retry_after
    if not header:
        return 0.0
    try:
        seconds = float(header)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return 0.0
        seconds = (parsed - utc_moment()).total_seconds()
    return min(max(0.0, seconds), MAX_RETRY_AFTER_S)
