"""The HTML report at size, by hand: ``python bench/html_size.py [--tests N] [--repeats R]
[--words MIN-MAX] [--shots DIR]``.

Builds a synthetic run of N tests x 3 candidate models (10,000 x 3 by default: 30,000 outcomes,
one call and one answer pair each) as real records, and puts it through the real report code:
``aggregate``, the gate, ``write_html``. Prints the time each step took, the file's size, and how
long headless Chromium takes to open it, driven over the DevTools protocol: the page logs
``slam-report-ready N ms`` once the headline, the tables and the first page of rows are drawn,
and ``slam-answers-ready N ms`` once every answer pair is unpacked too (``performance.now()``,
from navigation start). ``--shots DIR`` also saves screenshots (the headline; a filter applied,
answers open; the test x model matrix).

The answers are prose of 15 to 60 words (``--words``; about 250 characters, a short reply or a
small JSON object as product tests check them) drawn from a fixed-seed Zipf distribution over 5,000
made-up words (so gzip cannot find more repetition than real text has); the reference answer is
shared by the three candidates, which change 5%, 25% and 60% of its words. One test in 25 fails
on the weakest candidate, one in 100 on the middle one, one in 400 errs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import Sample, footer, header, table

from pytest_slam.records import Call, ModelSpec, Outcome, Pair, Score
from pytest_slam.report.aggregate import RunInfo, aggregate
from pytest_slam.report.gate import Gate, apply_gate, evaluate
from pytest_slam.report.html import write_html

MODELS = {"qwen2.5-7b": 0.05, "llama-3.2-3b": 0.25, "smollm2-135m": 0.60}  # share of words changed
FAILS = {"qwen2.5-7b": 10**9, "llama-3.2-3b": 100, "smollm2-135m": 25}  # one test in N fails
CHROMIUM = "chromium"
READY = re.compile(r"(slam-report-ready|slam-answers-ready) (\d+) ms")


def vocabulary(rng: random.Random, n: int = 5000) -> list[str]:
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    weights = [len(letters) - i for i in range(len(letters))]
    return ["".join(rng.choices(letters, weights, k=rng.randint(2, 10))) for _ in range(n)]


def prose(rng: random.Random, words: list[str], zipf: list[float], n: int) -> list[str]:
    out = rng.choices(words, zipf, k=n)
    for i in range(0, n, rng.randint(8, 16)):
        out[i] = out[i].capitalize()
    return out


def outcomes(n_tests: int, words_per_answer: tuple[int, int] = (15, 60), seed: int = 7
             ) -> list[dict[str, Any]]:  # fmt: skip
    rng = random.Random(seed)
    words = vocabulary(rng)
    zipf = [1 / (rank + 1) for rank in range(len(words))]
    out = []
    for t in range(n_tests):
        module, test = f"tests/test_area{t % 40:02d}.py", f"test_case_{t:05d}"
        ref = prose(rng, words, zipf, rng.randint(*words_per_answer))
        reference = " ".join(ref) + "."
        key = f"{rng.getrandbits(64):016x}{t:08x}"
        for model, change in MODELS.items():
            new = rng.choices(words, zipf, k=len(ref))
            cand = [new[i] if rng.random() < change else w for i, w in enumerate(ref)]
            text = " ".join(cand) + "."
            score = max(0.0, min(1.0, 1 - change + rng.uniform(-0.15, 0.15)))
            failed = t % FAILS[model] == 0
            errored = t % 400 == 7 and model == "smollm2-135m"
            call = Call(model=model, role="candidate", request={"model": "gpt-4o"}, text=text,
                        prompt_tokens=200 + len(ref), completion_tokens=len(cand),
                        ttft_ms=rng.uniform(20, 400), e2e_ms=rng.uniform(200, 4000),
                        cost_usd=1e-5 * len(cand), key=key)  # fmt: skip
            pair = Pair(call_index=0, key=key, golden_file=f"__slam__/{module}.json",
                        reference_text=reference, reference_model="gpt-4o-2024-08-06",
                        reference_e2e_ms=1500.0, reference_ttft_ms=300.0,
                        reference_cost_usd=4e-5 * len(ref),
                        scores=[Score("embedding", score, threshold=0.8, fail_below=0.6,
                                      verdict="equivalent" if score >= 0.8 else
                                      "different" if score < 0.6 else "undecided",
                                      decided_by="bands")])  # fmt: skip
            result = "error" if errored else "failed" if failed else "passed"
            message = "AssertionError: the answer misses the order number" if failed else None
            out.append(Outcome(nodeid=f"{module}::{test}[{model}]", test=f"{module}::{test}",
                               model=model, outcome=result, duration_s=0.5, calls=[call],
                               pairs=[pair], message=message).as_dict())  # fmt: skip
    return out


def chromium(url: str, profile: Path, *args: str) -> None:
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", *args, url]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        sys.exit(f"bench: chromium exited {done.returncode}: {done.stderr[-2000:]}")


class Browser:
    """Headless Chromium driven over ``--remote-debugging-pipe`` (the DevTools protocol, NUL-
    separated JSON on fds 3 and 4): the bench hears the page's console as it happens, so it
    times the real load, where ``--dump-dom`` would stop at the load event."""

    def __init__(self, profile: Path) -> None:
        to_chrome, self._out = os.pipe()
        self._in, from_chrome = os.pipe()

        def fds() -> None:  # in the child: the pipe ends become fds 3 and 4
            a, b = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             "--remote-debugging-pipe", f"--user-data-dir={profile}", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4, to_chrome, from_chrome),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chrome)
        os.close(from_chrome)
        self._buffer, self._id = b"", 0
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.call("Runtime.enable", session=self.session)

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> int:  # fmt: skip
        self._id += 1
        message: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        return self._id

    def read(self, timeout: float = 120) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._in], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                sys.exit("bench: Chromium said nothing for 120 s")
            self._buffer += os.read(self._in, 1 << 20)
        message, self._buffer = self._buffer.split(b"\0", 1)
        found: dict[str, Any] = json.loads(message)
        return found

    def call(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:  # fmt: skip
        sent = self.send(method, params, session)
        while True:
            message = self.read()
            if message.get("id") == sent:
                result: dict[str, Any] = message.get("result", {})
                return result

    def open(self, url: str, until: tuple[str, ...]) -> dict[str, float]:
        """Navigate and wait for each console line starting with one of ``until``; each one's ms."""
        self.call("Page.navigate", {"url": "about:blank"}, self.session)  # a fresh load each time
        self.send("Page.navigate", {"url": url}, self.session)
        heard: dict[str, float] = {}
        while len(heard) < len(until):
            message = self.read()
            if message.get("method") != "Runtime.consoleAPICalled":
                continue
            text = str(message["params"]["args"][0].get("value", ""))
            found = READY.match(text)
            if found and found.group(1) in until:
                heard[found.group(1)] = float(found.group(2))
        return heard

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


