"""Reference answers paid for and not yet recorded, kept so that the next refresh uses them.

A refresh (``slam golden refresh``, ``--slm-record=all``) fetches the reference's answers ahead of
the tests (golden/prefetch.py); a refresh killed half-way had paid for answers its tests never
recorded (issue 51: 34 paid, 2 kept). Each answer the refresh fetches is kept here until its
golden entry is written (``spend``); the next refresh that sends the very same request (the same
golden key and the same upstream body, to the same reference) takes it (``take``) instead of
paying again, with the timings measured when it was first asked.

Not a golden file: the entries live in the scratch folder (``.slam/paid``, never committed), are
scrubbed as the goldens are (golden/redact.py), expire after ``TTL_S`` (a refresh asks for today's
answers) and are only ever read by a recording. One file per answer, written whole
(``files.atomic_write``), so xdist workers share the folder without a lock; a file that cannot be
read or written is no kept answer: the request is asked, as without this.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from pathlib import Path

from pytest_slam.golden.keys import request_key
from pytest_slam.golden.redact import scrub
from pytest_slam.records import JSON, Call, ModelSpec
from pytest_slam.swap.cache import answers, whole_numbers
from pytest_slam.swap.request import for_reference
from pytest_slam.util.files import atomic_write, ignore_scratch_folder, scratch_folder
from pytest_slam.util.textcodec import dumps

FOLDER = "paid"  # under the scratch folder
TTL_S = 24 * 3600.0


class Paid:
    """The reference's paid, unrecorded answers of one golden folder."""

    def __init__(self, golden_root: Path, spec: ModelSpec) -> None:
        self.folder = scratch_folder(golden_root) / FOLDER
        self.spec = spec
        self.used = 0  # answers taken instead of asked, this run
        self.paid_at: float | None = None  # when the earliest of them was paid (time.time())
        # this run's: kept by it or taken from an earlier run (a request asked n times, samples,
        # takes n answers); removed once recorded (``spend``), left for the next run if not
        self._held: set[Path] = set()
        self._lock = threading.Lock()  # the recordings' and the fetchers' threads

    def _stem(self, body: dict[str, JSON]) -> str:
        """The request by its golden key and the body the reference is sent, for this reference."""
        sent = whole_numbers(for_reference(body, self.spec).sent)  # 0 and 0.0
        where = [self.spec.model_id, sorted(self.spec.base_urls), request_key(body)]
        text = dumps([*where, sent], sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def keep(self, body: dict[str, JSON], call: Call) -> None:
        """Keep a paid answer to ``body`` until its golden entry is written."""
        data: JSON = {"kept_at": time.time(), "call": {**call.as_dict(), "request": {}}}
        text = dumps(scrub(data))
        name = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        path = self.folder / f"{self._stem(body)}-{name}.json"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(self.folder.parent)
            atomic_write(path, text, durable=False)
        except OSError:
            return  # not kept: a killed run asks it again, as it did before
        with self._lock:
            self._held.add(path)

    def take(self, body: dict[str, JSON]) -> Call | None:
        """A kept answer to this very request not taken yet in this run, or None (ask it)."""
        stem = self._stem(body)
        with self._lock:
            for path in sorted(self.folder.glob(f"{stem}-*.json")):
                if path in self._held:
                    continue
                read = _read(path)
                if read is None:
                    continue
                call, paid_at = read
                self._held.add(path)
                self.used += 1
                self.paid_at = min(paid_at, self.paid_at or paid_at)
                return call
        return None

    def spend(self, body: dict[str, JSON]) -> None:
        """The answers this run holds for ``body`` are in its golden entry now: no longer kept."""
        stem = self._stem(body)
        with self._lock:
            spent = [p for p in self._held if p.name.startswith(f"{stem}-")]
            self._held.difference_update(spent)
        for path in spent:
            _remove(path)


def _read(path: Path) -> tuple[Call, float] | None:
    """The kept call and when it was paid, or None: unreadable, damaged or expired (then
    removed)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        paid_at = float(data["kept_at"])
        if time.time() - paid_at <= TTL_S:
            return Call.from_dict(data["call"]), paid_at
    except FileNotFoundError:  # taken and spent by another worker meanwhile
        return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    _remove(path)
    return None


def _remove(path: Path) -> None:
    """Gone, or left for its day (a folder that went read-only): the golden entry holds it now,
    and a kept answer is only ever the very answer its request was given."""
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)


def reused_line(count: int, paid_at: float) -> str:
    """The summary's line for the answers a refresh took instead of asking (``count``, the
    earliest paid at ``paid_at``): without it a refresh said nothing of answers it never asked."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(paid_at))
    return (
        f"reference answers: {answers(count)} reused, paid by an earlier refresh ({when}) that did not "
        f"record them (killed, or its tests did not reach them); not asked again "
        f"(`slam cache clear --paid` forgets such answers)"
    )
