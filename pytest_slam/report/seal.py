"""A report's ``digest``: SHA-256 of its visits and of each outcome line as written.

``slam report merge`` takes a shard's word for what it ran (its visits) and for how each test went
(its outcomes); a shard edited by hand or by a broken tool (a selection that claims every test,
invented outcomes) would merge into a whole run's PASS. Every writer seals the report with this
digest and the merge recomputes it from the file's own JSON values, so an edited shard is refused.
It is a checksum anyone can recompute, not a signature: it catches edits, not a forger.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

from pytest_slam.records import JSON

PREFIX = "sha256:"


class Seal:
    """The digest built as the report is written: the visits first, then one outcome line at a time."""

    def __init__(self, visits: JSON) -> None:
        self._hash = hashlib.sha256()
        self._hash.update(json.dumps(visits, sort_keys=True, allow_nan=False).encode())

    def add(self, line: str) -> str:
        """Take one outcome line (``json.dumps`` of the outcome: ASCII) and hand it back."""
        self._hash.update(line.encode())
        self._hash.update(b"\n")
        return line

    def text(self) -> str:
        return PREFIX + self._hash.hexdigest()


def digest_of(visits: JSON, outcomes: Iterable[JSON]) -> str:
    """The digest of a report's values as read back (``json.loads`` then ``json.dumps`` gives the
    line the writer hashed, whatever the file's indentation)."""
    seal = Seal(visits)
    for outcome in outcomes:
        seal.add(json.dumps(outcome, allow_nan=False))
    return seal.text()
