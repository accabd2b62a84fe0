"""What the HTML report's script renders: every (test, model) row and every answer pair, packed.

At 10,000 tests x 3 models the rows and the word diffs as HTML would be tens of MB and a page the
browser lays out for many seconds. Instead the page embeds them once as compact JSON (strings by
index, numbers raw beside their formatted text), gzip-compressed and base64-encoded, and its
script unpacks them with the browser's own ``DecompressionStream`` (no library, no network) and
draws one page of the table or the test x model matrix at a time, and a pair's word diff when it
is drawn (``templates/worddiff.js``: the page carries the two answers, not their diff).

The rows come failures first: errors, failures, failed candidate calls, tests not swapped, then
passed tests whose pairs are different or undecided, then the rest; in run order within each.
Pairs are stored test by test, so the three candidates' answers to one reference answer sit
next to each other and gzip stores the shared text once.

At 10,000 cases the build is per-row work and little else (issue 53; bench/bench_html.py): one
pass writes each (test, model)'s pairs as a line of JSON, made visible once over the line, not
string by string (``htmlcalls.shown_json``); no pair is diffed here (70-100 us a pair of
distinct answers): the page diffs the ones it draws; and no call's views are built here (its
transcript step, facts, raw request and answer: 65 us a row): the line carries the call as
recorded and the page derives them (``htmlcalls.call_line``, ``templates/calls.js``).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
from collections import defaultdict
from dataclasses import dataclass
from typing import NamedTuple

from pytest_slam.compare.policy import cause_of
from pytest_slam.records import JSON, Call, Outcome, Pair, Score
from pytest_slam.report import fmt
from pytest_slam.report.aggregate import PerTestRow, Verdict, outcome_order
from pytest_slam.report.columns import TEST_COLUMNS
from pytest_slam.report.diffview import answer_text, cut
from pytest_slam.report.evidence import deciding_score
from pytest_slam.report.htmlcalls import call_line, shown_json
from pytest_slam.util.textcodec import dumps, visible

# outcome -> rank in the failures-first order (unknown outcomes after the failures)
RANK = {"error": 0, "failed": 1, "candidate_failed": 2, "not_swapped": 3}
VERDICT_RANK = {"different": 4, "undecided": 5}
PASSED, SKIPPED = 6, 7
VERDICT_ORDER = ("different", "undecided", "equivalent")  # the worst of a row's pairs first


@dataclass
class Headline:
    """The gate's verdict as the page's headline: its word, why, and the run's size."""

    word: str  # PASS | FAIL | INCOMPLETE | not configured
    css: str
    reasons: list[str]  # each breach's message, or why the run cannot be judged
    size: str  # "10,000 tests x 3 models: 412 failed, ..."


def headline(verdict: Verdict) -> Headline:
    gate = verdict.gate
    word = gate.word if gate is not None else "not configured"
    reasons: list[str] = []
    if gate is not None and gate.incomplete:
        reasons = [gate.incomplete]
    elif gate is not None:
        reasons = [f"{m.model}: {b.message}" for m in gate.models for b in m.breaches]
        reasons += [f"session budget: {b}" for b in gate.session_breaches]
    if word == "not configured":
        reasons = ["no [tool.slam.gate] rule applied: the tests' own outcomes decide"]
    counts: dict[str, int] = defaultdict(int)
    for row in verdict.tests:
        counts[row.outcome] += 1
    tests = len({row.test for row in verdict.tests})
    shown = ", ".join(f"{n:,} {o.replace('_', ' ')}" for o, n in sorted(counts.items(), key=_worst))
    size = f"{tests:,} test(s) x {len(verdict.models)} model(s): {shown or 'no test ran'}"
    return Headline(word, word.split()[0].upper(), reasons, size)


def _worst(item: tuple[str, int]) -> tuple[int, str]:
    return RANK.get(item[0], PASSED if item[0] == "passed" else SKIPPED), item[0]


def anchor(test: str, model: str) -> str:
    """A stable element id for a (test, model) row: links to it survive a re-run."""
    return "t-" + hashlib.sha1(f"{test}\0{model}".encode()).hexdigest()[:12]


@dataclass
class TableData:
    """The rows the page draws first, and the pairs it unpacks after (the bulk of the bytes):
    one line of JSON per (test, model), parsed by the page only when that row's answers open."""

    rows: dict[str, JSON]
    pairs: list[str]