def screenshots(page: Path, folder: Path, profile: Path) -> list[tuple[str, int]]:
    """The top of the page (headline), and the rows section with a filter and as the matrix: a
    frame shows the page shifted up to the rows, since headless Chromium does not scroll."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    views = (("headline", "", 0, 700),
             ("filter", "#outcome=failures&model=smollm2-135m&open=all", 1, 760),
             ("matrix", "#view=matrix&outcome=failures", 1, 640))  # fmt: skip
    for name, hash_, framed, height in views:
        url = page.as_uri() + hash_
        if framed:  # a frame showing the page from its "Per test and model" heading down
            frame = page.with_name(f"frame-{name}.html")
            frame.write_text(
                '<!DOCTYPE html><html><body style="margin:0;overflow:hidden">'
                f'<iframe id="f" src="{url}" style="position:absolute;left:0;width:1280px;'
                f'height:9000px;border:0"></iframe><script>var f=document.getElementById("f");'
                "f.onload=function(){var t=setInterval(function(){var d=f.contentDocument;"
                'if(d.body.getAttribute("data-ready")){clearInterval(t);'
                'f.style.top=(-d.getElementById("rows").offsetTop+8)+"px";}},20);};'
                "</script></body></html>",
                encoding="utf-8",
            )
            url = frame.as_uri()
        shot = folder / f"html-10k-{name}.png"
        chromium(url, profile, "--hide-scrollbars", "--virtual-time-budget=20000",
                 "--allow-file-access-from-files",  # the frame reads the page's layout
                 f"--window-size=1280,{height}", f"--screenshot={shot}")  # fmt: skip
        made.append((str(shot), shot.stat().st_size))
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--words", default="15-60", help="words per answer, MIN-MAX")
    parser.add_argument("--shots", type=Path, default=None)
    args = parser.parse_args()
    low, high = (int(w) for w in args.words.split("-"))
    header("The HTML report at size",
           f"python bench/html_size.py --tests {args.tests} --words {args.words}")  # fmt: skip
    folder = Path(tempfile.mkdtemp(prefix="slam-html-"))
    steps = []
    start = time.perf_counter()
    records = outcomes(args.tests, (low, high))
    steps.append(("synthetic outcomes", time.perf_counter() - start))
    start = time.perf_counter()
    info = RunInfo(models=[ModelSpec(m, "openai", m) for m in MODELS], reference="gpt-4o",
                   started="2026-12-01T09:00:00+00:00", finished="2026-12-01T17:42:10+00:00",
                   pytest_version="9.0.3", plugin_version="0.1.0")  # fmt: skip
    verdict = aggregate(records, info)
    steps.append(("aggregate", time.perf_counter() - start))
    start = time.perf_counter()
    verdict = apply_gate(verdict, evaluate(Gate(min_pass_rate=0.97), verdict))
    page = write_html(folder / "report.html", verdict, [Outcome.from_dict(o) for o in records])
    steps.append(("gate + write_html (word diffs, pack, template)", time.perf_counter() - start))
    size = page.stat().st_size
    print(f"{args.tests:,} tests x {len(MODELS)} models = {len(records):,} outcomes and pairs; "
          f"{sum(len(o['calls'][0]['text']) for o in records) / len(records):.0f} characters per "
          f"candidate answer on average\n")  # fmt: skip
    table(["step", "seconds"], [(name, f"{s:.1f}") for name, s in steps])
    print(f"\nHTML file: **{size / 1e6:.2f} MB** ({size:,} bytes)\n")
    profile = folder / "profile"
    rows, answers = Sample(), Sample()
    browser = Browser(profile)
    try:
        for _ in range(args.repeats):
            heard = browser.open(page.as_uri(), ("slam-report-ready", "slam-answers-ready"))
            rows.add(heard["slam-report-ready"] / 1000)
            answers.add(heard["slam-answers-ready"] / 1000)
    finally:
        browser.close()
    table(
        [f"in headless Chromium, from navigation start (median of {args.repeats}, min-max)",
         "seconds"],
        [("headline, tables and the first page of rows drawn, filters working", rows.show()),
         ("every answer pair unpacked too (search over answers, pairs open)", answers.show())],
    )  # fmt: skip
    if args.shots is not None:
        print()
        table(["screenshot", "bytes"], screenshots(page, args.shots, profile))
    footer()


if __name__ == "__main__":
    main()
