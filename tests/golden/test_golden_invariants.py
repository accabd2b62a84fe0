"""The golden store's invariants, tested by machine: a Hypothesis ``RuleBasedStateMachine`` runs
record, refresh, replay, promote, unpromote, prune, restore, changes on another branch, merge, a
kill at any write of a store-wide change and recovery, in random order and number, on a real store
in a temp folder, through the store's own API (golden/store.py, journal.py, promote.py, trash.py,
baselines.py) and ``slam golden merge`` / ``merge-driver`` (cli/golden_merge.py).

A branch is a second store (another clone's ``__slam__``) that records, re-records and prunes on
its own; a merge is ``slam golden merge OURS THEIRS --base BASE -o OURS`` into the project's store
(its lock, its journal), BASE being the branch as it last merged (git's merge base).

A kill is real: the change runs in a forked child whose audit hook SIGKILLs it at its n-th
``os.replace`` (Python's ``os.rename`` audit event: the journal's, then each golden file's), so
the child dies exactly where a CI cancel or an OOM kill could stop it. Checked after every step
(docs/explanation/nothing-lost.md lists them):

1. no committed answer is lost: while no change is unfinished, the store holds exactly the
   answers the model says were committed (a recording store reads them, append logs folded);
2. no replay reads a half-changed store: while a killed change's journal is left, a replay
   refuses (``journal.before_a_run``), and recovery gives the store from before the change or
   after it, never a mix;
3. every undo restores the bytes: an unpromote right after a promote, and a restore right
   after a prune, give every golden file back byte for byte;
4. a merge loses no committed answer and is deterministic: it holds what ``merged`` (the rule,
   stated on its own) says, the same bytes as the same merge written elsewhere, the same answers
   with its inputs swapped; a conflict is left a conflict: exit 1 and nothing written, and the
   merge driver writes both sides between markers, which the store refuses.

CI runs a few hundred steps (``STEPS``); ``pytest -m slow_invariants`` (or
``SLAM_INVARIANT_EXAMPLES``) explores more.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

import pytest
from golden_helpers import MODULE, OTHER, rec
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from pytest_slam.cli.golden_merge import cmd_merge, cmd_merge_driver
from pytest_slam.golden.baselines import BaselineMark, baselines_of, free_name, mark_path
from pytest_slam.golden.fileformat import GoldenError, parse_golden
from pytest_slam.golden.journal import before_a_run, journal_path, store_locked
from pytest_slam.golden.promote import promote, unpromote
from pytest_slam.golden.store import GoldenStore
from pytest_slam.golden.threeway import same_answers
from pytest_slam.golden.trash import Trash, read_trash, restore
from pytest_slam.records import GoldenRecord, Outcome

MODULES = (MODULE, OTHER)
PROMPTS = ("refund?", "password?", "outage?")
TEXTS = st.sampled_from(("yes", "no", "later", "Grüße ✓", "a\nb"))
Answers = dict[tuple[str, str], str]  # (module, prompt) -> the answer text committed
Records = dict[tuple[str, str], GoldenRecord]

EXAMPLES = int(os.environ.get("SLAM_INVARIANT_EXAMPLES", "0")) or 6  # x STEPS: a few hundred
STEPS = 50  # long enough for a merge, a change on each branch and the next merge


def _key(prompt: str) -> str:
    return rec(prompt).key


def _outcomes(answers: Answers, text_of: dict[tuple[str, str], str]) -> list[Outcome]:
    """A run of the candidate ``cand`` that answered each prompt with ``text_of``'s text."""
    out = []
    for (module, prompt), text in sorted(text_of.items()):
        request = rec(prompt).request
        call = {"model": "cand", "role": "candidate", "request": request, "text": text}
        pair = {"call_index": 0, "key": _key(prompt), "golden_file": "", "reference_text": None}
        nodeid = f"{module}::test_x[{prompt}]"
        out.append(Outcome.from_dict({"nodeid": nodeid, "test": nodeid, "model": "cand",
                                      "outcome": "passed", "calls": [call], "pairs": [pair]}))  # fmt: skip
    return out


def _records(root: Path) -> Records:
    """Every entry a store's golden files hold, as its own ``lookup`` reads them."""
    store, found = GoldenStore(root, "gpt-4"), {}
    for module in MODULES:
        for prompt in PROMPTS:
            got = store.lookup(module, _key(prompt))
            if got is not None:
                found[(module, prompt)] = got
    return found


def _texts(records: Records) -> Answers:
    return {k: r.answers[0].text for k, r in records.items()}