def table_data(verdict: Verdict, outcomes: list[Outcome]) -> TableData:
    """Rows (failures first) with the test names and models they index, and every pair.

    A row is ``[test, model, outcome, worst pair verdict, message, anchor, its line of pairs, how
    many, nodeid, *figures, verdict note, different]``: the figures (``columns.TEST_COLUMNS``,
    each ``[text, value]`` or a count) come after the fixed fields, so a new one moves none of
    them; ``different`` (1 or 0) drives the page's "different answers only" filter (``differs``).
    One pass over the (test, model)s, test by test: each one's pairs are written as its line of
    JSON as they are read, and what its row needs of them kept (``_RowFacts``), nothing more.
    """
    models = _models(verdict)
    tests = list(dict.fromkeys(row.test for row in verdict.tests))
    grouped = _grouped(outcomes)
    lines: list[str] = []
    facts: dict[_Row, _RowFacts] = {}
    for key in ((t, m) for t in tests for m in models):
        found = grouped.pop(key, None)
        if found is not None:
            facts[key] = _row_facts(found, lines)
    test_index = {t: i for i, t in enumerate(tests)}
    model_index = {m: i for i, m in enumerate(models)}
    rows = []
    for position, row in enumerate(verdict.tests):
        fact = facts.get((row.test, row.model), _NO_FACTS)
        rows.append(
            (
                (_rank(row.outcome, fact.worst), position),
                [
                    test_index[row.test],
                    model_index[row.model],
                    row.outcome,
                    fact.worst,
                    visible(row.message or ""),
                    anchor(row.test, row.model),
                    fact.line,
                    fact.pairs,
                    fact.nodeid,
                    *_figures(row),
                    fact.note,
                    fact.different,
                ],
            )
        )
    rows.sort(key=lambda r: r[0])
    data: dict[str, JSON] = {
        "models": list(models),
        "tests": list(tests),
        "rows": [r for _, r in rows],
    }
    return TableData(data, lines)


_Row = tuple[str, str]  # (test, model)


class _RowFacts(NamedTuple):
    """What a (test, model)'s row shows of its pairs: its line among the pairs' (-1: none), how
    many, the nodeid pytest prints for it (which the page's search finds), its worst verdict and
    that verdict's note (``row_note``), and whether any answer differs (``differs``: 1 or 0)."""

    line: int
    pairs: int
    nodeid: str | None
    worst: str | None
    note: str | None
    different: int


_NO_FACTS = _RowFacts(-1, 0, None, None, None, 0)


def _models(verdict: Verdict) -> list[str]:
    """The models of the model rows, then any with test rows but no model row (an older report
    still shows them)."""
    models = [r.model for r in verdict.models]
    for row in verdict.tests:
        if row.model not in models:
            models.append(row.model)
    return models


