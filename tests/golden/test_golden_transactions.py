"""Store-wide golden changes are transactions, shown with real ``slam`` processes racing and killed.

A product suite is recorded once (GPT-4 and two candidates as FakeOpenAI servers on loopback, three
test modules). Then real ``slam golden promote`` and ``unpromote`` processes run at once, in a
loop, and a promote is SIGKILLed after a random delay, again and again. After every round each of
the reference's answers is in the live store or in a baseline a promote named, and running the undo
commands the promotes printed gives every golden file back byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from slam_helpers import PRODUCT

from pytest_slam.golden.fileformat import read_golden
from pytest_slam.golden.journal import JOURNAL_SCHEMA, journal_path
from pytest_slam.golden.store import GoldenStore, module_relpath
from pytest_slam.testing import FakeOpenAI

MODULES = ("test_billing.py", "test_account.py", "test_orders.py")
QUESTIONS = 8
PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini", "maxi"]
reference = "{reference}#gpt-4"

[tool.slam.models.mini]
base_url = "{mini}"
model = "gpt-4o-mini"

[tool.slam.models.maxi]
base_url = "{maxi}"
model = "gpt-4o"
"""
TESTS = """
import pytest, product

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("n", range({n}))
def test_question(n):
    assert product.ask("{topic} question number %d?" % n)
"""
WAIT_S = 120  # a bound on one command, never a verdict on speed


def test_an_undo_under_a_later_promote_of_the_same_answers_refuses(recorded) -> None:
    """mini, maxi, then mini again: the first mini's entries hold what it wrote (the third wrote
    the same text), yet undoing it first would leave the third's undo nothing exact to put back,
    and the two later baselines could never be undone (the flake of the test above)."""
    pytester = recorded
    before, undos = snapshot(pytester), Undos()
    names = []
    for model in ("mini", "maxi", "mini"):
        code, out, err = finish(promote(pytester, model))
        assert code == 0, err
        undos.read(out)
        [name] = set(undos.commands) - set(names)
        names.append(name)
    first, _, third = names
    code, _, err = finish(slam(pytester, "golden", "unpromote", first))
    assert code == 2 and len(err) == 1, err
    assert f"(the promote that kept {third!r} wrote it again)" in err[0]
    assert f"Fix: undo the later promote first (baseline {third!r})" in err[0]
    assert GoldenStore(root_of(pytester), first).dir.exists()  # refused: nothing written
    unwind(pytester, undos)
    assert_back_to(pytester, before)


@pytest.fixture
def recorded(pytester: pytest.Pytester, fake_gpt4: Any) -> Any:
    """A recorded project: goldens of GPT-4 for three modules, and a report with both candidates."""
    mini = FakeOpenAI(lambda req: "Mini: " + req["messages"][-1]["content"].upper())
    maxi = FakeOpenAI(lambda req: "Maxi: " + req["messages"][-1]["content"].lower())
    with mini, maxi:
        pytester.makepyfile(product=PRODUCT)
        for module in MODULES:
            pytester.makepyfile(**{module[:-3]: TESTS.format(n=QUESTIONS, topic=module)})
        pytester.makefile(".toml", pyproject=PYPROJECT.format(
            reference=fake_gpt4.base_url, mini=mini.base_url, maxi=maxi.base_url))  # fmt: skip
        run = pytester.runpytest(
            "-p", "no:cacheprovider", "--slm-record=new", "--slm-report=run.json"
        )
        assert run.ret == 0, run.stdout.str()
        yield pytester


def root_of(pytester: pytest.Pytester) -> Path:
    return pytester.path / "__slam__"


def snapshot(pytester: pytest.Pytester) -> dict[str, bytes]:
    live = GoldenStore(root_of(pytester), "gpt-4")
    return {m: live.path_for(m).read_bytes() for m in MODULES}


def answers_of(pytester: pytest.Pytester) -> dict[tuple[str, str], list[str]]:
    live = GoldenStore(root_of(pytester), "gpt-4")
    out = {}
    for module in MODULES:
        for key, rec in live.load(module).entries.items():
            out[(module, key)] = [a.text for a in rec.answers]
    assert len(out) == len(MODULES) * QUESTIONS
    assert all(texts[0].startswith("GPT-4 says: ") for texts in out.values())
    return out


