"""One chat completion through the swap layer: stream from upstream, time it, rebuild the answer.

TTFT is the first chunk that carries content (text or a tool call) minus the request start; E2E is the
last chunk minus the start (DESIGN.md). A caller that did not stream gets an ordinary ChatCompletion
assembled from the chunks, so its code sees no difference.
"""

from __future__ import annotations

import functools
import http.client
import json
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Concatenate, ParamSpec

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON, Call, ModelSpec, in_ms, to_us
from pytest_slam.swap import upstream
from pytest_slam.swap.fleet import Replicas, send
from pytest_slam.swap.request import build
from pytest_slam.swap.upstream import JSONObject
from pytest_slam.util.textcodec import joined

Relay = Callable[[bytes], None]


@dataclass
class Deadline:
    """When the caller's own timeout ends (a perf_counter moment), for a call served in the
    caller's thread (proxy.answer_local), where nothing else would end it; ``passed`` once it did."""

    at: float
    timeout_s: float  # the caller's own read timeout, as the product set it
    passed: bool = False
    on_passed: Callable[[], None] | None = None  # tells a worker-served caller it timed out

    def expire(self) -> None:
        """The caller's timeout ended before the answer did: it gets no answer."""
        self.passed = True
        if self.on_passed is not None:
            self.on_passed()


CALLER_DEADLINE: ContextVar[Deadline | None] = ContextVar("slam_caller_deadline", default=None)
# The read timeout of a caller a proxy worker serves (a stream, an asyncio caller): a live answer
# is timed by the caller's own wait, so only an answer not asked now (kept, fetched) is held to
# it, by the router (a stream's by its first chunk, as a live stream's reader would time it).
SERVED_DEADLINE: ContextVar[Deadline | None] = ContextVar("slam_served_deadline", default=None)


class CallerGaveUp(SlamError, kind="swap"):
    """The caller's own timeout ran out before the answer ended."""


class CallerStopped(SlamError, kind="swap"):
    """A chunk could not be written to a streaming caller: it closed its side (its own timeout,
    or it stopped reading) before the answer ended."""


@dataclass
class Target:
    """Where one call goes: a model, one of its replicas, and the key for it (never recorded);
    ``replicas``, for a model with several, takes the call when ``base_url`` refuses it."""

    spec: ModelSpec
    base_url: str
    api_key: str | None
    role: str = "candidate"
    replicas: Replicas | None = None


@dataclass
class ChatResult:
    call: Call
    completion: JSONObject | None = None
    status: int = 200
    error_body: bytes | None = None
    retry_after: str | None = None
    hold_s: float | None = None  # how long the server asked to wait (hold_seconds)
    # No connection to the model ("refused": refused, no such host; "timeout": none in time): the
    # product's client is shown the connection error it would get from the endpoint itself.
    unconnected: str | None = None


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    tool_calls: dict[int, JSONObject] = field(default_factory=dict)
    finish_reason: str | None = None
    role: str = "assistant"
    logprobs: dict[str, list[JSON]] | None = None  # {"content": [...], "refusal": [...]}, joined

    def add_logprobs(self, part: JSONObject) -> None:
        """Append one chunk's token logprobs: a stream sends them piece by piece."""
        if self.logprobs is None:
            self.logprobs = {"content": [], "refusal": []}
        for name in ("content", "refusal"):
            self.logprobs[name].extend(part.get(name) or ())

    def summary(self, index: int) -> JSONObject:
        """What a product can read of this choice, as Call/GoldenAnswer keep it (no None values)."""
        out: JSONObject = {
            "index": index,
            "text": joined(self.text),
            "finish_reason": self.finish_reason or "stop",
        }
        if self.tool_calls:
            out["tool_calls"] = [self.tool_calls[i] for i in sorted(self.tool_calls)]
        if self.logprobs is not None:
            out["logprobs"] = {k: v or None for k, v in self.logprobs.items()}
        return out