def _grouped(outcomes: list[Outcome]) -> dict[_Row, list[Outcome]]:
    """Each (test, model)'s outcomes, in run order (``aggregate.outcome_order``: a test's runs
    and phases)."""
    grouped: dict[_Row, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        grouped[(outcome.test, outcome.model)].append(outcome)
    for runs in grouped.values():
        if len(runs) > 1:
            runs.sort(key=outcome_order)
    return grouped


def _row_facts(outcomes: list[Outcome], lines: list[str]) -> _RowFacts:
    """A row's facts; its pairs, when it has any, appended to ``lines`` as one line of JSON
    (``pairs_data``)."""
    found = [(o, p) for o in outcomes for p in o.pairs]
    pairs = [p for _, p in found]
    worst = _row_verdict(pairs)
    line, different = -1, False
    if found:
        line = len(lines)
        data, different = _pairs(found)
        lines.append(shown_json(data))
    note = row_note(pairs, worst)
    return _RowFacts(line, len(found), outcomes[0].nodeid, worst, note, int(different))


def _rank(outcome: str, worst: str | None) -> int:
    """A row's place in the failures-first order: its outcome's rank; a passed test by its worst
    pair's verdict; a skipped test last."""
    if outcome == "passed":
        return VERDICT_RANK.get(worst or "", PASSED)
    if outcome == "skipped":
        return SKIPPED
    return RANK.get(outcome, PASSED)


def row_note(pairs: list[Pair], worst: str | None) -> str | None:
    """Beside a row's verdict: the error behind it (its least certain deciding score), or why
    it is undecided (the cause: ``policy.cause_of``)."""
    if worst == "undecided":
        whys = [s.why_undecided for p in pairs for s in p.scores if s.verdict == "undecided"]
        return cause_of(whys[0]).value if whys else None
    if worst not in ("equivalent", "different"):
        return None
    scores = [deciding_score(p) for p in pairs if p.verdict == worst]
    found = [s for s in scores if s is not None]
    if not found:
        return None
    worst_score = max(found, key=lambda s: 1.0 if s.error_upper is None else s.error_upper)
    return error_text(worst_score)


def _answers(outcome: Outcome, pair: Pair) -> tuple[Call | None, str, str | None]:
    """The pair's call (None: not in the outcome), its answer and the golden one as read side by
    side (``diffview.answer_text``; the golden one None when there is none)."""
    calls = outcome.calls
    call = calls[pair.call_index] if 0 <= pair.call_index < len(calls) else None
    candidate = answer_text(call.text, call.tool_calls) if call is not None else ""
    reference = pair.reference_text
    if reference is not None:  # a golden answer that only called tools has the text ""
        reference = answer_text(reference, pair.reference_tool_calls)
    return call, candidate, reference


def _differs(pair: Pair, call: Call | None, candidate: str, reference: str | None) -> bool:
    """The candidate's answer is not the reference's word for word (spacing aside): a different
    text or tool call, a failed call, or no golden answer to match."""
    if pair.missing or reference is None or call is None or call.error is not None:
        return True
    return candidate.split() != reference.split()


def _row_verdict(pairs: list[Pair]) -> str | None:
    found = {p.verdict for p in pairs}
    return next((v for v in VERDICT_ORDER if v in found), None)


def _figures(row: PerTestRow) -> list[JSON]:
    """The table's figures (``columns.TEST_COLUMNS``): each ``[shown text, value]`` (value None
    sorts last), or a count as it is."""
    out: list[JSON] = []
    for column in TEST_COLUMNS:
        value = column.value(row)
        out.append(value if column.text is None else [column.text(value), _short(value)])
    return out


def _short(value: float | None) -> float | None:
    """Four significant digits: enough to sort by, and a third of the bytes of a full float."""
    return None if value is None else float(f"{value:.4g}")


def pairs_data(found: list[tuple[Outcome, Pair]]) -> list[JSON]:
    """A row's pairs (``pair_data``), each call's request naming the pair of its previous call
    (of its outcome, same role) whose request holds the messages it sent again."""
    return _pairs(found)[0]


def _pairs(found: list[tuple[Outcome, Pair]]) -> tuple[list[JSON], bool]:
    """``pairs_data``, and whether any answer differs from its reference (``_differs``)."""
    at: dict[tuple[int, int], int] = {}
    out: list[JSON] = []
    different = False
    for position, (outcome, pair) in enumerate(found):
        at[(id(outcome), pair.call_index)] = position
        before = _previous_call(outcome.calls, pair.call_index)
        data, differs = _pair(outcome, pair, before, at.get((id(outcome), before), -1))
        out.append(data)
        different = different or differs
    return out, different


def _previous_call(calls: list[Call], index: int) -> int:
    """The index of the call before ``calls[index]`` of the same role (-1: none)."""
    if not 0 <= index < len(calls):
        return -1
    role = calls[index].role
    return next((i for i in range(index - 1, -1, -1) if calls[i].role == role), -1)


def pair_data(outcome: Outcome, pair: Pair, earlier: int = -1) -> list[JSON]:
    """``[key, reference model, missing, equivalence, scores, error, reference text, candidate
    text, call, transcript step]``: the call as recorded, with its request's repeated messages in
    the pair at ``earlier`` (``htmlcalls.call_line``), and its transcript step only where the
    page's script would not derive the one ``transcript_step`` makes (else None). The two
    answers are as the word diff reads them (``diffview.answer_text``, cut at
    ``diffview.MAX_CHARS``, made visible: a bidi override is a marker, never applied), and the
    page's script diffs them when the pair is drawn (``templates/worddiff.js``, a port of
    ``diffview.diff_runs``): no reference text (None) when the golden answer is missing, the
    candidate's text then whole. The other strings are made visible as the line is written
    (``htmlcalls.shown_json``)."""
    before = _previous_call(outcome.calls, pair.call_index)
    return _pair(outcome, pair, before, earlier)[0]


def _pair(outcome: Outcome, pair: Pair, before: int, earlier: int) -> tuple[list[JSON], bool]:
    """``pair_data`` (``before``: the index of the same role's call before the pair's, -1:
    none), and whether its answer differs from the reference (``_differs``)."""
    calls = outcome.calls
    call, candidate, reference = _answers(outcome, pair)
    different = _differs(pair, call, candidate, reference)
    scores: list[JSON] = [
        [
            s.scorer,
            f"{s.value:.2f}",
            s.verdict,
            s.decided_by,
            error_text(s),
            s.why_undecided or None,
        ]
        for s in pair.scores
    ]
    missing = pair.missing or reference is None
    candidate = visible(candidate)
    shown_reference = None
    if reference is not None and not missing:  # as diff_runs reads them: visible, then cut
        shown_reference, candidate = cut(visible(reference)), cut(candidate)
    error = call.error if call is not None else None
    line, derived = call_line(calls, pair.call_index, before, earlier, candidate)
    data: list[JSON] = [
        pair.key,
        pair.reference_model or "reference",
        missing,
        fmt.score(pair.equivalence),
        scores,
        error,
        shown_reference,
        candidate,
        line,
        None if derived else transcript_step(calls, pair.call_index),
    ]
    return data, different


def error_text(score: Score) -> str | None:
    """A decided verdict's error as the pair view shows it: ``error 0.039 (<= 0.047)``, ``certain
    (error 0)`` or ``error unmeasured``; None for no decided verdict."""
    if score.verdict not in ("equivalent", "different"):
        return None
    if score.error_upper is None:
        return "error unmeasured"
    if score.error_upper == 0:
        return "certain (error 0)"
    rate = f"{score.error:.3f} " if score.error is not None else ""
    return f"error {rate}(<= {score.error_upper:.3f})"


def _content(message: JSON) -> str:
    """A chat message's text: its string content, or its text parts joined."""
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict)]
        return "\n".join(str(p) for p in parts if p)
    return "" if content is None else str(content)