def slam(pytester: pytest.Pytester, *args: str) -> subprocess.Popen[str]:
    """A real ``slam`` process (this checkout's code), in the project folder."""
    return subprocess.Popen(
        [sys.executable, "-m", "pytest_slam.cli", *args],
        cwd=pytester.path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, list[str], list[str]]:
    out, err = proc.communicate(timeout=patient(WAIT_S))
    return proc.returncode, out.splitlines(), err.splitlines()


def promote(pytester: pytest.Pytester, model: str) -> subprocess.Popen[str]:
    return slam(pytester, "golden", "promote", model, "--report", "run.json")


class Undos:
    """The undo commands promotes printed, by baseline name, and the names they said they keep."""

    def __init__(self) -> None:
        self.commands: dict[str, list[str]] = {}
        self.named: set[str] = set()

    def read(self, lines: list[str]) -> None:
        for line in lines:
            printed = re.search(r"undo (?:the latest )?with: (.*)$", line)
            if printed:
                command = shlex.split(printed.group(1))
                self.commands[command[3]] = command
            if "baselines of 'gpt-4' are kept" in line:
                kept = line.split(": ", 1)[1].split(";", 1)[0].split(" (", 1)[0]
                self.named.update(n.strip().strip("'") for n in kept.split(","))
        self.named.update(self.commands)

    def command_for(self, name: str) -> list[str]:
        """The printed undo, or the one a promote would print for it (same root and reference)."""
        if name in self.commands:
            return self.commands[name]
        some = next(iter(self.commands.values()))
        return [*some[:3], name, *some[4:]]


def assert_kept(pytester: pytest.Pytester, original: dict, named: set[str]) -> None:
    """Every reference answer is in the live store or in a baseline a promote named."""
    root = root_of(pytester)
    folders = [GoldenStore(root, "gpt-4").dir] + [GoldenStore(root, n).dir for n in named]
    for (module, key), texts in original.items():
        homes = []
        for folder in folders:
            path = folder / module_relpath(module)
            rec = read_golden(path).entries.get(key) if path.exists() else None
            if rec is not None and [a.text for a in rec.answers] == texts:
                homes.append(folder.name)
        assert homes, f"{module} {key}: the reference's answers are in no store ({sorted(named)})"


def unwind(pytester: pytest.Pytester, undos: Undos) -> None:
    """Run the printed undos until no baseline is left (one that must wait for a later one
    refuses in one line, and is run again after it)."""
    root = root_of(pytester)
    left = {n for n in undos.named if GoldenStore(root, n).dir.exists()}
    said: dict[str, str] = {}  # each undo's last refusal, named in a failure
    for _ in range(len(left) + 1):
        for name in sorted(left):
            command = undos.command_for(name)
            done = subprocess.run(  # the command as printed, on this checkout's code
                [sys.executable, "-m", "pytest_slam.cli", *command[1:]],
                cwd=pytester.path,
                capture_output=True,
                text=True,
                timeout=patient(WAIT_S),
            )
            if done.returncode == 0:
                left.discard(name)
            else:
                assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr
                assert "changed since the promote" in done.stderr, done.stderr
                said[name] = done.stderr.strip()
        if not left:
            break
    assert not left, f"baselines that no undo could put back: {sorted(left)}; they said {said}"


def assert_back_to(pytester: pytest.Pytester, before: dict[str, bytes]) -> None:
    root = root_of(pytester)
    assert snapshot(pytester) == before
    assert sorted(p.name for p in root.iterdir()) == ["gpt-4"]  # every baseline removed
    live = GoldenStore(root, "gpt-4")
    assert not journal_path(root, live.lock_dir).exists()
    assert not [p for p in root.rglob("*") if p.name.endswith(".tmp")]