def completion_choice(summary: JSONObject) -> JSONObject:
    """One ChatCompletion choice from a choice summary (see ``_Choice.summary``).

    ``content`` is null when the answer is only tool calls, as the API sends it.
    """
    text, tools = summary.get("text") or "", summary.get("tool_calls")
    message: JSONObject = {"role": "assistant", "content": text if text or not tools else None}
    if tools:
        message["tool_calls"] = tools
    return {
        "index": summary.get("index", 0),
        "message": message,
        "logprobs": summary.get("logprobs"),
        "finish_reason": summary.get("finish_reason") or "stop",
    }


META_KEYS = ("id", "created", "model", "system_fingerprint")


class Accumulator:
    """Folds streamed chunks into one completion, noting when content first and last arrived."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.first: float | None = None
        self.last: float | None = None
        self.choices: dict[int, _Choice] = {}
        self.meta: JSONObject = {}
        self.usage: JSONObject | None = None
        self.pieces = 0  # content and tool-call deltas so far: about a token each

    def feed(self, chunk: JSONObject, now: float) -> None:
        if len(self.meta) < len(META_KEYS):  # each key's first non-null value; usually chunk one
            for key in META_KEYS:
                if key not in self.meta and chunk.get(key) is not None:
                    self.meta[key] = chunk[key]
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        for raw in chunk.get("choices") or ():
            index = raw.get("index", 0)
            choice = self.choices.get(index)
            if choice is None:  # not setdefault: that would build a _Choice for every chunk
                choice = self.choices[index] = _Choice()
            delta = raw.get("delta") or {}
            content = delta.get("content")
            if content:  # ``_content`` inlined: this runs once per token
                choice.text.append(content)
                self.pieces += 1
                if self.first is None:
                    self.first = now
            for tc in delta.get("tool_calls") or ():
                self._tool_call(choice, tc)
                self._content(now)
            if raw.get("logprobs"):
                choice.add_logprobs(raw["logprobs"])
            if raw.get("finish_reason"):
                choice.finish_reason = raw["finish_reason"]
        self.last = now

    def _content(self, now: float) -> None:
        self.pieces += 1
        if self.first is None:
            self.first = now

    @staticmethod
    def _tool_call(choice: _Choice, tc: JSONObject) -> None:
        index = tc.get("index", 0)
        slot = choice.tool_calls.get(index)
        if slot is None:
            slot = choice.tool_calls[index] = {
                "id": None,
                "type": "function",
                "function": {"name": "", "arguments": ""},
            }
        if tc.get("id"):
            slot["id"] = tc["id"]
        fn = tc.get("function") or {}
        slot["function"]["name"] += fn.get("name") or ""
        slot["function"]["arguments"] += fn.get("arguments") or ""

    def text(self, index: int = 0) -> str:
        choice = self.choices.get(index)
        return joined(choice.text) if choice else ""

    def summaries(self) -> list[JSONObject]:
        """Every choice in index order (one empty choice when the stream carried none)."""
        return [self.choices.get(i, _Choice()).summary(i) for i in sorted(self.choices) or [0]]

    def completion(self) -> JSONObject:
        """The ChatCompletion a non-streaming caller would have received: every choice, logprobs,
        finish reasons, the whole usage object and the system fingerprint."""
        choices = [completion_choice(s) for s in self.summaries()]
        return {
            "id": self.meta.get("id", "chatcmpl-slam"),
            "object": "chat.completion",
            "created": self.meta.get("created", int(time.time())),
            "model": self.meta.get("model", ""),
            "system_fingerprint": self.meta.get("system_fingerprint"),
            "choices": choices,
            "usage": self.usage,
        }

    def ms(self, at: float | None) -> float | None:
        return None if at is None else in_ms(at - self.start)


LIMIT_KEYS = ("max_tokens", "max_completion_tokens")
# A structured request's cap: at least this x the reference's completion tokens plus this margin
# (measured: bench/README.md "The same JSON, written another way", bench_structured_formats.py).
STRUCTURED_FACTOR = 3.0
STRUCTURED_MARGIN = 64


def generation_cap(
    body: JSONObject,
    spec: ModelSpec,
    reference_tokens: int | None,
    factor: float = 2.0,
    margin: int = 64,
) -> int | None:
    """The output limit a candidate call gets when the product set none, else None.

    A small model asked without a limit can generate until its context is full (minutes on a CPU);
    the reference's recorded answer length says how long a fair answer is: ``factor`` x it plus
    ``margin``, never above the model's ``max_tokens_cap``. A request with its own limit is never
    changed. A structured request (``structured``) gets at least ``STRUCTURED_FACTOR`` x it plus
    ``STRUCTURED_MARGIN``: the same JSON written another way (indented, fenced, keys reordered, in
    the candidate's tokenizer) took at most 2.2 x the reference's tokens on real structured answers
    (bench/README.md); and never less than ``schema_floor``, what a whole answer of the request's
    own schema needs, whatever the reference was (a short or non-JSON one). One that runs past it
    has run away (``runaway``). No reference answer: the ceiling.
    """
    if any(body.get(key) is not None for key in LIMIT_KEYS):
        return None
    if reference_tokens is None:
        return spec.max_tokens_cap
    derived = int(reference_tokens * factor + margin)
    if structured(body):
        factor, margin = max(factor, STRUCTURED_FACTOR), max(margin, STRUCTURED_MARGIN)
        derived = max(int(reference_tokens * factor + margin), schema_floor(body) or 0)
    return max(1, min(spec.max_tokens_cap, derived))


def schema_floor(body: JSONObject) -> int | None:
    """The least cap a structured request gets from its own schema (``response_format``
    json_schema, or its tools' parameters): ``STRUCTURED_FACTOR`` x a whole compact answer's
    tokens (room for it written another way, in another tokenizer) plus ``STRUCTURED_MARGIN``;
    None when it carries no schema."""
    from pytest_slam.swap.schemasize import whole_answer_tokens

    need = whole_answer_tokens(body)
    return None if need is None else int(need * STRUCTURED_FACTOR + STRUCTURED_MARGIN)


def runaway(call: Call, body: JSONObject, spec: ModelSpec, reference_tokens: int | None) -> bool:
    """A structured answer cut by the cap derived from the reference has run away: a JSON object
    or tool call cut short is no answer (the SDK raises), and the cap had room for a whole one (3 x
    the reference's tokens, and what the request's own schema needs), so the call is a failed call
    of the candidate (``error_kind`` "runaway"), not a cut answer. A cut answer that is whole
    anyway (complete JSON, valid against the request's schema: ``schemasize.complete``) is an
    answer, and a cut at the model's own ceiling (no reference answer, or ``max_tokens_cap`` below
    the derived cap) stays a cut, named as one (run/test/outcomes.cut_message). True: it ran away.
    """
    from pytest_slam.swap.schemasize import complete

    if not call.ok or not call.cut_by_cap or reference_tokens is None or not structured(body):
        return False
    if call.cap is None or call.cap >= spec.max_tokens_cap:
        return False
    if complete(body, call.text, call.tool_calls):
        return False
    floor = schema_floor(body)
    room = (
        f"at least {floor} for a whole answer of the request's schema"
        if floor is not None and floor >= call.cap
        else f"{STRUCTURED_FACTOR:g} x the reference's tokens + {STRUCTURED_MARGIN}"
    )
    call.error = (
        f"ran away: hit the structured cap {call.cap} derived from the reference's "
        f'{reference_tokens} tokens (model {spec.name!r}, finish_reason "length"; the cap is '
        f"{room}, and the answer is still not whole JSON)"
    )
    call.error_kind = "runaway"
    return True


STRUCTURED_FORMATS = ("json_object", "json_schema")


def structured(body: JSONObject) -> bool:
    """Whether the request asks for JSON (``response_format``) or may answer with tool calls."""
    fmt = body.get("response_format")
    kind = fmt.get("type") if isinstance(fmt, dict) else None
    return kind in STRUCTURED_FORMATS or bool(body.get("tools") or body.get("functions"))


@dataclass(eq=False)
class InFlight:
    """A call this process is waiting on, as the run's heartbeat shows it (run/start/progress.py)."""

    target: Target
    start: float  # time.perf_counter()
    answer: Accumulator | None = None  # set when its answer starts to arrive
    label: str | None = None  # whose call it is, when not the running test's (FLIGHT_LABEL)

    @property
    def tokens(self) -> int:
        return self.answer.pieces if self.answer is not None else 0


IN_FLIGHT: set[InFlight] = set()  # every forward_chat call in flight in this process
# Whose calls this thread makes, when not the running test's: "fetched ahead for test_x[m]"
FLIGHT_LABEL: ContextVar[str | None] = ContextVar("slam_flight_label", default=None)
_FLIGHT: ContextVar[InFlight | None] = ContextVar("slam_flight", default=None)


P = ParamSpec("P")


class CandidateFault(SlamError, kind="candidate"):
    """A 200 answer that is not a whole chat completion: truncated, not JSON, not UTF-8, an error."""


def _listed_in_flight(
    func: Callable[Concatenate[Target, P], ChatResult],
) -> Callable[Concatenate[Target, P], ChatResult]:
    """The call, listed in ``IN_FLIGHT`` while it runs, for the run's heartbeat."""

    @functools.wraps(func)
    def listed(target: Target, /, *args: P.args, **kwargs: P.kwargs) -> ChatResult:
        flight = InFlight(target, time.perf_counter(), label=FLIGHT_LABEL.get())
        IN_FLIGHT.add(flight)
        token = _FLIGHT.set(flight)
        try:
            return func(target, *args, **kwargs)
        finally:
            _FLIGHT.reset(token)
            IN_FLIGHT.discard(flight)

    return listed


def new_call(target: Target, body: JSONObject, **fields: JSON) -> Call:
    """The record of one call to ``target`` of ``body``, started now (``fields``: more of it)."""
    return Call(
        model=target.spec.name,
        role=target.role,
        request=body,
        endpoint=target.base_url,
        streamed=bool(body.get("stream")),
        started_at=to_us(time.time()),
        **fields,
    )


@_listed_in_flight
def forward_chat(
    target: Target,
    body: JSONObject,
    relay: Relay | None = None,
    timeout: float | None = None,
    cap: int | None = None,
    sent: JSONObject | None = None,
) -> ChatResult:
    """Send one chat request to ``target``; relay chunks to a streaming caller; return what was measured.

    ``timeout`` (seconds without data) defaults to the model's ``timeout_s``, else 600. A server
    fault is the call's ``error``, one line naming the model, never an exception. ``cap``: the
    output limit sent for a request that set none (``generation_cap``); ``call.request`` stays the
    product's own body, so the golden key does not change with it. One call, as sent: a
    candidate's ``n`` > 1 is the router's to split (``choices.forward_candidate``). ``sent``: the
    upstream body when the caller built its request already (``request.build``), else built here.
    """
    call = new_call(target, body, capped=cap is not None, cap=cap)
    timeout = upstream.timeout_for(target.spec) if timeout is None else timeout
    start = time.perf_counter()
    limit = CALLER_DEADLINE.get()
    deadline = None if limit is None else limit.at
    wait = timeout if deadline is None else max(min(timeout, deadline - start), 0.001)
    if sent is None:
        sent = build(body, target.spec, target.role, cap).sent

    def post(url: str) -> upstream.Response:
        call.endpoint = url  # the replica that takes it (another when this one refuses)
        return upstream.post(url, "/chat/completions", sent, target.api_key, wait)

    def where() -> str:  # the replica last tried, once the call failed
        return f"model {target.spec.name!r} at {call.endpoint}"

    try:
        resp = send(target.replicas, target.base_url, post)[1]
    except upstream.UpstreamTimeout as exc:
        if deadline is not None and time.perf_counter() >= deadline:
            return _gave_up(call, start, limit)
        if isinstance(exc, upstream.UpstreamConnectTimeout):
            return _unconnected(call, start, "timeout", f"{where()} is unreachable ({exc})")
        said = f"sent no answer within {timeout:g} s (its timeout_s)"
        return _failed(call, start, 504, "timeout", f"{where()} {said}")
    except upstream.UpstreamNotSent as exc:
        return _unconnected(call, start, "refused", f"{where()} is unreachable ({exc})")
    except upstream.UpstreamUnreachable as exc:
        return _failed(call, start, 502, "unreachable", f"{where()} is unreachable ({exc})")
    if resp.status != 200:
        payload = resp.read()
        error = upstream.error_message(resp.status, payload)
        retry_after = resp.headers.get("retry-after")
        result = _failed(call, start, resp.status, "http", error, payload, retry_after)
        result.hold_s = hold_seconds(resp.headers)
        return result
    try:
        acc = _consume(resp, start, relay, _wants_usage(body), timeout, deadline)
    except CandidateFault as exc:
        resp.abandon()  # the rest of this answer cannot be trusted, nor its connection reused
        if deadline is not None and time.perf_counter() >= deadline:  # a stall past it
            return _gave_up(call, start, limit)
        return _failed(call, start, 502, "fault", f"{where()}: {exc}")
    except CallerGaveUp:
        resp.abandon()
        return _gave_up(call, start, limit)
    except CallerStopped:
        resp.abandon()
        caller_left(call, stopped=True)
        return _failed(call, start, 499)
    except BaseException:  # the caller hung up mid-stream, or an interrupt: stop reading here
        resp.abandon()
        raise
    _fill(call, acc)
    return ChatResult(call, completion=acc.completion())


def hold_seconds(headers: dict[str, str]) -> float | None:
    """The wait a refusing server asked for: ``retry-after-ms`` (OpenAI's, finer) first, then
    ``retry-after`` in seconds (its HTTP-date form is rare from model APIs: None). As sent: a
    negative, NaN or absurd one is the limiter's to bound (limits.hold_of), not a 0 s hold."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            value = float(headers.get(name) or "")
        except ValueError:
            continue
        return value * scale
    return None


CALLER_LEFT = ("the caller gave up", "the caller stopped reading")  # caller_left's words


def left_by_caller(call: Call) -> bool:
    """Whether the call's timeout was its caller's own (``caller_left``), not the model's
    ``timeout_s``: the fix is then the product's client timeout, not the model table."""
    return call.error_kind == "timeout" and (call.error or "").startswith(CALLER_LEFT)


# the timeouts an SDK or framework raises, by class name anywhere in the exception's MRO (so that
# none of them is imported): the openai SDK's APITimeoutError (LiteLLM's Timeout subclasses it in
# recent versions, and is named Timeout in older ones), httpx's TimeoutException, its ReadTimeout
TIMEOUT_CLASSES = frozenset({"APITimeoutError", "Timeout", "TimeoutException", "ReadTimeout"})


def raised_timeout(exc: BaseException | None) -> str | None:
    """The qualified name of the timeout the product raised (``exc`` or any exception it was
    raised from or during), or None: its client or framework gave up waiting for an answer."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        kind = type(exc)
        if isinstance(exc, TimeoutError) or any(
            c.__name__ in TIMEOUT_CLASSES for c in kind.__mro__
        ):
            return f"{kind.__module__}.{kind.__qualname__}"
        exc = exc.__cause__ or exc.__context__
    return None


def framework_gave_up(call: Call, raised: str) -> None:
    """The product raised a timeout (``raised``: its class) and this call, the last it waited
    on, ran away at the cap afterwards: its framework gave up first (a thread's timer, as
    LiteLLM's, leaves the HTTP call running), so the product never read that answer. A failed
    call of the candidate's slowness, whose fix is the framework's timeout, not the cap."""
    if call.error_kind != "runaway":
        return
    call.error = (
        f"the caller gave up (its own timeout: {raised} raised) before model {call.model!r} at "
        f"{call.endpoint} answered; the answer it never read then ran away at the structured "
        f"cap {call.cap}"
    )
    call.error_kind = "timeout"


def caller_left(call: Call, timeout_s: float | None = None, stopped: bool = False) -> None:
    """The product's client gave up (its own read timeout) before this call's answer reached it:
    the product never saw the answer (``stopped``: not all of a stream), so the call is a failed
    call of the candidate, never evidence."""
    after = "" if timeout_s is None else f" of {timeout_s:.3g} s"
    if stopped:
        call.error = (
            f"the caller stopped reading (its own timeout, or it closed the stream) "
            f"before model {call.model!r} at {call.endpoint} ended its answer"
        )
    else:
        call.error = (
            f"the caller gave up (its own timeout{after}) before model {call.model!r} "
            f"at {call.endpoint} answered"
        )
    call.error_kind = "timeout"


def _failed(
    call: Call,
    start: float,
    status: int,
    kind: str | None = None,
    error: str | None = None,
    error_body: bytes | None = None,
    retry_after: str | None = None,
) -> ChatResult:
    """The one way forward_chat ends a call that got no answer: its one-line ``error`` and the
    kind of failure (``ERROR_KINDS``; none given when ``caller_left`` said them), the time it
    took, and what the product is answered."""
    if error is not None:
        call.error, call.error_kind = error, kind
    call.e2e_ms = in_ms(time.perf_counter() - start)
    return ChatResult(call, status=status, error_body=error_body, retry_after=retry_after)


def _unconnected(call: Call, start: float, how: str, error: str) -> ChatResult:
    """No connection was made (``how``: refused or timeout): a failed call of kind unreachable,
    answered as the connection error the endpoint itself would give (``proxy.Exchange.chat``)."""
    result = _failed(call, start, 502, "unreachable", error)
    result.unconnected = how
    return result


def _gave_up(call: Call, start: float, limit: Deadline | None) -> ChatResult:
    """The caller's deadline ended the call in its own thread (proxy.answer_local)."""
    if limit is not None:
        limit.passed = True
    caller_left(call, limit.timeout_s if limit is not None else None)
    return _failed(call, start, 504)


def _wants_usage(body: JSONObject) -> bool:
    return bool((body.get("stream_options") or {}).get("include_usage"))


def _consume(
    resp: upstream.Response,
    start: float,
    relay: Relay | None,
    usage: bool,
    timeout: float,
    deadline: float | None = None,
) -> Accumulator:
    """Fold the answer into an Accumulator, relaying chunks; CandidateFault when it is not whole,
    CallerGaveUp when ``deadline`` passes first."""
    acc = Accumulator(start)
    flight = _FLIGHT.get()
    if flight is not None:  # the heartbeat counts its tokens as they arrive
        flight.answer = acc
    ctype = resp.headers.get("content-type", "")
    if not ctype.startswith("text/event-stream"):
        return _whole(resp, acc, relay, usage, ctype)
    events, count = resp.events(), 0
    while True:
        try:
            payload = next(events, None)
        except TimeoutError:
            raise CandidateFault(
                f"the stream stalled: nothing for {timeout:g} s after "
                f"{count} chunk(s) (its timeout_s)"
            ) from None
        except (http.client.HTTPException, OSError) as exc:
            raise CandidateFault(
                f"the stream broke off after {count} chunk(s) (truncated: {type(exc).__name__})"
            ) from None
        if payload is None:
            break
        chunk = _chunk(payload)
        now = time.perf_counter()
        if deadline is not None and now >= deadline:
            raise CallerGaveUp
        acc.feed(chunk, now)
        count += 1
        if relay is not None and (chunk.get("choices") or usage):
            _relay(relay, payload)
    if not resp.done and not any(c.finish_reason for c in acc.choices.values()):
        raise CandidateFault(
            f"the stream ended after {count} chunk(s) with no finish_reason "
            "and no [DONE] (truncated)"
        )
    return acc


def _chunk(payload: bytes) -> JSONObject:
    """One SSE payload as a chunk object, or the fault that it is not one."""
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CandidateFault(
            f"sent bytes that are not UTF-8 in its stream "
            f"({payload[max(exc.start - 10, 0) : exc.end + 10]!r})"
        ) from None
    try:
        chunk = json.loads(text)
    except ValueError:
        raise CandidateFault(f"sent a stream event that is not JSON ({text[:80]!r})") from None
    if not isinstance(chunk, dict):
        raise CandidateFault(f"sent a stream event that is not a JSON object ({text[:80]!r})")
    if chunk.get("error"):
        err = chunk["error"]
        message = err.get("message") if isinstance(err, dict) else err
        raise CandidateFault(f"sent an error in its stream ({str(message)[:200]})")
    return chunk


def _whole(
    resp: upstream.Response, acc: Accumulator, relay: Relay | None, usage: bool, ctype: str
) -> Accumulator:
    """A 200 that is not a stream: a server that ignored ``stream`` answers one completion, taken as
    a stream that arrived at once; anything else is a fault, never an empty answer."""
    try:
        raw = resp.read()
    except (http.client.HTTPException, OSError) as exc:
        raise CandidateFault(f"the answer broke off (truncated: {type(exc).__name__})") from None
    try:
        completion = json.loads(raw)
        payloads = stream_events(completion, True) if completion.get("choices") else None
    except (ValueError, TypeError, KeyError, AttributeError):
        payloads = None
    if not payloads:
        shown = raw[:80].decode("utf-8", "replace")
        raise CandidateFault(
            f"answered 200 with {ctype or 'no content type'} that is neither an "
            f"SSE stream nor a chat completion ({shown!r})"
        )
    now = time.perf_counter()
    for payload in payloads:
        chunk = json.loads(payload)
        acc.feed(chunk, now)
        if relay is not None and (chunk.get("choices") or usage):
            _relay(relay, payload)
    return acc


def _relay(relay: Relay, payload: bytes) -> None:
    """A write to a caller that hung up fails here; that is the caller's leaving, not a fault."""
    try:
        relay(payload)
    except OSError:
        raise CallerStopped from None


def _fill(call: Call, acc: Accumulator) -> None:
    call.text = acc.text()
    first = acc.choices.get(0)
    call.finish_reason = first.finish_reason if first else None
    if first and first.tool_calls:
        call.tool_calls = [first.tool_calls[i] for i in sorted(first.tool_calls)]
    summaries = acc.summaries()
    call.logprobs = summaries[0].get("logprobs")
    call.other_choices = summaries[1:] or None
    call.usage_details = usage_details(acc.usage)
    call.response_model = acc.meta.get("model")
    call.system_fingerprint = acc.meta.get("system_fingerprint")
    call.ttft_ms = acc.ms(acc.first)
    call.e2e_ms = acc.ms(acc.last)
    if acc.usage:
        call.prompt_tokens = acc.usage.get("prompt_tokens")
        call.completion_tokens = acc.usage.get("completion_tokens")


USAGE_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens")


def usage_details(usage: JSONObject | None) -> JSONObject | None:
    """The usage keys beyond the three counts (``prompt_tokens_details``...), or None."""
    extra = {k: v for k, v in (usage or {}).items() if k not in USAGE_COUNTS and v is not None}
    return extra or None


def stream_events(completion: JSONObject, include_usage: bool) -> list[bytes]:
    """SSE payloads that replay a stored completion to a caller that asked to stream: every
    choice with its logprobs and finish reason, and the usage chunk when it was asked for."""
    base = {k: completion.get(k) for k in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    out = []
    for choice in completion["choices"]:
        msg, idx = choice["message"], choice["index"]
        delta: JSONObject = {"role": "assistant", "content": msg.get("content")}
        if msg.get("tool_calls"):
            delta["tool_calls"] = [dict(tc, index=i) for i, tc in enumerate(msg["tool_calls"])]
        elif delta["content"] is None:
            delta["content"] = ""
        out.append(
            {
                **base,
                "choices": [
                    {
                        "index": idx,
                        "delta": delta,
                        "finish_reason": None,
                        "logprobs": choice.get("logprobs"),
                    }
                ],
            }
        )
        out.append(
            {
                **base,
                "choices": [{"index": idx, "delta": {}, "finish_reason": choice["finish_reason"]}],
            }
        )
    if include_usage and completion.get("usage"):
        out.append({**base, "choices": [], "usage": completion["usage"]})
    return [json.dumps(chunk).encode() for chunk in out]
