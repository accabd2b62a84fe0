"""The ``[tool.slam.equivalence]`` table ``slam calibrate`` writes, with its figures, into pyproject.

Whatever form the project's ``equivalence`` has (none, an inline ``equivalence = {...}`` under
``[tool.slam]``, or a ``[tool.slam.equivalence]`` table with module sub-tables) is replaced by the
table form, which has room for the figures as comments. Keys the user set that calibration does
not choose (``then``) are kept. The edited text is parsed before it is written: the new table must
read back exactly as chosen and everything else in the file unchanged, or nothing is written.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

from pytest_slam.compare.bandselect import Counts, Targets, sequence_start
from pytest_slam.compare.binomial import interval
from pytest_slam.compare.calibrate import BASELINE, SCORERS, TOP, CalibrationRefused, ScopeResult
from pytest_slam.util.files import atomic_write, writing

KEEP = ("then", "judge_error")  # the keys band calibration does not choose
MARK = "# chosen by `slam calibrate`"
HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*slam\s*\.\s*equivalence\s*[.\]]")
ANY_HEADER = re.compile(r"^\s*\[")
INLINE = re.compile(r"^\s*equivalence\s*=")
SLAM_HEADER = re.compile(r"^\s*\[\s*tool\s*\.\s*slam\s*\]")


def error_text(c: Counts) -> str:
    """``0.042 [0.025, 0.066] (17 of 405)``: a band's error with its 95% Clopper-Pearson interval."""
    if not c.called:
        return "none called"
    low, high = interval(c.wrong, c.called)
    return f"{c.rate:.3f} [{low:.3f}, {high:.3f}] ({c.wrong} of {c.called})"


def scope_values(result: ScopeResult) -> dict[str, Any]:
    """The keys one scope's table sets: its scorer and options, and its bands when certified."""
    chosen = result.chosen
    by, options = SCORERS[chosen.scorer if chosen else BASELINE[0]]
    values: dict[str, Any] = {"by": by, **options}
    if chosen is not None:
        bands = {"at_least": chosen.at_least, "fail_below": chosen.fail_below}
        values.update({k: v for k, v in bands.items() if v is not None})
        values["band_error"] = band_error(result)
    return values


def band_error(result: ScopeResult) -> dict[str, Any]:
    """The chosen bands' measured errors as data (config.MeasuredError): each verdict they give in a
    run carries them, and the report widens the pass rate's interval by the upper bounds."""
    chosen = result.chosen
    assert chosen is not None
    out: dict[str, Any] = {}
    for side, counts, band in (
        ("pass", chosen.passed, chosen.at_least),
        ("fail", chosen.failed, chosen.fail_below),
    ):
        if band is not None and counts.called:
            out[side] = round(counts.rate, 4)
            out[f"{side}_upper"] = round(interval(counts.wrong, counts.called)[1], 4)
    measured = result.pairs - result.settled
    out["n"] = measured
    out["measured_on"] = f"slam calibrate, {measured} labelled pairs ({result.prompts} prompts)"
    if result.settled:
        out["measured_on"] += f"; {result.settled} more settled before the bands"
    if result.domain is not None:  # a pair outside it is not decided by these bands
        out["domain"] = result.domain.as_table()
    return out


def toml_value(value: Any) -> str:
    """A value as TOML writes it: a table inline, ``{ pass = 0.03, n = 400 }``; the rest as JSON
    (the same text for TOML's strings, numbers, booleans and arrays of them)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def figures(result: ScopeResult, targets: Targets) -> list[str]:
    """The comment lines above one scope's table: what was certified, on what, and 0.7 beside."""
    lines = [
        f"{MARK} from {result.pairs} labelled pairs ({result.prompts} prompts): pass error <= "
        f"{targets.max_pass_error} and fail error <= {targets.max_fail_error} at "
        f"{1 - targets.delta:.0%} confidence (Learn then Test, exact binomial, Bonferroni over "
        f"{result.scorers_tried} scorer{'s' if result.scorers_tried != 1 else ''}, bands of "
        f"{targets.min_count}+ pairs); errors with 95% "
        "Clopper-Pearson intervals"
    ]
    if result.settled:
        lines.append(
            f"#   measured on the {result.pairs - result.settled} pairs the bands decide: "
            f"{result.settled} identical or blank answer(s) are settled before them"
        )
    level = targets.delta / (2 * result.scorers_tried)
    needs = sequence_start(targets.max_pass_error, level, targets.min_count)
    for c in sorted(result.tried, key=lambda c: c is not result.chosen):
        role = "chosen" if c is result.chosen else "tried "
        if c.at_least is None:
            fail = (
                f"different below {c.fail_below}: fail error {error_text(c.failed)}, "
                f"decides {c.coverage:.1%}"
                if c.fail_below
                else "decides nothing"
            )
            lines.append(
                f"#   {role} {c.scorer}: no pass band certified (a band needs {needs}+ "
                f"pairs at these targets); {fail}"
            )
            continue
        fail = (
            f"different below {c.fail_below}: fail error {error_text(c.failed)}"
            if c.fail_below
            else "no fail band certified, nothing called different"
        )
        lines.append(
            f"#   {role} {c.scorer}: equivalent at >= {c.at_least}: pass error "
            f"{error_text(c.passed)}; {fail}; decides {c.coverage:.1%}"
        )
    for band, est in result.by_prompt.items():
        if not math.isnan(est.value):
            lines.append(f"#   chosen {band} error, bootstrap resampled by prompt: {est}")
    if result.chosen is None:
        lines.append(
            "#   no band certified: similarity is reported, no pair is decided by it; "
            'label more pairs, or send pairs to a judge (then = ["judge"])'
        )
    name, threshold = BASELINE
    if result.baseline is None:  # --scorers left it out: nothing to compare with
        lines.append(f"#   plain  {name} >= {threshold}: not scored in this calibration")
        return lines
    passed, failed = result.baseline
    lines.append(
        f"#   plain  {name} >= {threshold}: pass error {error_text(passed)}; fail error "
        f"{error_text(failed)}; decides 100.0%"
    )
    return lines


