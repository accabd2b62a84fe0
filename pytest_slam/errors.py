"""The root of every pytest-slam exception, and the kinds users and tools match on.

Every exception class of the package derives from :class:`SlamError` and names its kind where it
is declared (``class GoldenError(SlamError, kind="golden")``); subclasses inherit it. Existing
bases stay first (``class ModelSpecError(ValueError, SlamError, kind="model")``), so an
``except ValueError`` written before the root still catches what it caught. ``except SlamError``
catches every error of ours and nothing else; ``exc.kind`` says which part of the run it is about.

Message convention: one line a user can act on, naming the input (file, key, model, option) and
the fix, with no trailing period and no newline; the catcher adds its prefix (``slam: ``,
``pytest-slam: ``) and prints that one line, never a traceback (``tests/test_errors.py``).
"""

from __future__ import annotations

from typing import ClassVar

# kind -> what an error of that kind is about (the declared set: a class naming another fails)
KINDS: dict[str, str] = {
    "config": "a [tool.slam] key or value, or a command-line option, that cannot be used",
    "model": "a model name or spec that cannot be resolved",
    "engine": "a managed inference engine that cannot start or serve",
    "upstream": "a server (a candidate's endpoint, the reference) that cannot be reached or answer",
    "swap": "a call the swap proxy refuses or cannot carry to the candidate",
    "candidate": "a candidate's answer that is not a whole, valid answer",
    "egress": "a connection leaving the machine that --slm-block-network refused",
    "golden": "a golden answer or golden file that is missing or cannot be used",
    "scorer": "a scorer that cannot run or cannot read an answer",
    "extra": "an optional dependency (a pip extra) that is not installed",
    "judge": "an LLM judge that gave no verdict, or may not be called",
    "equivalence": "a candidate answer that is not equivalent to the reference's (a test fails)",
    "calibrate": "labels or a configuration that calibration cannot use",
    "report": "a report file that cannot be read or merged",
    "review": "a human review file that cannot be read or written",
    "write": "a file that could not be written (a full disk, a read-only folder): nothing changed",
}


class SlamError(Exception):
    """Base of every pytest-slam exception; ``kind`` is one of :data:`KINDS`.

    A subclass declares its kind as a class keyword (``class X(SlamError, kind="golden")``);
    a kind outside :data:`KINDS` fails at import, so the set stays what tools can match on.
    """

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, kind: str | None = None, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            if kind not in KINDS:
                raise TypeError(f"{cls.__qualname__}: kind {kind!r} is not one of {sorted(KINDS)}")
            cls.kind = kind
