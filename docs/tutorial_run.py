"""Tutorial 2's steps, run for real: ``python docs/tutorial_run.py`` rewrites the output blocks of
docs/tutorial/your-product.md from a fresh run.

The steps run in a scratch copy of the tutorial's product (``PRODUCT``, ``TESTS``, the page's
``PYPROJECT``) as a user types them (``slam config check``, ``pytest --slm-record=new``,
``pytest``), each a real process. pytest-slam's loopback fakes (``pytest_slam.testing``) stand
in for the two hosted models, so it needs no key and no network: GPT-4 (the reference's line
names the fake's endpoint instead of ``openai:gpt-4``) and the candidate ``gpt-4o-mini``.
``tests/test_docs_tutorial.py`` runs the same steps, checks that they end at ``gate: PASS``
with exit 0, and fails while a block on the page differs from what a run prints now (timings,
ports and folders aside: ``normalized``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorial" / "your-product.md"
COMMAND = "python docs/tutorial_run.py"

PRODUCT = '''\
"""The product: support tickets triaged by a hosted model through the OpenAI SDK."""

from openai import OpenAI

client = OpenAI()


def triage(ticket: str) -> str:
    reply = client.chat.completions.create(
        model="gpt-4",
        messages=[
            {"role": "system", "content": "Answer with the ticket's priority: high or low."},
            {"role": "user", "content": ticket},
        ],
        temperature=0,
    )
    return reply.choices[0].message.content
'''

TESTS = """\
import pytest

import triage

pytestmark = pytest.mark.slm  # these tests run once per model


@pytest.mark.parametrize("ticket", ["I was charged twice", "How do I change my avatar?"])
def test_triage_names_a_priority(ticket):
    assert "priority" in triage.triage(ticket).lower()
"""

# The page's pyproject.toml, as the tutorial shows it (REFERENCE is the line the run changes).
REFERENCE = 'reference = "openai:gpt-4"'
PYPROJECT = f"""\
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["gpt-4o-mini"]
{REFERENCE}
equivalence = {{ by = "fuzzy", at_least = 0.6 }}

[tool.slam.models.gpt-4o-mini]
provider = "openai"
model = "gpt-4o-mini"

[tool.slam.gate]
min_pass_rate = 0.95
min_mean_equivalence = 0.8
max_p95_e2e_ms = 2000
max_cost_ratio = 0.2
"""

# What each fake answers: GPT-4's words, and the candidate's own, close to them.
ANSWERS = {
    "I was charged twice": ("Priority: high. A double charge is billing.",
                            "Priority: high - a double charge is billing."),
    "How do I change my avatar?": ("Priority: low. This is a profile question.",
                                   "Priority: low: this is a profile question."),
}  # fmt: skip


@dataclass
class Step:
    """One command of the tutorial: its block's name on the page, its words and what it printed."""

    name: str
    argv: list[str]
    output: str = ""
    status: int = 0

    @property
    def shown(self) -> str:
        """The block as the page shows it: the prompt, what it printed (pytest's header lines
        about this machine aside: yours names your own), its exit status."""
        printed = [ln for ln in self.output.rstrip().splitlines() if not MACHINE.match(ln)]
        return f"$ {' '.join(self.argv)}\n" + "\n".join(printed) + f"\n$ echo $?\n{self.status}\n"


MACHINE = re.compile(r"(platform|rootdir|plugins|cachedir): ")


def steps() -> list[Step]:
    return [
        Step("check", ["slam", "config", "check"]),
        Step("record", ["pytest", "--slm-record=new"]),
        Step("replay", ["pytest"]),
    ]


@contextmanager
def fakes() -> Iterator[tuple[str, str]]:
    """The reference's and the candidate's base URLs, each a FakeOpenAI on loopback."""
    from pytest_slam.testing import FakeOpenAI

    def said(which: int):  # type: ignore[no-untyped-def]
        return lambda request: ANSWERS[request["messages"][-1]["content"]][which]

    with FakeOpenAI(said(0)) as gpt4, FakeOpenAI(said(1), model="gpt-4o-mini-2024-07-18") as mini:
        yield gpt4.base_url, mini.base_url


