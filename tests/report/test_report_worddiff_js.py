"""The page's word diff (``templates/worddiff.js``) gives the spans the Python diff gives.

The HTML report carries each pair's two answers and its script diffs them when a pair is drawn
(issue 53: the build no longer diffs 10,000 pairs). The script is a port of
``diffview.uncut_runs``; here node runs it on real answer pairs (AlpacaEval's, MT-Bench's) and on
generated ones made to find a port's slips (Unicode word and space classes, tokens repeated, a
bit row longer than one 32-bit word, empty and equal sides), and every pair's runs and "words in
common" must be the Python diff's. Needs node (the page's own engine is a browser's: the script
uses nothing node has and a browser lacks).
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import pytest
from html_helpers import chromium, report_data, sides
from patience import patient
from slam_helpers import SHARED_DATA, needs_chromium

from pytest_slam.report import htmldata
from pytest_slam.report.diffview import MAX_CHARS, cut, diff_runs, uncut_runs
from pytest_slam.util.textcodec import visible

NODE = shutil.which("node") or shutil.which("nodejs")
SCRIPT = Path(htmldata.__file__).parent / "templates" / "worddiff.js"
needs_node = pytest.mark.skipif(NODE is None, reason="node not installed (apt-get install nodejs)")

RUNNER = """
const fs = require("fs");
const lib = new Function(fs.readFileSync(process.argv[1], "utf8") +
  "; return {diffRuns: diffRuns, percent: percent};")();
const asked = JSON.parse(fs.readFileSync(0, "utf8"));
const out = asked.pairs.map(p => { const d = lib.diffRuns(p[0], p[1]); return [d[0], lib.percent(d[1])]; });
process.stdout.write(JSON.stringify({runs: out, percents: asked.ratios.map(lib.percent)}));
"""


def page_diffs(
    pairs: list[tuple[str, str]],
    ratios: list[float] = (),  # type: ignore[assignment]
) -> tuple[list[tuple[list[str], str]], list[str]]:
    """Each pair's runs and words in common as the page's script makes them, and ``ratios`` as
    it writes a share."""
    assert NODE is not None
    asked = json.dumps({"pairs": pairs, "ratios": list(ratios)})  # ASCII: astral as two escapes
    done = subprocess.run([NODE, "-e", RUNNER, str(SCRIPT)], input=asked, capture_output=True,
                          text=True, encoding="utf-8", check=True, timeout=patient(300))  # fmt: skip
    found = json.loads(done.stdout)
    return [(runs, share) for runs, share in found["runs"]], found["percents"]


def _as_shipped(reference: str, candidate: str) -> tuple[str, str]:
    """The two texts as a pair's line carries them (``htmldata.pair_data``)."""
    return cut(visible(reference)), cut(visible(candidate))


def _check(pairs: list[tuple[str, str]]) -> None:
    shipped = [_as_shipped(r, c) for r, c in pairs]
    found, _ = page_diffs(shipped)
    for (reference, candidate), (runs, share) in zip(pairs, found, strict=True):
        want, ratio = diff_runs(visible(reference), visible(candidate))
        assert (runs, share) == (want, f"{ratio:.0%}"), (reference[:200], candidate[:200])


def _real_pairs() -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    alpaca = SHARED_DATA / "alpaca_eval_gpt4_vs_slm" / "records.jsonl"
    for line in alpaca.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        pairs += [(record["gpt4_turbo_output"], t) for t in record["slm_outputs"].values() if t]
    bench = SHARED_DATA / "mt_bench_gpt4_vs_slm" / "records.jsonl"
    for line in bench.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        for turns in record["other_answers"].values():
            pairs += [(r, c) for r, c in zip(record["gpt4_answer_turns"], turns, strict=False)
                      if r and c]  # fmt: skip
    return pairs


@needs_node
@pytest.mark.skipif(
    not (SHARED_DATA / "alpaca_eval_gpt4_vs_slm").is_dir(),
    reason=f"real recorded data not found at {SHARED_DATA} (../shared/data)",
)
def test_the_page_diffs_real_answer_pairs_as_python_does() -> None:
    pairs = _real_pairs()
    assert len(pairs) > 1_200
    _check(pairs)


