"""A report's ``digest``: SHA-256 of its visits and of each outcome line as written.

``slam report merge`` takes a shard's word for what it ran (its visits) and for how each test went
(its outcomes); a shard edited by hand or by a broken tool (a selection that claims every test,
invented outcomes) would merge into a whole run's PASS. Every writer seals the report with this
digest and the merge recomputes it from the file's own JSON values, so an edited shard is refused.
The digest is a checksum anyone can recompute: it catches edits, not a forger. A shard from a
less-trusted job (a fork's pull request) could edit its outcomes and recompute the digest. So a
report is also *signed* when the run has a key (``SLAM_SHARD_KEY``, or a file named by
``SLAM_SHARD_KEY_FILE``): ``signature`` is an HMAC-SHA256 of the digest under that key, which
``slam report merge`` verifies with the same key (held by the merge job, never by a fork). The
signature covers what the digest covers: the visits and every outcome, from which the merge
recomputes the whole verdict.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections.abc import Iterable
from pathlib import Path

from pytest_slam.errors import SlamError
from pytest_slam.records import JSON

PREFIX = "sha256:"
SIGNED = "hmac-sha256:"
KEY_ENV = "SLAM_SHARD_KEY"  # the key itself
KEY_FILE_ENV = "SLAM_SHARD_KEY_FILE"  # or a file holding it


class ShardKeyError(OSError, SlamError, kind="report"):
    """A shard key that cannot be read (its file missing, unreadable or empty): an OSError, so a
    run that cannot sign its report says it did not write it, as for any unwritable report."""


def shard_key(key_file: str | os.PathLike[str] | None = None) -> bytes | None:
    """The key shards are signed and verified with: ``key_file``, else the file
    ``SLAM_SHARD_KEY_FILE`` names, else ``SLAM_SHARD_KEY``; None when none is set. The key is
    the file's bytes, surrounding whitespace left out. ``ShardKeyError`` (one line) when a named file
    cannot be read or holds nothing."""
    named = key_file or os.environ.get(KEY_FILE_ENV) or None
    if named is None:
        text = os.environ.get(KEY_ENV, "")
        return text.strip().encode() or None
    where = "--key-file" if key_file else KEY_FILE_ENV
    try:
        key = Path(named).read_bytes().strip()
    except OSError as exc:
        raise ShardKeyError(
            f"{where} {named}: cannot read the shard key ({exc.strerror or exc})"
        ) from None
    if not key:
        raise ShardKeyError(f"{where} {named}: the shard key file is empty")
    return key


def sign(key: bytes, digest: str) -> str:
    """The report's ``signature``: HMAC-SHA256 of its digest under ``key``."""
    return SIGNED + hmac.new(key, digest.encode(), hashlib.sha256).hexdigest()


def verified(key: bytes, digest: str, signature: object) -> bool:
    """Whether ``signature`` is the one ``key`` gives ``digest`` (compared in constant time)."""
    return isinstance(signature, str) and hmac.compare_digest(sign(key, digest), signature)


class Seal:
    """The digest built as the report is written: the visits first, then one outcome line at a time."""

    def __init__(self, visits: JSON, text: str | None = None) -> None:
        """``text``: the visits' JSON text as hashed here, when the caller made it (a merge
        encodes a suite its shards share once)."""
        self._hash = hashlib.sha256()
        if text is None:
            text = json.dumps(visits, sort_keys=True, allow_nan=False)
        self._hash.update(text.encode())

    def add(self, line: str) -> str:
        """Take one outcome line (``json.dumps`` of the outcome: ASCII) and hand it back."""
        self._hash.update(line.encode())
        self._hash.update(b"\n")
        return line

    def text(self) -> str:
        return PREFIX + self._hash.hexdigest()


def line_text(value: JSON, *, spaced: bool = False) -> str:
    """An outcome's value as the line its writer hashed: without spaces, as the report writes its
    lines (schema 2), or (``spaced``) with ``json``'s default ones, as schema 1 wrote them."""
    separators = (", ", ": ") if spaced else (",", ":")
    return json.dumps(value, separators=separators, allow_nan=False)


def digest_of(visits: JSON, outcomes: Iterable[JSON], spaced: bool = False) -> str:
    """The digest of a report's values as read back: ``json.loads`` then ``line_text`` gives the
    line the writer hashed, whatever the file's indentation."""
    seal = Seal(visits)
    for outcome in outcomes:
        seal.add(line_text(outcome, spaced=spaced))
    return seal.text()
