"""One exit status per kind of outcome, for every ``slam`` command: the README's table is this one.

A CI script branches on the status, so one fault must read the same from every command: a report
that is missing exits 2 from ``slam report``, ``slam rescore`` and ``slam review`` alike. Every
error of ours a command leaves uncaught is bad input (its kind says what it read: a report, a
golden file, the configuration), so ``BY_KIND`` maps every kind of ``errors.KINDS`` to
``BAD_INPUT``; ``slam report merge`` and ``slam rescore`` exit as the whole run would (pytest's
statuses, then ``GATE_FAILED``). ``tests/cli/test_cli_errors.py`` runs each command with each kind
of fault and checks that the README holds ``table_markdown()``.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from pytest_slam.errors import KINDS, SlamError
from pytest_slam.run.inputs.options import EXIT_GATE_FAILED

OK, FINDING, BAD_INPUT, GATE_FAILED = 0, 1, 2, EXIT_GATE_FAILED


@dataclass(frozen=True)
class Status:
    code: int
    means: str
    commands: str


TABLE = (
    Status(OK, "done as asked (for a run: its tests and its gate passed)", "every command"),
    Status(
        FINDING,
        "the check found what it looks for: a regression, a merge conflict, a failed test",
        "`report diff`, `golden merge` and `merge-driver`, `report merge` and `rescore` (pytest's 1)",
    ),
    Status(
        BAD_INPUT,
        "bad input: an argument, a file missing or not what it should be, [tool.slam], an output "
        "that cannot be written (one line on stderr naming it and the fix, nothing written); "
        "shards that are not the whole suite (merged, gate INCOMPLETE, as pytest's 2)",
        "every command",
    ),
    Status(
        GATE_FAILED,
        "the tests passed and the gate did not (failed or INCOMPLETE)",
        "`report merge`, `rescore`",
    ),
)
# Of a merged run only: pytest's own statuses of its shards.
RUN_STATUSES = (
    "`report merge` also passes on a shard's pytest status 3, 4 or 5 (internal error, usage "
    "error, no tests collected)"
)

BY_KIND: dict[str, int] = dict.fromkeys(KINDS, BAD_INPUT)


def status_of(exc: SlamError) -> int:
    """The exit status of an error a command did not catch: its kind's."""
    return BY_KIND.get(exc.kind, BAD_INPUT)


def refuse(command: str, problem: object) -> int:
    """Say why ``slam COMMAND`` cannot do it, in one line on stderr; the status of bad input."""
    print(f"slam {command}: {problem}", file=sys.stderr)
    return BAD_INPUT


def table_markdown() -> str:
    """The README's exit-status table, from ``TABLE``."""
    rows = ["| exit | means | from |", "| --- | --- | --- |"]
    rows += [f"| {s.code} | {s.means} | {s.commands} |" for s in TABLE]
    return "\n".join(rows) + f"\n\n{RUN_STATUSES}.\n"