WORDS = [
    "the", "a", "refund", "Refund", "café", "cafe\u0301", "naïve", "über", "Straße", "東京", "数字",
    "x²", "٣٤", "Ⅻ", "_under_", "snake_case", "1,000", "3.14", "😀", "👍🏽", "e\u0300\u0301", "ǅ",
    "\u0915\u094d\u0937", "U+202E", "\u202e", "\x00", "\x1b[31m", "\u00ad", "\ufeff", "\u2028",
]  # fmt: skip
GAPS = [" ", "  ", "\n", "\n\n", "\t", "\u00a0", "\u3000", "\u2003", "\r\n", "", "\x1c", "\x85"]
MARKS = [".", ",", "!", "?", ";", "—", "…", "«", "»", "(", ")", "-", "'", '"', "%", "$", "¿", "†"]


def _text(rng: random.Random, n: int) -> list[str]:
    out = []
    for _ in range(n):
        out.append(rng.choice(WORDS) if rng.random() < 0.8 else rng.choice(MARKS))
        out.append(rng.choice(GAPS) if rng.random() < 0.9 else "")
    return out


def _edited(rng: random.Random, parts: list[str], rate: float) -> list[str]:
    out = []
    for part in parts:
        roll = rng.random()
        if roll < rate / 3:
            continue
        if roll < 2 * rate / 3:
            out.append(rng.choice(WORDS + GAPS + MARKS))
        out.append(part)
        if rng.random() < rate / 3:
            out += [rng.choice(WORDS), " "]
    return out


@needs_node
def test_the_page_diffs_generated_pairs_as_python_does() -> None:
    """Word and space classes beyond ASCII, controls made visible, rows of 1 to 3 words of 32
    bits and more, both sides changed anywhere."""
    rng = random.Random(53)
    pairs: list[tuple[str, str]] = [("", ""), ("", "a"), ("a", ""), ("same words", "same words")]
    pairs += [(" ", "  "), ("a a a a", "a a"), ("a b", "b a"), ("x.", "x!")]
    for _ in range(600):
        parts = _text(rng, rng.choice([1, 3, 15, 31, 32, 33, 40, 64, 65, 100, 300]))
        pairs.append(("".join(parts), "".join(_edited(rng, parts, rng.choice([0.05, 0.3, 0.9])))))
    long = "".join(_text(rng, 9_000))
    pairs.append((long, "".join(_edited(rng, list(long), 0.01))))  # cut past MAX_CHARS
    assert len(pairs[-1][0]) > MAX_CHARS
    _check(pairs)