def run(folder: Path) -> list[Step]:
    """Tutorial 2's steps in ``folder`` (made empty), each as a real process."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "triage.py").write_text(PRODUCT)
    (folder / "tests").mkdir(exist_ok=True)
    (folder / "tests" / "test_triage.py").write_text(TESTS)
    done = steps()
    with fakes() as (gpt4, mini):
        reference = f'reference = "{gpt4}#gpt-4"'
        table = PYPROJECT.replace(REFERENCE, reference)
        table = table.replace('provider = "openai"\n', f'base_url = "{mini}"\n')
        (folder / "pyproject.toml").write_text(table)
        env = {**os.environ, "OPENAI_API_KEY": "sk-tutorial", "COLUMNS": "100", "CI": ""}
        for k in ("OPENAI_BASE_URL", "SLAM_WITH_CANDIDATES", "PYTEST_ADDOPTS"):
            env.pop(k, None)
        for step in done:
            argv = _argv(step.argv)
            ran = subprocess.run(
                argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300
            )
            step.output, step.status = ran.stdout + ran.stderr, ran.returncode
    return done


def _argv(words: list[str]) -> list[str]:
    """A command as this interpreter runs it (a venv's python called by its path has neither
    ``slam`` nor ``pytest`` on PATH); ``-p no:cacheprovider`` keeps the scratch folder clean."""
    if words[0] == "slam":
        return [sys.executable, "-m", "pytest_slam.cli", *words[1:]]
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *words[1:]]


NOISE = [
    (re.compile(r"\d+(\.\d+)? ?(ms|s)\b"), "T"),  # timings
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:PORT"),
    (re.compile(r"\$[\d.]+"), "$N"),  # a price drawn from the installed genai-prices snapshot
    (re.compile(r"genai-prices \d[\w.]*"), "genai-prices V"),
    (re.compile(r"[ \t]+"), " "),
    (re.compile(r"^[=\-_ ]+$", re.M), ""),  # rules drawn to the terminal's width
]


def normalized(text: str) -> str:
    """``text`` without what changes from run to run: timings, ports, paths, the header."""
    for pattern, replacement in NOISE:
        text = pattern.sub(replacement, text)
    return "\n".join(line.strip() for line in text.splitlines() if line.strip())


BLOCK = re.compile(r"^( *)<!-- output:(\w+) -->\n\1```(\w*)\n(.*?)^\1```\n", re.S | re.M)
FILES = {"product": PRODUCT, "tests": TESTS, "pyproject": PYPROJECT}  # shown as they are


def blocks(page: str) -> dict[str, str]:
    """The page's output blocks, by name, unindented."""
    return {m.group(2): _unindent(m.group(4), m.group(1)) for m in BLOCK.finditer(page)}


def _unindent(text: str, indent: str) -> str:
    return "".join(line.removeprefix(indent) for line in text.splitlines(keepends=True))


def rewritten(page: str, done: list[Step]) -> str:
    """``page`` with each block replaced: a file as the run wrote it, a step by what it printed."""
    shown = {**FILES, **{step.name: step.shown for step in done}}

    def block(m: re.Match[str]) -> str:
        indent, name, lang = m.group(1), m.group(2), m.group(3)
        text = shown.get(name, _unindent(m.group(4), indent))
        body = "".join(indent + line if line.strip() else line for line in text.splitlines(True))
        return f"{indent}<!-- output:{name} -->\n{indent}```{lang}\n{body}{indent}```\n"

    return BLOCK.sub(block, page)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="slam-tutorial-") as scratch:
        done = run(Path(scratch) / "product")
    page = PAGE.read_text()
    PAGE.write_text(rewritten(page, done))
    print(
        f"wrote {PAGE.relative_to(ROOT)}: " + ", ".join(f"{s.name} exit {s.status}" for s in done)
    )
    return 0 if done[-1].status == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
