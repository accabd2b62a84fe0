"""Requests that missed their golden entry, so that they are not fetched ahead again for nothing.

The answers fetched ahead are planned from the golden entries (run/test/fetching.py): each test is
expected to send again the request its golden entry holds at that call. A test whose request is
never the same (a prompt with the time in it) missed it in every run: its planned request was
fetched, paid for and never used, run after run (issue 51). When a test's request at a call has
no exact entry though the golden file holds one at that place, that entry is noted here
(``note``), keyed by the test, its golden key and a digest of its content (request and answers);
the planner leaves a noted entry out (``noted``) until the entry changes (recorded anew: another
digest), and the request is asked live as it would be without answers fetched ahead.

Only a request whose messages are the product's own (no assistant or tool message) is noted: a
conversation's later turn differs from its golden request by the candidate's earlier answers, not
because the product sends something else. The notes are empty files in the scratch folder
(``.slam/missed``, never committed): xdist workers add theirs without a lock, and a note that
cannot be written is only a fetch left unused again. The folder is listed once per store (a
run), not probed per planned test: most runs have no note, and then no digest is computed either;
a note another process writes during the run is read by the next run.
"""

from __future__ import annotations

import hashlib
import os
import weakref
from pathlib import Path

from pytest_slam.golden.store import GoldenStore, normalize_module
from pytest_slam.records import JSON, GoldenRecord
from pytest_slam.util.files import ignore_scratch_folder, scratch_folder
from pytest_slam.util.textcodec import dumps

FOLDER = "missed"  # under the scratch folder
# the notes' names as a store (a run) first listed them, with the notes it wrote since
_LISTED: weakref.WeakKeyDictionary[GoldenStore, set[str]] = weakref.WeakKeyDictionary()


def _sha(value: JSON) -> str:
    return hashlib.sha256(dumps(value, sort_keys=True).encode("utf-8")).hexdigest()


def _note_path(store: GoldenStore, module: str, test: str, rec: GoldenRecord) -> Path:
    where = _sha([normalize_module(module), test, rec.key])[:32]
    content = _sha([rec.request, [answer.as_dict() for answer in rec.answers]])[:16]
    return scratch_folder(store.root) / FOLDER / f"{where}-{content}"


def _listed(store: GoldenStore) -> set[str]:
    """The names in the notes' folder, listed at the store's first ask (none when it is absent)."""
    names = _LISTED.get(store)
    if names is None:
        try:
            names = set(os.listdir(scratch_folder(store.root) / FOLDER))
        except OSError:
            names = set()
        _LISTED[store] = names
    return names


def _first_hand(body: dict[str, JSON]) -> bool:
    """The request holds only the product's own messages (no earlier answer of a model)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return False
    return not any(isinstance(m, dict) and m.get("role") in ("assistant", "tool") for m in messages)


def note(store: GoldenStore, module: str, test: str, turn: int, body: dict[str, JSON]) -> None:
    """``body``, sent at call ``turn`` of ``test``, has no exact golden entry: the entries at that
    place were not the request sent, and are not fetched ahead again while they stay as they are."""
    if not _first_hand(body):
        return
    for rec in store.at_place(module, test, turn):
        path = _note_path(store, module, test, rec)
        if path.exists():
            continue
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            ignore_scratch_folder(path.parent.parent)
            path.touch()
        except OSError:
            return
        _listed(store).add(path.name)


def noted(store: GoldenStore, module: str, test: str, rec: GoldenRecord) -> bool:
    """Whether ``rec``, as it is now, was the request ``test`` did not send in an earlier run."""
    names = _listed(store)
    return bool(names) and _note_path(store, module, test, rec).name in names
