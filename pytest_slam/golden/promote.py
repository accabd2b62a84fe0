"""Goldens follow a swap: a candidate's recorded answers become the reference's, the old ones kept.

``promote`` takes, from a run's outcomes, each answer the candidate gave to a request that has a
golden entry, and writes it as that entry's answers (same key, same request, through the store:
locked, re-read, atomic, redacted). Before any live file changes, the answers it replaces are
written to a *baseline*: a golden store of its own beside the live one, named
``<reference>@<UTC time>`` (folder ``<root>/<slug>/``), so the old answers stay readable as golden
files (``slam golden stats`` lists them) and ``unpromote`` can put them back.

Skipped, and counted: a pair with no golden answer (nothing to replace; record it first), a call
that failed, an answer cut by pytest-slam's own generation cap (not the candidate's real answer).
A judge verdict cached on an entry judged the old answer, so a promoted entry drops it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field

from pytest_slam.golden.baselines import (
    BaselineMark,
    entry_digest,
    later_marks,
    later_than,
    mark_path,
    read_mark,
)
from pytest_slam.golden.fileformat import GoldenError
from pytest_slam.golden.journal import held
from pytest_slam.golden.redact import scrub_answer
from pytest_slam.golden.reference import answer_from
from pytest_slam.golden.store import GoldenStore, normalize_module
from pytest_slam.records import GoldenAnswer, GoldenRecord, Outcome, utc_moment


def baseline_name(reference: str) -> str:
    """The default name of the baseline a promote keeps: the old reference and when it was left."""
    return f"{reference}@{utc_moment().strftime('%Y%m%dT%H%M%SZ')}"


@dataclass
class Promotion:
    """What a promote did (or, dry, would do): ``(module, key)`` per entry, and what it skipped."""

    promoted: list[tuple[str, str]] = field(default_factory=list)
    unchanged: list[tuple[str, str]] = field(default_factory=list)  # the candidate said the same
    skipped: dict[str, int] = field(default_factory=dict)  # why -> how many answers
    written: dict[str, dict[str, str]] = field(default_factory=dict)  # module -> key -> digest

    def skip(self, why: str) -> None:
        self.skipped[why] = self.skipped.get(why, 0) + 1


def candidate_answers(
    outcomes: Iterable[Outcome], model: str, found: Promotion
) -> dict[tuple[str, str], list[GoldenAnswer]]:
    """The candidate's answers by ``(module, key)``, in call order, each distinct answer once."""
    out: dict[tuple[str, str], list[GoldenAnswer]] = {}
    for outcome in outcomes:
        if outcome.model != model:
            continue
        module = normalize_module((outcome.test or outcome.nodeid).split("::", 1)[0])
        for pair in outcome.pairs:
            index = pair.call_index
            call = outcome.calls[index] if 0 <= index < len(outcome.calls) else None
            if pair.missing or not pair.key:
                found.skip("no golden answer to replace (record it with --slm-record=new)")
            elif call is None or not call.ok or call.role != "candidate":
                found.skip("the candidate's call failed")
            elif call.cut_by_cap:
                found.skip("cut by pytest-slam's generation cap")
            else:
                answer = scrub_answer(answer_from(call))
                kept = out.setdefault((module, pair.key), [])
                if not any(_same(answer, a) for a in kept):
                    kept.append(answer)
    return out


def _same(a: GoldenAnswer, b: GoldenAnswer) -> bool:
    return (a.text, a.tool_calls, a.other_choices) == (b.text, b.tool_calls, b.other_choices)


