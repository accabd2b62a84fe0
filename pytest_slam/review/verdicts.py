"""Human verdicts, kept beside the golden files: ``<golden file stem>.review.jsonl``.

One JSON line per verdict, sorted, so a pull request shows one added line per review and git merges
two reviewers' files line by line (``*.review.jsonl merge=union`` in ``.gitattributes`` makes even an
adjacent-line conflict merge itself). A line is identified by (request key, candidate model,
candidate answer hash, reviewer): a reviewer who judges the same answer again replaces their own
line, two reviewers keep a line each. Every write takes the file's lock, re-reads the file, merges
and replaces it atomically, so two reviewers saving at once lose nothing. Notes are scrubbed of
secrets before they are written.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from pytest_slam.compare.audit import Audited
from pytest_slam.errors import SlamError
from pytest_slam.golden.fileformat import CONFLICT_MARKERS
from pytest_slam.golden.redact import scrub_text
from pytest_slam.golden.store import GoldenStore, module_relpath
from pytest_slam.records import JSON, utc_now
from pytest_slam.util.files import atomic_write, ignore_scratch_folder, writing
from pytest_slam.util.textcodec import dumps

AUDIT_FIELDS = ("audited_by", "audited_verdict", "audited_upper")
SUFFIX = ".review.jsonl"
VERDICTS = ("win", "tie", "loss", "both_bad")  # from the candidate's point of view
LOCK_TIMEOUT_S = 60.0


class ReviewError(SlamError, kind="review"):
    """A review file that cannot be read or written; the message says what to do."""


@dataclass(frozen=True)
class HumanVerdict:
    """One reviewer's verdict on one candidate answer, against the reference answer."""

    key: str  # the golden request key
    model: str  # the candidate model
    answer_hash: str  # of the candidate's answer text: a new answer needs a new review
    reference_hash: str  # of the reference answer judged against
    verdict: str  # win | tie | loss | both_bad
    reviewer: str
    date: str  # ISO 8601, UTC
    note: str = ""
    # An audit label (``slam review --audit``) keeps the verdict it audited: the evidence's
    # measured key (band_error, judge_error), what it called the pair, and the stated upper
    # bound that verdict carried (compare/audit.py re-tests it). Empty on a plain review.
    audited_by: str = ""
    audited_verdict: str = ""
    audited_upper: str = ""

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (self.key, self.model, self.answer_hash, self.reviewer)

    def as_dict(self) -> dict[str, JSON]:
        """Its fields; a plain review's line leaves the empty audit fields out."""
        data: dict[str, JSON] = dict(dataclasses.asdict(self))
        for name in AUDIT_FIELDS:
            if not data[name]:
                del data[name]
        return data

    def audited(self) -> Audited | None:
        """The audit this verdict is (None: a plain review, or an audit line that is unreadable,
        which then tests nothing)."""
        if not self.audited_by:
            return None
        try:
            upper = float(self.audited_upper)
        except ValueError:
            return None
        acceptable = int(self.verdict in ("win", "tie"))  # as review/agreement.passed_by_human
        return Audited(self.audited_by, self.audited_verdict, upper, acceptable)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> HumanVerdict:
        names = {f.name for f in dataclasses.fields(cls)}
        verdict = cls(**{k: "" if v is None else str(v) for k, v in data.items() if k in names})
        if verdict.verdict not in VERDICTS:
            raise ValueError(f"verdict {verdict.verdict!r} is not one of {', '.join(VERDICTS)}")
        return verdict


def make_verdict(**fields: str) -> HumanVerdict:
    """A verdict dated now, its note scrubbed of anything that looks like a secret."""
    fields.setdefault("date", utc_now())
    fields["note"] = scrub_text(fields.get("note", "").strip())
    return HumanVerdict.from_dict(fields)


def sidecar_path(golden: Path) -> Path:
    """The review file beside a golden file: ``tests/test_x.json`` -> ``tests/test_x.review.jsonl``."""
    return golden.with_name(golden.name.removesuffix(".json") + SUFFIX)


def review_path(store: GoldenStore, module: str) -> Path:
    """``__slam__/gpt-4/tests/test_x.json`` -> ``.../tests/test_x.review.jsonl``."""
    return sidecar_path(store.path_for(module))


def parse_lines(path: Path, text: str) -> list[HumanVerdict]:
    """The verdicts in a file's text; git conflict markers are skipped (both sides are kept)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith(CONFLICT_MARKERS):
            continue
        try:
            out.append(HumanVerdict.from_dict(json.loads(line)))
        except (ValueError, TypeError, AttributeError) as exc:
            raise ReviewError(
                f"{path}:{number}: not a review verdict ({exc}); fix or delete that line"
            ) from None
    return out


def read_verdicts(path: Path) -> list[HumanVerdict]:
    """A review file's verdicts, one per identity (the latest wins); a missing file is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return merge([], parse_lines(path, text))


def merge(old: list[HumanVerdict], new: list[HumanVerdict]) -> list[HumanVerdict]:
    """The union by identity, the later date winning, sorted as the file keeps them."""
    by_ident: dict[tuple[str, ...], HumanVerdict] = {}
    for verdict in [*old, *new]:
        kept = by_ident.get(verdict.ident)
        if kept is None or verdict.date >= kept.date:
            by_ident[verdict.ident] = verdict
    return [by_ident[i] for i in sorted(by_ident)]


def dump_lines(rows: list[HumanVerdict] | list[dict[str, JSON]]) -> str:
    """One sorted-key JSON object a line: the same verdicts always give the same bytes."""
    dicts = [r.as_dict() if isinstance(r, HumanVerdict) else r for r in rows]
    return "".join(dumps(d, sort_keys=True) + "\n" for d in dicts)


def save_verdicts(store: GoldenStore, module: str, new: list[HumanVerdict]) -> Path:
    """Add verdicts to the module's review file: lock, re-read, merge, replace atomically."""
    from filelock import FileLock, Timeout

    path = review_path(store, module)
    lock_path = store.lock_dir / store.dir.name / module_relpath(module)
    lock_path = lock_path.with_name(lock_path.name.removesuffix(".json") + ".review.lock")
    with writing(lock_path):  # a read-only folder: WriteFailed, its one line
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    ignore_scratch_folder(store.lock_dir.parent)
    lock = FileLock(str(lock_path), timeout=LOCK_TIMEOUT_S)
    try:
        with writing(lock_path):
            lock.acquire()
        try:
            atomic_write(path, dump_lines(merge(read_verdicts(path), new)))
        finally:
            lock.release()
    except Timeout:
        raise ReviewError(
            f"{path}: could not take the lock {lock_path} in {LOCK_TIMEOUT_S:.0f}s; another "
            "reviewer is saving. Wait a moment and pick the verdict again"
        ) from None
    return path


def all_verdicts(store: GoldenStore) -> dict[str, list[HumanVerdict]]:
    """Every review file under the reference's golden folder, by module (``tests/test_x.py``)."""
    if not store.dir.is_dir():
        return {}
    out = {}
    for path in sorted(store.dir.rglob("*" + SUFFIX)):
        rel = path.relative_to(store.dir).as_posix().removesuffix(SUFFIX) + ".py"
        out[rel] = read_verdicts(path)
    return out
