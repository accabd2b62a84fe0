"""Helpers of the blind-review tests: a product suite whose real run writes a real report, the
`slam review` server as a subprocess, and a small Chrome DevTools Protocol client over a pipe."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from patience import patient
from slam_helpers import CHROMIUM, wait_for

from pytest_slam.records import Score
from pytest_slam.review.pairs import ReviewPair
from pytest_slam.testing import FakeOpenAI

MODELS = ("qwen-small", "llama-tiny")
SYSTEM = "You are the support assistant of Acme. Answer in Markdown."
QUESTIONS = {
    "test_refund": "How do I get a refund for order 1182?",
    "test_password": "How do I reset my password?",
    "test_snippet": "Show the Python line that prints an HTML script tag.",
}
REFERENCE = {
    QUESTIONS["test_refund"]: "Open **Orders**, pick order 1182 and choose *Request refund*.\n\n"
    "1. The refund is checked within 2 days.\n2. The money is back within 5 days.",
    QUESTIONS["test_password"]: "Use **Forgot password** on the sign-in page; the link in the "
    "e-mail is valid for one hour.",
    QUESTIONS["test_snippet"]: "Like this:\n\n```python\nprint('<script>alert(1)</script>')\n```\n"
    "It prints the tag as text.",
}
CANDIDATE = {  # by model id: one close to the reference, one that answers badly
    "qwen-small": lambda q: REFERENCE[q].replace("within", "in"),
    "llama-tiny": lambda q: "I can't help. <script>document.title='pwned'</script> <b>bold</b>",
}
PRODUCT = f"""
from openai import OpenAI

client = OpenAI()

def ask(question):
    r = client.chat.completions.create(model="gpt-4", temperature=0, messages=[
        {{"role": "system", "content": {SYSTEM!r}}}, {{"role": "user", "content": question}}])
    return r.choices[0].message.content
"""
TESTS = "import pytest, product\n\npytestmark = pytest.mark.slm\n" + "".join(
    f"\n\ndef {name}():\n    assert product.ask({q!r})\n" for name, q in QUESTIONS.items()
)
PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["qwen-small", "llama-tiny"]
reference = "{reference}#gpt-4"
report = "slam-report.json"
equivalence = {{ by = "fuzzy", at_least = 0.6 }}

[tool.slam.models.qwen-small]
base_url = "{candidate}"

[tool.slam.models.llama-tiny]
base_url = "{candidate}"
"""


def pair(key: str, model: str, fuzzy: float, judge: float | None = None) -> ReviewPair:
    """A synthetic pair scored by fuzzy (threshold 0.6) and, when given, a judge without one."""
    scores = [Score("fuzzy", fuzzy, threshold=0.6)]
    if judge is not None:
        scores.append(Score("judge", judge))
    return ReviewPair("test_x.py", key, model, [{"role": "user", "text": key}], "ref", f"{key}!",
                      tests=[f"test_x.py::test_{key}"], scores=scores)  # fmt: skip


@contextlib.contextmanager
def fakes() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    """The GPT-4 reference and both candidates, on loopback."""
    ref = FakeOpenAI(lambda req: REFERENCE[req["messages"][-1]["content"]])
    cand = FakeOpenAI(lambda req: CANDIDATE[req["model"]](req["messages"][-1]["content"]))
    with ref, cand:
        yield ref, cand