def test_promotes_and_unpromotes_at_once_lose_no_reference_answer(recorded) -> None:
    """Promote and unpromote at once (and two promotes at once), three times over: each waits
    for the other's whole change, so no baseline is ever taken from half-promoted files."""
    pytester = recorded
    before, original = snapshot(pytester), answers_of(pytester)
    for _ in range(3):
        undos = Undos()
        both = [promote(pytester, "mini"), promote(pytester, "maxi")]
        for proc in both:
            code, out, err = finish(proc)
            assert code == 0, err
            undos.read(out)
        assert len(undos.commands) == 2  # each kept its own baseline, and named it
        assert_kept(pytester, original, undos.named)

        mixed = [slam(pytester, "golden", "unpromote", n) for n in sorted(undos.commands)]
        mixed.append(promote(pytester, "mini"))
        for proc in mixed:
            code, out, err = finish(proc)
            assert code in (0, 2), err
            if code == 2:  # an undo that would not be exact: refused, one line, nothing written
                assert len(err) == 1 and "changed since the promote" in err[0], err
            undos.read(out)
        assert_kept(pytester, original, undos.named)

        unwind(pytester, undos)
        assert_back_to(pytester, before)


def test_a_promote_killed_at_any_moment_leaves_the_old_store_or_the_new(recorded) -> None:
    """SIGKILL a promote after a random delay, eight times (half of them while it writes the
    files, once its journal is seen; the verdict never depends on when): the retry recovers (saying so in one
    line when it found the killed promote's journal), names every baseline kept, and its undo
    gives the original bytes back."""
    pytester = recorded
    before, original = snapshot(pytester), answers_of(pytester)
    started = time.monotonic()
    code, out, err = finish(promote(pytester, "mini"))  # how long a whole promote takes here
    whole_s = time.monotonic() - started
    assert code == 0, err
    first = Undos()
    first.read(out)
    unwind(pytester, first)
    assert_back_to(pytester, before)

    rng = random.Random()
    seed = rng.randrange(1 << 30)
    rng.seed(seed)
    found_journal = 0
    live = GoldenStore(root_of(pytester), "gpt-4")
    journal = journal_path(live.root, live.lock_dir)
    for i in range(8):
        victim = promote(pytester, "mini")
        if i % 2:  # anywhere in its life, from start-up to exit
            time.sleep(rng.uniform(0, 1.1 * whole_s))
        else:  # while it writes the files: from the moment its journal appears, a few ms on
            while victim.poll() is None and not journal.exists():
                time.sleep(0.0005)
            time.sleep(rng.uniform(0, 0.02))
        victim.send_signal(signal.SIGKILL)
        victim.communicate(timeout=patient(WAIT_S))
        found_journal += journal.exists()

        code, out, err = finish(promote(pytester, "mini"))
        assert code == 0, (seed, err)
        assert len(err) <= 1, (seed, err)
        if err:
            assert err[0].startswith("slam golden: a promote started "), (seed, err)
            assert "did not finish (killed?)" in err[0], (seed, err)
        undos = Undos()
        undos.read(out)
        assert undos.commands or undos.named, (seed, out)
        assert_kept(pytester, original, undos.named)
        if not undos.commands:  # the killed promote had finished: its baseline is named
            assert "undo the latest with: " in out[-1], (seed, out)
        unwind(pytester, undos)
        assert_back_to(pytester, before)
    print(f"seed {seed}: {found_journal} of 8 kills left a journal to recover")


def test_a_killed_change_is_rolled_back_by_the_next_write(recorded) -> None:
    """What a kill between two replaces leaves (the journal, the first file already new): a
    recording run's next write rolls it back first, and its summary says so in one line."""
    pytester = recorded
    before = snapshot(pytester)
    live = GoldenStore(root_of(pytester), "gpt-4")
    new = "half-promoted\n"
    files = [
        {"path": f"gpt-4/{module_relpath(m)}", "before": before[m].decode(), "after": _digest(new)}
        for m in MODULES
    ]
    journal = {"schema": JOURNAL_SCHEMA, "what": "promote", "started": "2026-12-01T12:00:00Z"}
    journal_path(live.root, live.lock_dir).write_text(json.dumps({**journal, "files": files}))
    live.path_for(MODULES[0]).write_text(new)

    pytester.makepyfile(test_new="""
import pytest, product

@pytest.mark.slm
def test_new():
    assert product.ask("a question never asked before?")
""")  # fmt: skip
    run = pytester.runpytest("-p", "no:cacheprovider", "--slm-record=new", "test_new.py")
    assert run.ret == 0, run.stdout.str()
    run.stdout.fnmatch_lines(["*a promote started 2026-12-01T12:00:00Z did not finish (killed?); "
                              "rolled back*(3 files)*"])  # fmt: skip
    assert snapshot(pytester) == before
    assert not journal_path(live.root, live.lock_dir).exists()


