"""Helpers shared by pytest-slam's own plugin tests (imported as a plain module: tests/ is on the path)."""

from __future__ import annotations

import time
from collections.abc import Callable

# Product code as teams write it: a client built at import time, asking for a hosted model by name.
PRODUCT = """
from openai import OpenAI

client = OpenAI()  # built at import time, as product code does

def ask(question):
    r = client.chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    return r.choices[0].message.content
"""


def wait_for(condition: Callable[[], object], seconds: float, what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` (a bound on waiting, not a timing check)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.1)
    raise AssertionError(f"gave up waiting {seconds:.0f} s for {what}")
