"""Where ``slam calibrate`` gets its labelled pairs, read strictly.

From the judge verdicts cached in the golden files (each keeps the candidate text it judged: a
grade of 7 or more, or a pairwise score of 0.5 or more, is "acceptable"), from the human verdicts
of ``slam review`` on a run's answers ("win" or "tie" is acceptable), or from a JSON Lines file
(``{"candidate", "reference", "label"[, "unit", "module", "question"]}``; the question is given
to a judge, as the run's cascade gives it). A label is true/false, 1/0, or a
review verdict ("win", "tie", "loss", "both_bad"); anything else is refused with its file and
line, never guessed (``bool("0")`` is True).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pytest_slam.compare.calibrate import CalibrationRefused, LabelledPair, verdict_label
from pytest_slam.golden.fileformat import GoldenError, read_golden
from pytest_slam.review.verdicts import ReviewError, all_verdicts

HUMAN_LABELS = {"win": 1, "tie": 1, "loss": 0, "both_bad": 0}  # the candidate's point of view
TEXT_LABELS = {"true": 1, "false": 0, "1": 1, "0": 0, **HUMAN_LABELS}
JSONL_FIX = (
    'each line must be one JSON object: {"candidate": "...", "reference": "...", "label": true}'
)


def parse_label(value: object) -> int | None:
    """1 (acceptable), 0, or None when ``value`` is not a label this command understands."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    if isinstance(value, str):
        return TEXT_LABELS.get(value.strip().lower())
    return None


def read_text(path: Path, what: str, fix: str) -> str:
    """A file's text, or one line saying why it cannot be read and what to pass instead.

    A UTF-8 byte order mark (some editors write one) is accepted and dropped."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise CalibrationRefused(f"{what} {path}: no such file; {fix}") from None
    except IsADirectoryError:
        raise CalibrationRefused(f"{what} {path}: is a directory; {fix}") from None
    except UnicodeDecodeError as exc:
        raise CalibrationRefused(f"{what} {path}: not UTF-8 text ({exc.reason}); {fix}") from None
    except OSError as exc:
        raise CalibrationRefused(f"{what} {path}: cannot be read ({exc.strerror}); {fix}") from None


def pairs_from_jsonl(path: Path, option: str = "--labels") -> list[LabelledPair]:
    """Labelled pairs from a JSON Lines file, every line checked; the first bad one is refused."""
    text = read_text(path, option, "pass a JSON Lines file of labelled pairs")
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            out.append(_row(f"{option} {path}:{n}", n, line))
    return out


def _row(where: str, n: int, line: str) -> LabelledPair:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise CalibrationRefused(f"{where}: not JSON ({exc.msg}); {JSONL_FIX}") from None
    if not isinstance(row, dict):
        raise CalibrationRefused(
            f"{where}: a JSON {type(row).__name__}, not an object; {JSONL_FIX}"
        )
    for key in ("candidate", "reference"):
        if not isinstance(row.get(key), str):
            found = "missing" if key not in row else f"{json.dumps(row[key])}, not a string"
            raise CalibrationRefused(f"{where}: {key} is {found}; {JSONL_FIX}")
    label = parse_label(row.get("label"))
    if label is None:
        raise CalibrationRefused(
            f"{where}: label {json.dumps(row.get('label'))} is not a label; use true/false, 1/0, "
            '"win", "tie", "loss" or "both_bad"'
        )
    unit, module = row.get("unit", f"line {n}"), row.get("module", "")
    if not isinstance(unit, str | int) or isinstance(unit, bool) or not isinstance(module, str):
        raise CalibrationRefused(
            f"{where}: unit must be a string or an integer (the prompt) and module a string "
            '(the test file, "tests/test_x.py")'
        )
    question = row.get("question")
    if question is not None and not isinstance(question, str):
        raise CalibrationRefused(
            f"{where}: question must be a string (what the user asked), not {json.dumps(question)}"
        )
    pair = LabelledPair(str(unit), row["candidate"], row["reference"], label, float(label), module)
    pair.question = question
    return pair


def pairs_from_goldens(root: Path, reference: str) -> list[LabelledPair]:
    """Labelled pairs from every judge verdict cached in the golden files under ``root``.

    A pair's module is the golden file's test module (``tests/test_x.py``) when it lies in the
    configured reference's folder."""
    from pytest_slam.golden.store import GoldenStore

    base = GoldenStore(root, reference).dir if reference else None
    out = []
    for path in sorted(root.rglob("*.json")) if root.is_dir() else []:
        try:
            golden = read_golden(path)
        except GoldenError:
            continue
        module = ""
        if base is not None and path.is_relative_to(base):
            module = path.relative_to(base).with_suffix(".py").as_posix()
        for rec in golden.entries.values():
            ref = rec.answers[0].text if rec.answers else ""
            for verdict in rec.judge.values():
                found = verdict_label(verdict) if isinstance(verdict, dict) else None
                if found is not None:
                    out.append(LabelledPair(rec.key, verdict["candidate"], ref, *found, module))
    return out


def pairs_from_reviews(report: Path, root: Path, reference: str) -> list[LabelledPair]:
    """Human verdicts from ``slam review`` (beside the goldens), matched to the report's answers.

    A verdict names the candidate answer by hash; the report holds the text. Each reviewer's
    verdict is one labelled pair."""
    from pytest_slam.cli.review import load

    try:
        store, pairs, _ = load(argparse.Namespace(report=report, root=root, reference=reference))
        stored = all_verdicts(store)
    except SystemExit as exc:
        raise CalibrationRefused(str(exc).removeprefix("slam review: ")) from None
    except ReviewError as exc:
        raise CalibrationRefused(str(exc)) from None
    by_answer = {(p.key, p.model, p.answer_hash): p for p in pairs}
    out = []
    for module, verdicts in stored.items():
        for v in verdicts:
            pair = by_answer.get((v.key, v.model, v.answer_hash))
            if pair is not None:
                label = HUMAN_LABELS[v.verdict]
                cand, ref = pair.candidate, pair.reference
                asked = [m["text"] for m in pair.messages if m["role"] == "user"]
                question = asked[-1] if asked else None  # what the run's cascade gives the judge
                out.append(LabelledPair(v.key, cand, ref, label, label, module, question))
    return out