def _digest(text: str) -> str:
    """The journal's digest of a file's new bytes (its documented format)."""
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _store_with_a_file(tmp_path: Path) -> GoldenStore:
    from golden_helpers import MODULE, rec

    store = GoldenStore(tmp_path / "__slam__", "gpt-4", write_through=True)
    store.record(MODULE, rec("a"), "t::a")
    return store


def test_a_journal_whose_every_file_is_new_is_kept_as_done(tmp_path) -> None:
    """Killed after its last replace, before the journal went: the change is rolled forward."""
    from golden_helpers import MODULE, rec

    store = _store_with_a_file(tmp_path)
    path = store.path_for(MODULE)
    new = path.read_text()
    files = [
        {"path": path.relative_to(store.root).as_posix(), "before": "old\n", "after": _digest(new)}
    ]
    doc = {"schema": JOURNAL_SCHEMA, "what": "unpromote", "started": "2026-12-01T12:00:00Z"}
    journal_path(store.root, store.lock_dir).write_text(json.dumps({**doc, "files": files}))
    store.record(MODULE, rec("b"), "t::b")
    assert store.recovered == [
        "slam golden: an unpromote started 2026-12-01T12:00:00Z did not finish (killed?); it had "
        "written every file, so it is kept as done (1 file)"
    ]
    assert set(store.load(MODULE).entries) == {rec("a").key, rec("b").key}


def test_an_unreadable_journal_stops_every_write_in_one_line(tmp_path) -> None:
    from golden_helpers import MODULE, rec

    from pytest_slam.golden.fileformat import GoldenError

    store = _store_with_a_file(tmp_path)
    before = store.path_for(MODULE).read_bytes()
    journal_path(store.root, store.lock_dir).write_text('{"schema": "pytest-slam/golden-journal/1"')
    with pytest.raises(GoldenError) as info:
        store.record(MODULE, rec("b"), "t::b")
    message = str(info.value)
    assert "unreadable journal of a store-wide change. Fix: " in message and "\n" not in message
    assert store.path_for(MODULE).read_bytes() == before


def test_a_second_promote_names_the_first_and_an_undo_out_of_order_refuses(recorded) -> None:
    pytester = recorded
    before = snapshot(pytester)
    undos = Undos()
    code, first, err = finish(promote(pytester, "mini"))
    assert code == 0, err
    undos.read(first)
    [mini] = undos.commands
    code, second, err = finish(promote(pytester, "maxi"))
    assert code == 0, err
    undos.read(second)
    [maxi] = set(undos.commands) - {mini}
    assert second[-3] == (
        f"earlier baselines of 'gpt-4' are kept too, the latest first: {mini!r} "
        "(undo this promote first, then them in that order)"
    )
    code, again, err = finish(promote(pytester, "maxi"))  # a retry: nothing left to replace
    assert code == 0 and again[-1].startswith(
        f"earlier baselines of 'gpt-4' are kept, the latest first: {maxi!r}, {mini!r}; "
        f"undo the latest with: slam golden unpromote {maxi}"
    ), again

    out_of_order = subprocess.run(
        [sys.executable, "-m", "pytest_slam.cli", *undos.commands[mini][1:]],
        cwd=pytester.path, capture_output=True, text=True, timeout=patient(WAIT_S),
    )  # fmt: skip
    assert out_of_order.returncode == 2 and len(out_of_order.stderr.splitlines()) == 1
    assert "changed since the promote that kept baseline" in out_of_order.stderr
    assert f"Fix: undo the later promote first (baseline {maxi!r})" in out_of_order.stderr
    assert GoldenStore(root_of(pytester), mini).dir.exists()  # refused: nothing written
    unwind(pytester, undos)
    assert_back_to(pytester, before)
