"""The product and test suite that the overhead and scaling benches run, written to a temp folder.

The product builds its OpenAI client at import time and never mentions pytest-slam, as a team's code
would; the tests opt in through ``[tool.slam] paths``, so the same files run with the plugin, or
without it (``-p no:slam``) straight against the server. ``BENCH_CASES`` sets how many cases exist.
"""

from __future__ import annotations

from pathlib import Path

CANDIDATE_ANSWER = "Category: billing. Priority: high. The customer was charged twice; refund them."
REFERENCE_ANSWER = (
    "Category: billing. Priority: high. Customer was double charged and wants a refund."
)

SYSTEM = 'SYSTEM = "You triage support tickets. Answer with the category, the priority and the next step."'
# The product's one request, as its source says it (indented for the body of a call).
REQUEST = """
        model="gpt-4",
        messages=[{"role": "system", "content": SYSTEM},
                  {"role": "user", "content": f"Ticket {i}: I was charged twice for my plan."}],
        temperature=0,
        max_tokens=64,
"""
PRODUCT = f"""
from openai import OpenAI

client = OpenAI()  # built at import time, before any test runs
{SYSTEM}


def triage(i):
    r = client.chat.completions.create({REQUEST}    )
    return r.choices[0].message.content
"""
# The same product on AsyncOpenAI (bench_async.py): one asyncio.run per call, as tests of async code
# do, the client opened inside the coroutine.
ASYNC_PRODUCT = f"""
import asyncio

from openai import AsyncOpenAI

{SYSTEM}


async def _triage(i):
    async with AsyncOpenAI() as client:
        r = await client.chat.completions.create({REQUEST}    )
    return r.choices[0].message.content


def triage(i):
    return asyncio.run(_triage(i))
"""

TESTS = """
import os

import pytest

import product

CASES = int(os.environ.get("BENCH_CASES", "200"))

if CASES:

    @pytest.mark.parametrize("i", range(CASES))
    def test_triage(i):
        assert "billing" in product.triage(i)
"""

LOOP = """
import os, sys, time
sys.path.insert(0, os.getcwd())
import product

n = int(os.environ["BENCH_CASES"])
start, cpu = time.perf_counter(), time.process_time()
for i in range(n):
    assert "billing" in product.triage(i)
print(time.perf_counter() - start, time.process_time() - cpu)
"""

CONFTEST = '''
"""A stopwatch: from the end of collection to the last unconfigure hook, written to $BENCH_CLOCK.

It leaves out interpreter start-up and imports, whose noise on a shared machine would swamp a
per-case figure; what grows with the cases (tests, the plugin's checks, its reports) is inside.
"""
import json
import os
import time

import pytest

_START = {}


def pytest_collection_finish(session):
    _START["at"] = (time.perf_counter(), time.process_time())


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    path = os.environ.get("BENCH_CLOCK")
    if path and "at" in _START:
        wall, cpu = _START["at"]
        spent = {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}
        with open(path, "w") as fh:
            json.dump(spent, fh)
'''

PYPROJECT = """
[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]

[tool.slam]
models = ["{candidate}#small-model"]
reference = "{reference}#gpt-4"
paths = ["tests"]
equivalence = {{ by = "fuzzy" }}
"""


def write_suite(root: Path, candidate_url: str, reference_url: str) -> Path:
    """Write the product, its tests and a pyproject whose [tool.slam] points at the two servers."""
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "product.py").write_text(PRODUCT)
    (root / "loop.py").write_text(LOOP)
    (root / "tests" / "test_triage.py").write_text(TESTS)
    (root / "conftest.py").write_text(CONFTEST)
    text = PYPROJECT.format(candidate=candidate_url, reference=reference_url)
    (root / "pyproject.toml").write_text(text)
    return root
