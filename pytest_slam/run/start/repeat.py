"""Around an opted-in test's function: repeats (``--slm-repeat=N``) and the obtained-answer writer.

Repeats: small models are not deterministic across runs (batching, sampling, a server under load),
so a test can be run N times per model and pass when its pass rate reaches ``[tool.slam]
pass_fraction`` (default 1.0: every run must pass). The first run goes through pytest's own
``pytest_pyfunc_call`` chain; each further run calls that hook chain again, so async and other
plugins' handling applies to every run. Fixtures are set up once: every run gets the same fixture
values (as Hypothesis examples do). Each run sees only its own calls in ``slm_model.calls``, and is
checked on its own (pairing, scoring, budgets): a run passes when the function raised nothing,
the checks found no problem, and none of the run's candidate calls failed (a run whose failed
call the product swallowed is a failed run, never a pass). The
Outcome keeps every run's calls and pairs, and
``repeat = {"runs": N, "passed": k, "rate": k/N}``. A skip (or an imperative xfail) in any run ends
the test as such. Tests opted in to the swap only; others run once, as always.

Obtained answers: while the test function runs, a failing ``assert_equivalent`` writes the
candidate's answer to ``<golden file>.obtained/<test>[<model>]-<scorer>.txt`` next to the module's
golden file (atomically), in a folder with a ``.gitignore`` of ``*`` so it is never committed by
accident.
"""

from __future__ import annotations

import re
from collections.abc import Generator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from pytest_slam.records import Call
from pytest_slam.run.score.verdict import CTX, RESULT, RepeatResult
from pytest_slam.swap.router import TestContext
from pytest_slam.util.textcodec import valid

if TYPE_CHECKING:  # session imports this module lazily, from a hook
    from pytest_slam.run.start.session import SlamSession

INSIDE = pytest.StashKey[bool]()
_UNSAFE = re.compile(r"[^\w.\-\[\]]+")
_PASS_THROUGH = (pytest.skip.Exception, pytest.exit.Exception, KeyboardInterrupt)


def around_call(slam: SlamSession, item: pytest.Function) -> Generator[None, object, object]:
    """The ``pytest_pyfunc_call`` wrapper body for a swapped test."""
    if item.stash.get(INSIDE, False):
        return (yield)  # a further run of the repeat loop below: pass through
    with _obtained_writer(slam, item):
        if slam.settings.repeat <= 1:
            return (yield)
        return (yield from _repeat(slam, item))


def _repeat(slam: SlamSession, item: pytest.Function) -> Generator[None, object, object]:
    ctx = item.stash[CTX]
    result = RepeatResult(pass_fraction=slam.settings.pass_fraction)
    every_call = ctx.calls
    try:
        _start_run(ctx, result, every_call)
        error: BaseException | None = None
        try:
            yield
        except BaseException as exc:
            error = exc
        _end_run(slam, item, ctx, result, every_call, error)
        for _ in range(slam.settings.repeat - 1):
            _one_more(slam, item, ctx, result, every_call)
    finally:
        with ctx.lock:
            ctx.calls = every_call
    item.stash[RESULT] = result
    if not result.reached:
        from pytest_slam.run.test.outcomes import said_by

        pytest.fail(said_by(ctx.model.name, result.message()), pytrace=False)
    return True


def _one_more(
    slam: SlamSession,
    item: pytest.Function,
    ctx: TestContext,
    result: RepeatResult,
    every_call: list[Call],
) -> None:
    """One further run through the whole ``pytest_pyfunc_call`` chain."""
    _start_run(ctx, result, every_call)
    error: BaseException | None = None
    item.stash[INSIDE] = True
    try:
        item.ihook.pytest_pyfunc_call(pyfuncitem=item)
    except BaseException as exc:
        error = exc
    finally:
        item.stash[INSIDE] = False
    _end_run(slam, item, ctx, result, every_call, error)