def transcript_step(calls: list[Call], index: int) -> list[JSON]:
    """One call of an agent's conversation as its transcript shows it, ``[[who, text], ...]``:
    what its request sent that the candidate's call before it had not (the user's turn, each tool
    result), then its answer (its text, each tool call with its arguments). Read in call order,
    the steps are the whole conversation: every tool call and its result, in order. The page's
    script derives the same from the call as its line carries it (``templates/calls.js``
    ``stepOf``); the line carries this one only where the script's could differ
    (``htmlcalls.step_derivable``)."""
    if not 0 <= index < len(calls):
        return []
    return _sent(calls, index) + _answered(calls[index])


def _sent(calls: list[Call], index: int) -> list[JSON]:
    """What the call's request sent that the same role's call before it had not: the user's turn,
    each tool result (the previous answer is shown as that call's own)."""
    call = calls[index]
    earlier = [c for c in calls[:index] if c.role == call.role]
    messages = call.request.get("messages")
    messages = messages if isinstance(messages, list) else []
    before = earlier[-1].request.get("messages") if earlier else None
    start = len(before) if isinstance(before, list) and len(before) <= len(messages) else 0
    steps: list[JSON] = []
    for message in messages[start:]:
        role = str(message.get("role", "")) if isinstance(message, dict) else ""
        if role == "assistant" and earlier:  # the previous answer, shown as that call's
            continue
        steps.append([_who(role, message), _content(message)])
    return steps


def _who(role: str, message: JSON) -> str:
    """Who a sent message is from, as the transcript names it (a tool result with its call's id)."""
    if role == "tool" and isinstance(message, dict):
        return f"tool result {message.get('tool_call_id') or ''}".rstrip()
    return role or "message"


def _answered(call: Call) -> list[JSON]:
    """The call's answer: its error, its text, each tool call with its arguments."""
    steps: list[JSON] = []
    if call.error is not None:
        steps.append(["error", call.error])
    if call.text:
        steps.append(["assistant", call.text])
    steps += [_tool_call(tc) for tc in call.tool_calls or ()]
    return steps


def _tool_call(tc: dict[str, JSON]) -> list[JSON]:
    fn = tc.get("function") if isinstance(tc.get("function"), dict) else tc
    name = fn.get("name") if isinstance(fn, dict) else None
    args = fn.get("arguments") if isinstance(fn, dict) else None
    shown = args if isinstance(args, str) else dumps(args)
    return [f"tool call {tc.get('id') or ''}".rstrip(), f"{name}({shown})"]


def _json(data: JSON) -> str:
    """Compact, on one line (a newline in a string is written ``\\n``)."""
    return dumps(data, separators=(",", ":"))


def pack(text: str) -> str:
    """Gzip, then URL-safe base64: a string safe inside the page's script as it is (no ``/``, so
    never a ``</script>`` nor anything that reads as an address). Level 4: at 10,000 cases of
    distinct answers 85 ms less than level 6 for 2.7% more bytes (0.9% with repeated ones)."""
    raw = gzip.compress(text.encode("utf-8"), compresslevel=4, mtime=0)
    return base64.urlsafe_b64encode(raw).decode("ascii")


def pack_table(data: TableData) -> tuple[str, str]:
    """The rows as one JSON document, the pairs as JSON lines: both packed."""
    return pack(_json(data.rows)), pack("\n".join(data.pairs))


def unpack(packed: str) -> str:
    """The text back from ``pack`` (for tests and tools reading a written page)."""
    return gzip.decompress(base64.urlsafe_b64decode(packed)).decode()