def run_suite(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A real run of the product suite against the fakes (written into pyproject.toml)."""
    with fakes() as (ref, cand):
        text = PYPROJECT.format(reference=ref.base_url, candidate=cand.base_url)
        pytester.makefile(".toml", pyproject=text)
        return pytester.runpytest("-p", "no:cacheprovider", *args)


def make_project(pytester: pytest.Pytester) -> Path:
    """A product suite whose first real run records the goldens and writes the JSON report."""
    pytester.makepyfile(product=PRODUCT, test_product=TESTS)
    result = run_suite(pytester, "--slm-record=new")
    assert (pytester.path / "slam-report.json").is_file(), result.stdout.str()
    return pytester.path


def slam(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "pytest_slam.cli", *args]
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=patient(timeout), check=False
    )


@contextlib.contextmanager
def review_server(cwd: Path, *args: str, browser: Path | None = None) -> Iterator[str]:
    """`slam review --no-browser` as the user runs it; yields the URL it prints. With ``browser``
    (an executable), `slam review` opens its page with it, as it would with $BROWSER."""
    flags = ["--no-browser"] if browser is None else []
    env = {**os.environ, "BROWSER": str(browser)} if browser is not None else None
    cmd = [sys.executable, "-m", "pytest_slam.cli", "review", *flags, *args]
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        assert "http://127.0.0.1:" in line, line + proc.stderr.read()  # type: ignore[union-attr]
        yield line.split(" open ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=patient(30))


def http(
    url: str, body: Any = None, host: str | None = None, headers: dict[str, str] | None = None
) -> tuple[int, str]:
    """GET (or POST JSON) on loopback; the status and the text, errors included. ``headers``
    replace the ones set here (``Content-Type``) or add to them (``Origin``)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if data:
        req.add_header("Content-Type", "application/json")
    if host:
        req.add_header("Host", host)
    for name, value in (headers or {}).items():
        req.add_header(name, value)
    try:
        with urllib.request.urlopen(req, timeout=patient(30)) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def processes_holding(text: str) -> list[tuple[int, str]]:
    """Every live process (of any user) whose argv holds ``text``: what ``ps`` shows them all."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not a process
            continue
        if text.encode() in argv:
            found.append((int(proc.name), argv.replace(b"\0", b" ").decode(errors="replace")))
    return found


class Browser:
    """Headless Chromium driven through the DevTools Protocol on a pipe (fds 3 and 4): no
    websocket library, no port to open, nothing but the page's own requests on the network."""

    def __init__(self, profile: Path) -> None:
        assert CHROMIUM is not None
        to_chrome, self._in = os.pipe()
        self._out, from_chrome = os.pipe()

        def fds() -> None:  # in the child: the pipe ends at the fds Chromium reads and writes
            a, b = os.dup(to_chrome), os.dup(from_chrome)
            os.dup2(a, 3)
            os.dup2(b, 4)

        flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--remote-debugging-pipe", f"--user-data-dir={profile}",
                 "--window-size=1280,900", "about:blank"]  # fmt: skip
        self.proc = subprocess.Popen([CHROMIUM, *flags], preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        os.close(to_chrome)
        os.close(from_chrome)
        self._buf, self._id, self.events = b"", 0, []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        attached = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        self.session = attached["sessionId"]
        for domain in ("Page", "Runtime", "Network"):
            self.send(f"{domain}.enable", page=True)

    def send(self, method: str, params: dict[str, Any] | None = None, page: bool = False) -> Any:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if page:
            msg["sessionId"] = self.session
        os.write(self._in, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read()
            if reply.get("id") == self._id:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply.get("result", {})
            self.events.append(reply)

    def _read(self, timeout: float = 60) -> dict[str, Any]:
        while b"\0" not in self._buf:
            ready, _, _ = select.select([self._out], [], [], timeout)
            assert ready, f"Chromium said nothing for {timeout:.0f} s"
            chunk = os.read(self._out, 1 << 20)
            assert chunk, "Chromium closed the DevTools pipe"
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def js(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True},
                           page=True)  # fmt: skip
        return result["result"].get("value")

    def open(self, url: str) -> None:
        self.send("Page.navigate", {"url": url}, page=True)
        wait_for(lambda: self.js("document.body && document.body.dataset.ready") == "1", 60, "page")

    def key(self, key: str, code: str, vk: int, text: str = "") -> None:
        event = {"key": key, "code": code, "windowsVirtualKeyCode": vk}
        self.send("Input.dispatchKeyEvent", {"type": "keyDown", **event, "text": text}, page=True)
        self.send("Input.dispatchKeyEvent", {"type": "keyUp", **event}, page=True)

    def screenshot(self, height: int = 900) -> bytes:
        import base64

        clip = {"x": 0, "y": 0, "width": 1280, "height": height, "scale": 1}
        shot = self.send("Page.captureScreenshot", {"format": "png", "clip": clip}, page=True)
        return base64.b64decode(shot["data"])

    def requested_urls(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events
                if e.get("method") == "Network.requestWillBeSent"]  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self._in, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        try:
            self.proc.wait(timeout=patient(20))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=patient(20))
        os.close(self._in)
        os.close(self._out)