def _start_run(ctx: TestContext, result: RepeatResult, every_call: list[Call]) -> None:
    """A fresh call list for the run, so ``slm_model.calls`` shows only this run's calls.

    Calls made before the first run (by a fixture) stay in the test's list, unchecked by any run.
    """
    result.runs += 1
    with ctx.lock:
        result.offsets.append(len(every_call))
        ctx.calls = []


def _end_run(
    slam: SlamSession,
    item: pytest.Function,
    ctx: TestContext,
    result: RepeatResult,
    every_call: list[Call],
    error: BaseException | None,
) -> None:
    """Check the run's own calls, fold them into the test's, and note why the run failed."""
    import dataclasses

    ctx.settle()  # a call still in flight is a failed call of this run
    with ctx.lock:
        run_calls, ctx.calls = ctx.calls, []
        every_call.extend(run_calls)
    if error is not None and (isinstance(error, _PASS_THROUGH) or _is_xfail(error)):
        raise error
    view = dataclasses.replace(ctx, calls=run_calls, reference_calls=[])
    assert slam.checker is not None  # a process that runs tests has one (run/start/startup.py arm)
    verdict = slam.checker.check(item, view, failed=error is not None)
    result.verdicts.append(verdict)
    if error is not None:
        result.failures.append((result.runs, _first_line(error)))
    elif verdict.problems:
        result.failures.append((result.runs, verdict.problems[0]))
    elif any(not c.ok for c in run_calls):
        # The product swallowed a failed call of this run: the candidate failed it all the same.
        result.failures.append((result.runs, _unanswered(run_calls)))


def _unanswered(calls: list[Call]) -> str:
    failed = [c for c in calls if not c.ok]
    first = failed[0].error or "no answer"
    if len(failed) == len(calls):
        return f"no call of this run was answered by the candidate ({len(calls)} failed; {first})"
    return f"{len(failed)} of {len(calls)} call(s) of this run failed at the candidate ({first})"


def _is_xfail(error: BaseException) -> bool:
    return isinstance(error, pytest.xfail.Exception)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


# -- obtained answers ------------------------------------------------------------------------------


@contextmanager
def _obtained_writer(slam: SlamSession, item: pytest.Function) -> Generator[None, None, None]:
    """Install ``assert_equivalent``'s writer for this test; remove it after."""
    from pytest_slam.compare.assertion import set_obtained_writer

    ctx = item.stash.get(CTX, None)
    if ctx is None:
        yield
        return

    def write(candidate: str, scorer: str) -> str:
        """Where the answer goes is worked out here, when an assertion fails: never per call."""
        stem = _UNSAFE.sub("_", f"{ctx.test.split('::', 1)[-1]}[{ctx.model.name}]")
        name = f"{stem}-{_UNSAFE.sub('_', scorer)}.txt"
        return str(write_obtained(obtained_dir(slam, ctx.module), name, candidate))

    set_obtained_writer(write)
    try:
        yield
    finally:
        set_obtained_writer(None)


def obtained_dir(slam: SlamSession, module: str) -> Path:
    """``<golden file without .json>.obtained``: next to the answers it is compared with."""
    if slam.store is not None:
        golden = slam.store.path_for(module)
    else:
        from pytest_slam.golden.store import module_relpath

        golden = Path(slam.config.rootpath) / slam.settings.golden_dir / module_relpath(module)
    return golden.with_name(golden.stem + ".obtained")


def write_obtained(folder: Path, name: str, text: str) -> Path:
    """Write one obtained answer atomically, with a ``.gitignore`` that keeps the folder out of git."""
    from pytest_slam.util.files import atomic_write

    ignore = folder / ".gitignore"
    if not ignore.exists():
        atomic_write(ignore, "# created by pytest-slam: answers obtained by failing tests\n*\n")
    path = folder / name
    atomic_write(path, valid(text))  # a text file: a lone surrogate, which UTF-8 lacks, is U+FFFD
    return path
