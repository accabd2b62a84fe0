"""Import reference answers recorded elsewhere (logs, batch jobs, eval sets) as golden entries.

One JSON object per line; blank lines are skipped. Two formats, chosen per line with ``fmt="auto"``:

``openai``: logged traffic, ``{"request": <chat body>, "response": <ChatCompletion JSON>}``, with
optional ``ttft_ms`` / ``e2e_ms`` measured when it was logged. OpenAI Batch style is accepted too:
``{"body": <chat body>, "response": {"status_code": 200, "body": <ChatCompletion>}}``, i.e. a batch
input line joined with its output line by ``custom_id`` (an output file alone has no request, so
join them first); a ``request`` in batch-input shape ``{"method", "url", "body"}`` is unwrapped.
A response that is an API error (``status_code`` not 200, ``error`` set, no choices) is counted
as failed, not imported. Every choice becomes one answer (several samples per request).

``simple``: ``{"prompt": str, "answer": str, "model": str}`` with optional ``system`` (a system
message first), ``params`` (merged into the request, e.g. ``{"temperature": 0}``) and
``recorded_at``. The prompt becomes a single user message.

A request whose key is already in the store, or earlier in the file, is skipped and counted as a
duplicate: an import never replaces a recorded answer (prune or refresh the entry for that).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pytest_slam.errors import SlamError
from pytest_slam.golden.fileformat import GoldenError, unreadable
from pytest_slam.golden.keys import canonical_request, request_key
from pytest_slam.golden.store import GoldenStore
from pytest_slam.records import JSON, GoldenAnswer, GoldenRecord

FORMATS = ("auto", "openai", "simple")
FORMAT_HELP = (
    'expected {"request": {...}, "response": {...}} (openai) or '
    '{"prompt": "...", "answer": "...", "model": "..."} (simple)'
)


class GoldenImportError(GoldenError):
    """A line that cannot be imported; the message names the file and line."""


class _Failed(SlamError, kind="golden"):
    """The logged call itself failed: nothing to import, counted."""


@dataclass
class ImportResult:
    imported: int = 0
    duplicates: int = 0
    failed: int = 0
    written: list[Path] = field(default_factory=list)


def utc_iso(timestamp: float) -> str:
    """Seconds since the epoch as ISO 8601 UTC, the form ``recorded_at`` uses."""
    return datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def answers_from_completion(
    response: dict[str, JSON], ttft_ms: float | None = None, e2e_ms: float | None = None
) -> list[GoldenAnswer]:
    """One answer per choice of a ChatCompletion (JSON); usage per answer only when n is 1."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise ValueError("response has no 'choices'")
    usage = response.get("usage") or {}
    if not all(isinstance(c, dict) and isinstance(c.get("message") or {}, dict) for c in choices):
        raise ValueError("each of 'choices' must be an object with a 'message' object")
    if not isinstance(usage, dict):
        raise ValueError("'usage' must be an object")
    created = response.get("created")
    single = len(choices) == 1
    answers = []
    for choice in sorted(choices, key=lambda c: c.get("index", 0)):
        message = choice.get("message") or {}
        if not isinstance(message.get("content") or "", str):
            raise ValueError("a message's 'content' must be a string")
        answers.append(
            GoldenAnswer(
                text=message.get("content") or "",
                model=response.get("model"),
                recorded_at=utc_iso(created) if isinstance(created, int | float) else None,
                finish_reason=choice.get("finish_reason"),
                tool_calls=message.get("tool_calls") or None,
                prompt_tokens=usage.get("prompt_tokens"),
                completion_tokens=usage.get("completion_tokens") if single else None,
                ttft_ms=ttft_ms,
                e2e_ms=e2e_ms,
                system_fingerprint=response.get("system_fingerprint"),
            )
        )
    return answers


def _from_openai(row: dict[str, JSON]) -> tuple[dict[str, JSON], list[GoldenAnswer]]:
    request = row.get("request", row.get("body"))
    if isinstance(request, dict) and isinstance(request.get("body"), dict) and "url" in request:
        request = request["body"]
    response = row.get("response")
    if not isinstance(request, dict) or not isinstance(response, dict):
        raise ValueError("'request' (or 'body') and 'response' must be objects")
    if "body" in response and "choices" not in response:
        if response.get("status_code", 200) != 200:
            raise _Failed
        response = response["body"]
    if row.get("error") or not isinstance(response, dict) or response.get("error"):
        raise _Failed
    if not response.get("choices"):
        raise _Failed
    return request, answers_from_completion(response, row.get("ttft_ms"), row.get("e2e_ms"))


def _from_simple(row: dict[str, JSON]) -> tuple[dict[str, JSON], list[GoldenAnswer]]:
    for name in ("prompt", "answer", "model"):
        if not isinstance(row.get(name), str):
            raise ValueError(f"'{name}' must be a string")
    for name in ("system", "recorded_at", "response_model"):
        if not isinstance(row.get(name) or "", str):
            raise ValueError(f"'{name}' must be a string")
    messages = [{"role": "system", "content": row["system"]}] if row.get("system") else []
    messages.append({"role": "user", "content": row["prompt"]})
    params = row.get("params") or {}
    if not isinstance(params, dict):
        raise ValueError("'params' must be an object")
    request = {**params, "model": row["model"], "messages": messages}
    answer = GoldenAnswer(
        text=row["answer"], model=row.get("response_model"), recorded_at=row.get("recorded_at")
    )
    return request, [answer]


def _parse(row: JSON, fmt: str) -> tuple[dict[str, JSON], list[GoldenAnswer]]:
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    if fmt == "auto":
        fmt = "simple" if "prompt" in row else "openai" if "response" in row else ""
    if fmt == "simple":
        return _from_simple(row)
    if fmt == "openai":
        return _from_openai(row)
    raise ValueError("unknown line format")


def import_jsonl(path: Path, store: GoldenStore, module: str, fmt: str = "auto") -> ImportResult:
    """Add every new request in a JSONL file to ``module``'s golden file, then flush the store.

    Every line is checked before the store is written: a bad line leaves every golden file as it was.
    """
    if fmt not in FORMATS:
        raise GoldenImportError(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    path, result, seen = Path(path), ImportResult(), set()
    for number, line in _lines(path):
        if not line.strip():
            continue
        try:
            request, answers = _parse(json.loads(line), fmt)
            key = request_key(request)
        except _Failed:
            result.failed += 1
            continue
        except (ValueError, TypeError, AttributeError) as exc:  # JSONDecodeError is a ValueError
            raise GoldenImportError(f"{path}:{number}: {exc}; {FORMAT_HELP}") from None
        if key in seen or store.lookup(module, key) is not None:
            result.duplicates += 1
            continue
        seen.add(key)
        store.record(module, GoldenRecord(key, canonical_request(request), answers))
        result.imported += 1
    result.written = store.flush()
    return result


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The file's numbered lines, read as they come (a log may be large); a BOM is dropped."""
    try:
        with path.open(encoding="utf-8-sig") as handle:
            yield from enumerate(handle, 1)
    except (OSError, UnicodeDecodeError) as exc:  # text is decoded by the block: no line number
        raise GoldenImportError(
            f"{path}: {unreadable(exc, 'JSONL file')}; pass the log as UTF-8 JSON Lines, "
            f"{FORMAT_HELP}"
        ) from None