def promote(
    store: GoldenStore,
    baseline: GoldenStore,
    outcomes: Iterable[Outcome],
    model: str,
    *,
    dry_run: bool = False,
) -> Promotion:
    """Write ``model``'s answers as the reference's; the replaced entries go to ``baseline`` first.

    Every golden file involved is read before anything is written, so a broken one stops the
    promote (``GoldenError``) with every file as it was.
    """
    found = Promotion()
    answers = candidate_answers(outcomes, model, found)
    for module in sorted({module for module, _ in answers}):
        store.load(module)
    old: dict[tuple[str, str], GoldenRecord] = {}
    for (module, key), new in sorted(answers.items()):
        rec = store.lookup(module, key)
        if rec is None:
            found.skip("its golden entry is gone from the file")
        elif len(rec.answers) == len(new) and all(map(_same, rec.answers, new)):
            found.unchanged.append((module, key))
        else:
            old[(module, key)] = rec
            found.promoted.append((module, key))
    if dry_run or not old:
        return found
    for (module, _), rec in old.items():
        baseline.record(module, rec)
    baseline.flush()  # the old answers are on disk before a live file changes
    for (module, key), rec in old.items():
        store.record(module, dataclasses.replace(rec, answers=answers[(module, key)], judge={}))
    store.flush()
    for module, key in old:  # what the files now hold for them: what an undo checks
        written = store.lookup(module, key)
        if written is not None:
            found.written.setdefault(module, {})[key] = entry_digest(written)
    return found


def unpromote(store: GoldenStore, baseline: GoldenStore) -> list[tuple[str, str]]:
    """Put the baseline's entries back exactly as they were; returns ``(module, key)``.

    The baseline must exist and hold entries; every file is read before any is written. Each
    entry must still be what the promote wrote (its mark, ``golden.baselines``), else the undo
    would not give the old bytes back and it is refused (``GoldenError``), nothing written.
    The baseline's own files are removed in the same change (call inside ``store.transaction``).
    """
    modules = baseline.modules()
    if not modules:
        raise GoldenError(
            f"{baseline.dir}: no baseline named {baseline.reference!r}. Fix: pass the name "
            "`slam golden promote` printed (`slam golden stats` lists the folders)"
        )
    mark = read_mark(baseline.dir)
    kept = {m: baseline.load(m).entries for m in modules}
    for module in modules:
        store.load(module)
    later = later_marks(store, baseline.reference)
    restored = []
    for module, entries in kept.items():
        for key in sorted(entries):
            _check_not_promoted_again(store, baseline, later, module, key)
            if mark is not None:
                _check_unchanged(
                    store, baseline, mark.promoted.get(module, {}).get(key), module, key
                )
            restored.append((module, key))
    txn = held()
    for module, entries in kept.items():
        store.put_exact(module, [entries[key] for key in sorted(entries)])
        if txn is not None:
            txn.stage(baseline.path_for(module), None)
    if txn is not None:
        txn.stage(mark_path(baseline), None)
    return restored


def _check_not_promoted_again(
    store: GoldenStore,
    baseline: GoldenStore,
    later: list[BaselineMark],
    module: str,
    key: str,
) -> None:
    """A later promote that wrote the entry too must be undone first, even when it wrote the very
    text this one did (the same model promoted again): putting this one back would change the
    entry under the later one's mark, and no undo could give that one's old file back."""
    again = [m.name for m in later if key in m.promoted.get(module, {})]
    if again:
        raise GoldenError(
            f"{store.path_for(module)}: entry {key} changed since the promote that kept baseline "
            f"{baseline.reference!r} (the promote that kept {again[-1]!r} wrote it again), so "
            "putting it back would leave that one nothing exact to undo; nothing was changed. "
            f"Fix: undo the later promote first (baseline {again[-1]!r}), then this one"
        )


def _check_unchanged(
    store: GoldenStore, baseline: GoldenStore, digest: str | None, module: str, key: str
) -> None:
    live = store.lookup(module, key)
    if live is not None and digest is not None and entry_digest(live) == digest:
        return
    later = later_than(store, baseline.reference)
    fix = (
        f"undo the later promote first (baseline {later[-1]!r}), then this one"
        if later
        else "re-record the entry (`slam golden refresh`) or restore the file from git"
    )
    raise GoldenError(
        f"{store.path_for(module)}: entry {key} changed since the promote that kept baseline "
        f"{baseline.reference!r}, so putting it back would not give the old file back; nothing "
        f"was changed. Fix: {fix}"
    )