def merged(ours: Records, theirs: Records, base: Records) -> tuple[Answers, list[tuple[str, str]]]:
    """What a three-way merge of two branches' stores must hold, entry by entry (the rule of
    golden/threeway.py, stated on its own): a side that kept the base's answer yields to one that
    changed it; an entry one side removed and the other left as it was stays removed; two sides
    that changed it to different answers are a conflict. Returns the answers and the conflicts."""
    answers, conflicts = {}, []
    for k in sorted(set(ours) | set(theirs)):
        held = [r for r in (ours.get(k), theirs.get(k)) if r is not None]
        old = base.get(k)
        if old is not None and len(held) == 1 and held[0] == old:
            continue  # pruned on one branch, untouched on the other
        changed = [r for r in held if old is None or not same_answers(r.answers, old.answers)]
        changed = changed or held
        if any(not same_answers(r.answers, changed[0].answers) for r in changed[1:]):
            conflicts.append(k)
        else:
            answers[k] = changed[0].answers[0].text
    return answers, conflicts


def _killed_at(nth_replace: int, change: object) -> bool:
    """Run ``change()`` in a forked child SIGKILLed at its n-th replace; whether it was killed."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        count = 0

        def hook(event: str, _args: object) -> None:
            nonlocal count
            if event == "os.rename":
                count += 1
                if count == nth_replace:
                    os.kill(os.getpid(), signal.SIGKILL)

        try:
            sys.addaudithook(hook)
            change()  # type: ignore[operator]
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status)


class StoreMachine(RuleBasedStateMachine):
    """The model: ``committed`` answers; ``undo``: what the last promote or prune can put back."""

    @initialize()
    def start(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="slam-invariants-"))
        self.root = self.folder / "__slam__"
        self.committed: Answers = {}
        self.undo: tuple[str, object, dict[str, bytes]] | None = None
        self.half: tuple[Answers, Answers] | None = None  # a killed change: (before, after)
        self.promotes = 0
        # a branch: another clone's store (``theirs``) and the stores' merge base (``base``), the
        # branch's state when it last merged (git's merge base after a merge is the merged tip)
        self.theirs = self.folder / "theirs" / "__slam__"
        self.base = self.folder / "base" / "__slam__"
        self.merging = False  # the killed change is a merge: rebase on recovery when it is done
        self.branched = False  # the branch changed since its last merge (else a merge is a no-op)
        for root in (self.root, self.theirs, self.base):
            (root / "gpt-4").mkdir(parents=True)

    def teardown(self) -> None:
        import shutil

        shutil.rmtree(getattr(self, "folder", "/nonexistent"), ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------

    def store(self) -> GoldenStore:
        return GoldenStore(self.root, "gpt-4", write_through=True)

    def files(self) -> dict[str, bytes]:
        folder = self.root / "gpt-4"
        return {p.relative_to(folder).as_posix(): p.read_bytes()
                for p in sorted(folder.rglob("*.json"))} if folder.is_dir() else {}  # fmt: skip

    def held(self) -> Answers:
        """What a recording run reads now (append logs folded in)."""
        store, found = self.store(), {}
        for module in MODULES:
            for prompt in PROMPTS:
                got = store.lookup(module, _key(prompt))
                if got is not None:
                    found[(module, prompt)] = got.answers[0].text
        return found

    def journal(self) -> Path:
        store = self.store()
        return journal_path(store.root, store.lock_dir)

    # -- rules ------------------------------------------------------------------------------

    @precondition(lambda self: self.half is None)
    @rule(module=st.sampled_from(MODULES), prompt=st.sampled_from(PROMPTS), text=TEXTS)
    def record_or_refresh(self, module: str, prompt: str, text: str) -> None:
        """A recording run (a refresh when the prompt has an answer): logged, then flushed."""
        store = self.store()
        store.record(module, rec(prompt, text), f"{module}::t")
        store.flush()
        self.committed[(module, prompt)] = text
        self.undo = None

    @rule()
    def replay(self) -> None:
        """A replay refuses a half-changed store, else reads exactly what was committed."""
        store = self.store()
        if self.journal().exists():
            with pytest.raises(GoldenError, match="a replay never reads a half-changed store"):
                before_a_run(store.root, store.lock_dir, recording=False)
            return
        before_a_run(store.root, store.lock_dir, recording=False)
        assert self.held() == self.committed

    def _promote(self, text_of: Answers) -> None:
        store = self.store()
        with store.transaction("promote") as txn:
            earlier = [n for n, _ in baselines_of(store)]
            name = free_name(store, f"gpt-4@{self.promotes:04d}")
            baseline = GoldenStore(store.root, name)
            done = promote(store, baseline, _outcomes(self.committed, text_of), "cand")
            if done.promoted:
                mark = BaselineMark(name, store.reference, "cand", on_top_of=earlier)
                mark.promoted = done.written
                txn.stage(mark_path(baseline), mark.text())
        self.last_baseline = name

    @precondition(lambda self: self.half is None and self.committed)
    @rule(text=TEXTS)
    def promote(self, text: str) -> None:
        """The candidate's answers (``text`` + the prompt) become the reference's."""
        text_of = {k: f"{text} {k[1]}" for k in self.committed}
        before = self.files()
        self.promotes += 1
        self._promote(text_of)
        self.committed.update(text_of)
        changed = self.files() != before  # the same answers again: no baseline, nothing to undo
        self.undo = ("promote", self.last_baseline, before) if changed else None

    @precondition(lambda self: self.half is None and self.undo and self.undo[0] == "promote")
    @rule()
    def unpromote(self) -> None:
        """Undo the promote just done: every golden file back, byte for byte."""
        assert self.undo is not None
        _, name, before = self.undo
        store = self.store()
        with store.transaction("unpromote"):
            unpromote(store, GoldenStore(store.root, str(name)))
        assert self.files() == before
        self.committed = self.held()
        self.undo = None

    def _prune(self, gone: list[tuple[str, str]]) -> Trash:
        store = self.store()
        trash = Trash(store.root, store.reference)
        store.prune([(m, _key(p)) for m, p in gone], trash.add)
        return trash

    @precondition(lambda self: self.half is None and self.committed)
    @rule(data=st.data())
    def prune(self, data: st.DataObject) -> None:
        gone = data.draw(st.lists(st.sampled_from(sorted(self.committed)), min_size=1, unique=True))
        before = self.files()
        trash = self._prune(gone)
        for entry in gone:
            del self.committed[entry]
        self.undo = ("prune", trash.path, before)

    @precondition(lambda self: self.half is None and self.undo and self.undo[0] == "prune")
    @rule()
    def restore(self) -> None:
        """Undo the prune just done from its trash: every golden file back, byte for byte."""
        assert self.undo is not None
        _, path, before = self.undo
        restore(self.store(), read_trash(Path(str(path))))
        assert self.files() == before
        self.committed = self.held()
        self.undo = None

    @precondition(lambda self: self.half is None and self.committed)
    @rule(nth=st.integers(1, 6), change=st.sampled_from(("promote", "prune", "merge")), text=TEXTS)
    def kill_at_a_write(self, nth: int, change: str, text: str) -> None:
        """A promote, prune or merge SIGKILLed at its n-th replace: the store is the old or the
        new."""
        before = dict(self.committed)
        self.merging = change == "merge" and self.branched
        if self.merging:
            expected, conflicts = self._expected_merge()
            after = before if conflicts else expected  # a conflict writes nothing
            ours = self.root / "gpt-4"
            run = lambda: self._merge_command([ours, self.theirs / "gpt-4"], ours)  # noqa: E731
        elif change == "prune" or change == "merge":  # an unchanged branch: a prune instead
            gone = sorted(before)[: max(1, len(before) // 2)]
            after = {k: v for k, v in before.items() if k not in gone}
            run = lambda: self._prune(gone)  # noqa: E731
        else:
            text_of = {k: f"{text} {k[1]}" for k in before}
            after = {**before, **text_of}
            self.promotes += 1
            run = lambda: self._promote(text_of)  # noqa: E731
        killed = _killed_at(nth, run)
        self.undo = None
        if self.journal().exists():  # killed between its journal and its end: recover() decides
            event("killed with its journal left")
            self.half = (before, after)
            return
        event("killed before its journal, or finished")
        held = self.held()  # killed before its journal, after it, or not at all: old or new
        assert held in (before, after), (held, before, after)
        self.committed = held
        if self.merging and (not killed or held != before):  # the merge is done
            self._rebase()

    @precondition(lambda self: self.half is not None)
    @rule()
    def recover(self) -> None:
        """What the next command does first: the change kept whole or rolled back whole."""
        assert self.half is not None
        before, after = self.half
        store = self.store()
        with store_locked(store.root, store.lock_dir):
            pass
        held = self.held()
        assert held in (before, after), (held, before, after)
        self.committed, self.half = held, None
        if self.merging and held == after != before:  # rolled forward: the merge is done
            self._rebase()

    # -- branches and merges ------------------------------------------------------------------

    @rule(module=st.sampled_from(MODULES), prompt=st.sampled_from(PROMPTS), text=TEXTS,
          prune=st.booleans(), data=st.data())  # fmt: skip
    def change_on_the_branch(
        self, module: str, prompt: str, text: str, prune: bool, data: st.DataObject
    ) -> None:
        """The other branch records (or re-records) an answer, or prunes one it holds."""
        theirs = GoldenStore(self.theirs, "gpt-4", write_through=True)
        held = sorted(_records(self.theirs))
        if prune and held:
            module, prompt = data.draw(st.sampled_from(held))
            theirs.prune([(module, _key(prompt))])
        else:
            theirs.record(module, rec(prompt, text), f"{module}::t")
            theirs.flush()
        self.branched = True

    def _merge_command(self, inputs: list[Path], out: Path) -> int:
        """``slam golden merge INPUT... -o OUT --base BASE`` of the stores' reference folders
        (into the project's store: under its lock, journalled). A store whose last entry was
        pruned has no folder left: an empty one stands for it, as git's checkout of it would."""
        for folder in (*inputs, self.base / "gpt-4"):
            folder.mkdir(parents=True, exist_ok=True)
        args = argparse.Namespace(inputs=inputs, output=out, base=self.base / "gpt-4",
                                  project_root=self.root)  # fmt: skip
        return cmd_merge(args)

    def _rebase(self) -> None:
        """The branch merged: its state is the merge base of the next merge."""
        shutil.rmtree(self.base / "gpt-4")
        shutil.copytree(self.theirs / "gpt-4", self.base / "gpt-4")
        self.branched = False

    def _expected_merge(self) -> tuple[Answers, list[tuple[str, str]]]:
        return merged(_records(self.root), _records(self.theirs), _records(self.base))

    @precondition(lambda self: self.half is None and self.branched)
    @rule()
    def merge(self) -> None:
        """The branch merged into the store (``slam golden merge``): the same answers whatever
        the inputs' order, the same bytes each time, none lost; a conflict is one, nothing written
        (and the merge driver leaves it between markers, which the store refuses)."""
        ours, theirs = self.root / "gpt-4", self.theirs / "gpt-4"
        expected, conflicts = self._expected_merge()
        before = self.files()
        trial = self.folder / "trial"
        shutil.rmtree(trial, ignore_errors=True)
        outs = [trial / n / "__slam__" / "gpt-4" for n in ("once", "swapped")]
        codes = [self._merge_command([ours, theirs], outs[0]),
                 self._merge_command([theirs, ours], outs[1])]  # fmt: skip
        code = self._merge_command([ours, theirs], ours)
        assert not self.journal().exists()
        if conflicts:
            event("merge: a conflict")
            assert codes == [1, 1] and code == 1, (codes, code, conflicts)
            assert self.files() == before  # nothing written: the conflict is the user's
            self._driver_leaves_the_conflict(conflicts)
            return
        event("merge: merged")
        assert codes == [0, 0] and code == 0, (codes, code)
        once = {p.relative_to(outs[0]).as_posix(): p.read_bytes() for p in outs[0].rglob("*.json")}
        assert once == self.files()  # deterministic: the same bytes, into the store as anywhere
        assert _texts(_records(outs[1].parent)) == expected  # the inputs' order changes nothing
        self.committed, self.undo = expected, None
        self._rebase()

    def _driver_leaves_the_conflict(self, conflicts: list[tuple[str, str]]) -> None:
        """git's merge driver on the first conflicting file: both sides between markers, exit 1,
        and a golden file the store refuses until a person keeps one side."""
        module = conflicts[0][0]
        copies = self.folder / "driver"
        shutil.rmtree(copies, ignore_errors=True)
        copies.mkdir()
        files = []
        for name, root in (("base", self.base), ("ours", self.root), ("theirs", self.theirs)):
            source = GoldenStore(root, "gpt-4").path_for(module)
            copy = copies / f"{name}.json"
            copy.write_bytes(source.read_bytes() if source.exists() else b"")  # git: empty
            files.append(copy)
        args = argparse.Namespace(files=files, install=False, project_root=self.root)
        assert cmd_merge_driver(args) == 1
        text = files[1].read_text(encoding="utf-8")
        assert text.count("<<<<<<< ours\n") == sum(m == module for m, _ in conflicts)
        with pytest.raises(GoldenError):
            parse_golden(files[1], text)

    # -- invariants -------------------------------------------------------------------------

    @invariant()
    def nothing_committed_is_lost(self) -> None:
        if not hasattr(self, "root") or self.journal().exists():
            return  # a killed change: replay refuses it (checked by ``replay``) until recovered
        assert self.half is None  # no journal: nothing half-done
        assert self.held() == self.committed


StoreMachine.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_the_store_keeps_its_invariants = StoreMachine.TestCase


@pytest.mark.slow_invariants
def test_the_store_keeps_its_invariants_longer(request: pytest.FixtureRequest) -> None:
    """More of the same (``pytest -m slow_invariants``): ten times the examples."""
    if "slow_invariants" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("the long run: pytest -m slow_invariants")
    run = settings(StoreMachine.TestCase.settings, max_examples=EXAMPLES * 10)
    from hypothesis.stateful import run_state_machine_as_test

    run_state_machine_as_test(StoreMachine, settings=run)
