"""The ``--slm-*`` options: names, parsers and help, shared by the pytest plugin and the ``slam`` CLI.

Values are parsed at the door (a bad one is a usage error naming the flag) and kept plain, because
xdist ships option values to its workers.
Help text rule (as in pytest-xdist): capital first letter; a period only between several sentences.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_slam.settings import RECORD_MODES

MODELS = "--slm-models"
RECORD = "--slm-record"
REFRESH = "--slm-refresh-golden"
PRUNE = "--slm-prune"
REFERENCE = "--slm-reference"
GOLDEN_DIR = "--slm-golden-dir"
SAMPLES = "--slm-samples"
REPEAT = "--slm-repeat"
REPORT = "--slm-report"
HTML = "--slm-html"
BASELINE = "--slm-baseline"
BLOCK_NETWORK = "--slm-block-network"
HEARTBEAT = "--slm-heartbeat"
MAX_TOKENS_CAP = "--slm-max-tokens-cap"
EXIT_GATE_FAILED = 6


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def seconds(text: str) -> float:
    """A number of seconds, at least 0."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:  # also NaN
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (at least 0)")
    return value


def models_list(text: str) -> str:
    """Checked for shape here; names are resolved against the project's models in pytest_configure."""
    from pytest_slam.swap.models import ModelSpecError, parse_models_option

    try:
        parse_models_option(text)
    except ModelSpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    return text


def add_options(add: Callable[..., object]) -> None:
    """Register every option through ``add`` (a pytest OptionGroup's addoption, or argparse's)."""
    add(
        MODELS,
        dest="slm_models",
        default=None,
        type=models_list,
        metavar="A,B,...",
        help="Run opted-in tests once per model: names from [tool.slam.models], smollm2-135m, "
        "or inline specs (llamacpp:PATH.gguf, vllm:HF_ID, ollama:NAME, openai:MODEL, "
        "http://HOST:PORT/v1#MODEL)",
    )
    add(
        RECORD,
        dest="slm_record",
        default=None,
        choices=RECORD_MODES,
        help="Golden answers: none replays only (default, for CI); new records what is missing; "
        "all re-records everything from the real reference",
    )
    add(
        REFRESH,
        dest="slm_refresh",
        action="store_true",
        default=False,
        help=f"Short for {RECORD}=all",
    )
    add(
        PRUNE,
        dest="slm_prune",
        action="store_true",
        default=False,
        help="Remove golden entries that no test asked for in this run",
    )
    add(
        REFERENCE,
        dest="slm_reference",
        default=None,
        metavar="SPEC",
        help="Reference model spec (default from [tool.slam] reference, else openai:gpt-4)",
    )
    add(
        GOLDEN_DIR,
        dest="slm_golden_dir",
        default=None,
        metavar="DIR",
        help="Folder of golden files (default __slam__; fixtures/slam while it exists)",
    )
    add(
        SAMPLES,
        dest="slm_samples",
        default=None,
        type=positive_int,
        metavar="N",
        help="Reference answers to record per request, to show how much it agrees with itself",
    )
    add(
        REPEAT,
        dest="slm_repeat",
        default=None,
        type=positive_int,
        metavar="N",
        help="Run each opted-in test N times per model; it passes when the pass rate reaches "
        "[tool.slam] pass_fraction",
    )
    add(
        REPORT,
        dest="slm_report",
        default=None,
        metavar="PATH.json",
        help="Write the JSON report (schema pytest-slam/report/1)",
    )
    add(
        HTML,
        dest="slm_html",
        default=None,
        metavar="PATH.html",
        help="Write the self-contained HTML report",
    )
    add(
        BASELINE,
        dest="slm_baseline",
        default=None,
        metavar="PATH.json|auto",
        help="Compare with an earlier JSON report; regressions fail the gate. auto: save each "
        "run's report in .slam/runs and compare with the last one saved",
    )
    add(
        BLOCK_NETWORK,
        dest="slm_block_network",
        action="store_true",
        default=False,
        help="Make any connection off this machine during an opted-in test fail, naming the host",
    )
    add(
        HEARTBEAT,
        dest="slm_heartbeat",
        default=None,
        type=seconds,
        metavar="SECONDS",
        help="Name each model call still running after SECONDS, again every SECONDS (default "
        "10, or ini slm_heartbeat; 0: off)",
    )
    add(
        MAX_TOKENS_CAP,
        dest="slm_max_tokens_cap",
        default=None,
        type=positive_int,
        metavar="N",
        help="Most output tokens a candidate call without its own max_tokens gets, for every "
        "model (default: each model's max_tokens_cap, 1024)",
    )


def overrides(option: argparse.Namespace) -> dict[str, Any]:
    """Settings given on the command line, as [tool.slam] keys (validated with the table)."""
    out: dict[str, Any] = {}
    if getattr(option, "slm_models", None):
        out["candidates"] = [m.strip() for m in option.slm_models.split(",")]
    if getattr(option, "slm_refresh", False):
        out["record"] = "all"
    elif getattr(option, "slm_record", None):
        out["record"] = option.slm_record
    for dest, key in (
        ("slm_reference", "reference"),
        ("slm_golden_dir", "golden_dir"),
        ("slm_samples", "samples"),
        ("slm_repeat", "repeat"),
        ("slm_report", "report"),
        ("slm_html", "html"),
        ("slm_max_tokens_cap", "max_tokens_cap"),
    ):
        value = getattr(option, dest, None)
        if value is not None:
            out[key] = value
    return out


def check_writable(path: str | None, flag: str) -> str | None:
    """A report path that cannot be written is said at the start, not after an hour of calls.

    Probed by creating the folder and a temporary file in it: permission bits alone lie to root.
    """
    if not path:
        return None
    import tempfile

    target = Path(path)
    if target.is_dir():
        return f"{flag}={path} is a directory; give a file path."
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".slam-probe-"):
            pass
    except OSError as exc:
        return f"{flag}={path}: cannot write there ({exc.strerror}); choose a writable path."
    return None