@needs_node
def test_the_share_in_common_rounds_as_python_writes_it() -> None:
    """Half to even on the double Python rounds (12.5% is "12%", 0.5% is "0%" or "1%" as the
    double falls): every share of two token counts up to 400."""
    ratios = sorted({float(Fraction(2 * m, t)) for t in range(1, 401) for m in range(t // 2 + 1)})
    _, shown = page_diffs([], ratios)
    assert shown == [f"{r:.0%}" for r in ratios]


def test_a_pair_carries_its_two_answers_as_the_diff_reads_them() -> None:
    """The line holds the texts the diff reads (made visible, cut at ``MAX_CHARS``): diffing
    them is the diff of the answers, so the page, diffing the line's texts, shows what the build
    showed when it diffed; with no golden answer, the candidate's text whole and nothing to diff."""
    from pytest_slam.records import Call, Outcome, Pair

    answers = [("Refund them now.", "Refund the customer."), ("No\u202e.", "Yes\x1b."),
               ("word " * 5_000 + "end", "word " * 4_999 + "\u202e end"), ("", "only tools")]  # fmt: skip
    for n, (reference, text) in enumerate(answers):
        call = Call(
            "mini", "candidate", {"messages": [{"role": "user", "content": "q"}]}, text=text
        )
        pair = Pair(call_index=0, key=f"k{n}", golden_file="g.json", reference_text=reference)
        outcome = Outcome(nodeid=f"t.py::t{n}[mini]", test=f"t.py::t{n}", model="mini",
                          outcome="passed", calls=[call], pairs=[pair])  # fmt: skip
        (line,) = htmldata.pairs_data([(outcome, pair)])
        assert line[6:8] == list(_as_shipped(reference, text))  # type: ignore[index]
        assert uncut_runs(line[6], line[7]) == diff_runs(visible(reference), visible(text))  # type: ignore[index]
        missing = Pair(0, "k", "g.json", None, missing=True)
        (alone,) = htmldata.pairs_data([(outcome, missing)])
        assert alone[6:8] == [None, visible(text)]  # type: ignore[index]


def test_the_page_carries_the_script_its_pairs_need(tmp_path: Path) -> None:
    import report_helpers as synth

    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.html import render_html

    outcomes = synth.outcomes()
    page = render_html(aggregate(outcomes, synth.run_info()), outcomes)
    assert page.count("function diffRuns(") == 1 and SCRIPT.read_text().rstrip() in page
    _, pairs = report_data(page)
    assert any(p[6] is not None for p in pairs)
    if NODE is not None:  # the page's script, the diff within it, parses (node --check)
        script = page.split("<script>")[-1].split("</script>")[0]
        (tmp_path / "page.js").write_text(script, encoding="utf-8")
        done = subprocess.run([NODE, "--check", str(tmp_path / "page.js")], capture_output=True)
        assert done.returncode == 0, done.stderr


class _Drawn(HTMLParser):
    """Each drawn pair's two sides as text, a change as ``<del>``/``<ins>``; its notes' text."""

    def __init__(self) -> None:
        super().__init__()
        self.sides: list[str] = []
        self.notes: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = dict(attrs).get("class")
        if tag == "pre" and cls in ("ref", "cand"):
            self._in = "side"
            self.sides.append("")
        elif tag == "p" and cls == "note":
            self._in = "note"
            self.notes.append("")
        elif self._in == "side" and tag in ("del", "ins"):
            self.sides[-1] += f"<{tag}>"

    def handle_endtag(self, tag: str) -> None:
        if self._in == "side" and tag in ("del", "ins"):
            self.sides[-1] += f"</{tag}>"
        elif tag in ("pre", "p"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "side":
            self.sides[-1] += data
        elif self._in == "note":
            self.notes[-1] += data


@needs_chromium
def test_chromium_draws_the_spans_the_python_diff_gives(tmp_path: Path) -> None:
    """A browser opening every pair draws, side by side, the changes ``sides`` (the Python diff
    of the same texts) gives, and the words in common it gives."""
    import report_helpers as synth

    from pytest_slam.report.aggregate import aggregate
    from pytest_slam.report.html import write_html

    outcomes = synth.outcomes()
    with_pairs = [o for o in outcomes if o["pairs"] and o["calls"]]
    with_pairs[0]["calls"][0]["text"] = "Straße café 東京, x² — the refund\u202e 😀 now."
    with_pairs[0]["pairs"][0]["reference_text"] = "Strasse café 東京; x² — a refund 😀 now!"
    page = write_html(tmp_path / "report.html", aggregate(outcomes, synth.run_info()), outcomes)
    drawn = _Drawn()
    drawn.feed(chromium(f"{page.as_uri()}#open=all", "--dump-dom", tmp_path=tmp_path))
    _, pairs = report_data(page.read_text(encoding="utf-8"))
    diffed = [p for p in pairs if p[6] is not None]
    want = sorted(side for p in pairs for side in sides(p) if side is not None)
    assert len(diffed) > 3 and len(diffed) < len(pairs)  # diffed pairs, and one with no golden
    assert sorted(drawn.sides) == want
    assert (
        "<del>Strasse </del>café 東京<del>; </del>x² — <del>a refund </del>😀 now<del>!</del>"
        in want
    )
    marker = "\u27e8U+202E\u27e9"  # the override as the page shows it, never applied
    assert (
        f"<ins>Straße </ins>café 東京<ins>, </ins>x² — <ins>the refund{marker} </ins>😀 now<ins>.</ins>"
        in want
    )
    ratios = [f"words in common {uncut_runs(p[6], p[7])[1]:.0%}" for p in diffed]
    assert sorted(ratios) == sorted(
        n[n.index("words in common") :].split(" \u00b7")[0] for n in drawn.notes if "in common" in n
    )