def table_text(results: list[ScopeResult], targets: Targets, kept: dict[str, Any]) -> str:
    """The top-level table and one sub-table per calibrated module, each under its figures."""
    out: list[str] = []
    for result in results:
        header = (
            "[tool.slam.equivalence]"
            if result.scope == TOP
            else f"[tool.slam.equivalence.modules.{json.dumps(result.scope)}]"
        )
        values = {**scope_values(result), **(kept if result.scope == TOP else {})}
        out += [*figures(result, targets), header]
        out += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        out.append("")
    return "\n".join(out)


def expected(results: list[ScopeResult], kept: dict[str, Any]) -> dict[str, Any]:
    """What ``tool.slam.equivalence`` must read as once the table is written."""
    table = {**scope_values(results[0]), **kept}
    modules = {r.scope: scope_values(r) for r in results[1:]}
    return {**table, "modules": modules} if modules else table


def read_pyproject(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and parsed TOML ("" and {} when it does not exist); one line when broken."""
    from pytest_slam.cli.calibrate_labels import read_text

    if not path.exists():
        return "", {}
    text = read_text(path, "--pyproject", "pass the project's pyproject.toml")
    try:
        return text, tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CalibrationRefused(
            f"--pyproject {path}: not valid TOML ({exc}); fix the file (or pass another with "
            "--pyproject) and run again"
        ) from None


def current(doc: dict[str, Any]) -> dict[str, Any] | None:
    slam = doc.get("tool", {}).get("slam", {})
    value = slam.get("equivalence") if isinstance(slam, dict) else None
    return value if isinstance(value, dict) else None


def kept_keys(doc: dict[str, Any]) -> dict[str, Any]:
    """The user's keys the new table keeps (``then``)."""
    table = current(doc) or {}
    return {k: table[k] for k in KEEP if k in table}


def without_equivalence(text: str) -> tuple[str, int]:
    """The text with every equivalence table (and its earlier figures) or inline line removed,
    and the line where the new table goes (-1: at the end)."""
    lines = text.splitlines(keepends=True)
    keep: list[str] = []
    at, inside = -1, False
    for line in lines:
        if ANY_HEADER.match(line):
            inside = bool(HEADER.match(line))
            if inside:
                while keep and keep[-1].startswith((MARK, "#   ")):
                    keep.pop()  # the previous run's figures go with its table
                at = len(keep) if at < 0 else at
                continue
        if inside or (INLINE.match(line) and _in_slam(keep)):
            continue
        keep.append(line)
    return "".join(keep), at


def _in_slam(before: list[str]) -> bool:
    headers = [ln for ln in before if ANY_HEADER.match(ln)]
    return bool(headers) and bool(SLAM_HEADER.match(headers[-1]))


def edited(text: str, table: str) -> str:
    rest, at = without_equivalence(text)
    if at < 0:
        return (rest.rstrip("\n") + "\n\n" + table) if rest.strip() else table
    lines = rest.splitlines(keepends=True)
    head = "".join(lines[:at])
    tail = "".join(lines[at:])
    if head and not head.endswith("\n"):
        head += "\n"
    return head + table + ("\n" + tail if tail.strip() else "")


def write_table(path: Path, table: str, want: dict[str, Any]) -> None:
    """Write ``table`` into ``path`` in place of any earlier equivalence setting, after checking
    that the result parses, reads back as ``want`` and leaves every other setting as it was."""
    text, doc = read_pyproject(path)
    new = edited(text, table)
    try:
        parsed = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        parsed = None
    if parsed is None or current(parsed) != want or _others(parsed) != _others(doc):
        raise CalibrationRefused(
            f"--pyproject {path}: could not put the table in place of its equivalence setting "
            "(an unusual layout); nothing written. Remove the equivalence setting and run again, "
            "or paste the table printed above (--dry-run)"
        )
    atomic_write(path, new)  # a full disk, a read-only folder: WriteFailed, its one line


def check_target(path: Path) -> None:
    """Refuse, before any work, a ``--pyproject`` the table could not be written to (a folder
    that does not exist, a folder in its place, one that cannot be written): said after an hour
    of calibration, it was a traceback."""
    import tempfile

    problem = None
    if path.is_dir():
        problem = "a folder, not a file"
    elif not path.parent.is_dir():
        problem = f"its folder {path.parent} does not exist"
    else:  # a read-only folder: the writer's one line (the file, the error, the fix)
        with writing(path), tempfile.NamedTemporaryFile(dir=path.parent, prefix=".slam-probe-"):
            pass
    if problem:
        raise CalibrationRefused(
            f"--pyproject {path}: {problem}; nothing was calibrated. Pass the project's "
            "pyproject.toml (or --dry-run to print the table only)"
        )


def _others(doc: dict[str, Any]) -> dict[str, Any]:
    """The document without ``tool.slam.equivalence``."""
    tool = dict(doc.get("tool", {}))
    slam = dict(tool.get("slam", {}))
    slam.pop("equivalence", None)
    return {**doc, "tool": {**tool, "slam": slam}}
