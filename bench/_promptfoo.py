"""promptfoo on the benches' suite: the same messages and check, loopback only, nothing kept.

Installed outside the repository (``npm install --prefix /work/.promptfoo promptfoo``). Telemetry,
update checks, sharing and remote generation are off, its cache is off and nothing is written to
its folder (the caller gives a temp ``PROMPTFOO_CONFIG_DIR``), so every run asks the server.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from _common import clean_env
from _suite import PRODUCT

PROMPTFOO = "/work/.promptfoo/node_modules/.bin/promptfoo"
DEFAULT_JOBS = 4  # promptfoo eval's --max-concurrency default
PROMPTFOO_ENV = {
    "PROMPTFOO_DISABLE_TELEMETRY": "1",
    "PROMPTFOO_DISABLE_UPDATE": "1",
    "PROMPTFOO_DISABLE_SHARING": "1",
    "PROMPTFOO_DISABLE_REMOTE_GENERATION": "1",
    "PROMPTFOO_DISABLE_REDTEAM_REMOTE_GENERATION": "1",
    "PROMPTFOO_CACHE_ENABLED": "false",
}


def system_and_ticket() -> tuple[str, str]:
    """The product's system prompt and ticket text, read from the product so they never drift."""
    system = PRODUCT.split('SYSTEM = "', 1)[1].split('"', 1)[0]
    ticket = PRODUCT.split('f"', 1)[1].split('"', 1)[0]
    return system, ticket


def promptfoo_config(root: Path, url: str, cases: int) -> Path:
    """The suite's cases as a promptfoo eval: the same messages, the same check."""
    system, ticket = system_and_ticket()
    prompt = json.dumps([{"role": "system", "content": system},
                         {"role": "user", "content": "{{ticket}}"}])  # fmt: skip
    lines = [
        "prompts:", f"  - {json.dumps(prompt)}",
        "providers:", "  - id: openai:chat:gpt-4", "    config:", f"      apiBaseUrl: {url}",
        "      apiKey: sk-bench", "      temperature: 0", "      max_tokens: 64",
        "defaultTest:", "  assert:", "    - type: contains", "      value: billing",
        "tests:",
    ]  # fmt: skip
    for i in range(cases):
        lines.append(f"  - vars: {{ticket: {json.dumps(ticket.replace('{i}', str(i)))}}}")
    path = root / f"promptfooconfig-{cases}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def promptfoo_env(home: Path) -> dict[str, str]:
    """The bench's environment for promptfoo: telemetry and cache off, ``home`` as its folder."""
    return clean_env(PROMPTFOO_CONFIG_DIR=str(home), **PROMPTFOO_ENV)


def promptfoo_cmd(executable: str, config: Path, jobs: int | None = None) -> list[str]:
    """``promptfoo eval`` of ``config`` with no cache and nothing written; ``jobs``: ``-j``."""
    cmd = [executable, "eval", "--no-cache", "--no-write", "--no-table", "--no-progress-bar"]
    return [*cmd, "-c", str(config), *([] if jobs is None else ["-j", str(jobs)])]


def promptfoo_version(executable: str, home: Path) -> str:
    out = subprocess.run([executable, "--version"], capture_output=True, text=True,
                         env=promptfoo_env(home), timeout=120)  # fmt: skip
    return out.stdout.strip() or "unknown"
