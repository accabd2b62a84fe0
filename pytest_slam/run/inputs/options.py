"""The ``--slm-*`` options: names, parsers and help, shared by the pytest plugin and the ``slam`` CLI.

Values are parsed at the door (a bad one is a usage error naming the flag) and kept plain, because
xdist ships option values to its workers.
Help text rule (as in pytest-xdist): capital first letter; a period only between several sentences.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_slam.settings import MAX_CONCURRENCY, RECORD_MODES, Settings

if TYPE_CHECKING:
    import pytest

MODELS = "--slm-models"
RECORD = "--slm-record"
REFRESH = "--slm-refresh-golden"
WITH_CANDIDATES = "--slm-with-candidates"
PRUNE = "--slm-prune"
REFERENCE = "--slm-reference"
GOLDEN_DIR = "--slm-golden-dir"
SAMPLES = "--slm-samples"
REPEAT = "--slm-repeat"
REPORT = "--slm-report"
HTML = "--slm-html"
BASELINE = "--slm-baseline"
BASELINE_FAIL = "--slm-baseline-fail"
BLOCK_NETWORK = "--slm-block-network"
ALLOWED_HOSTS = "--slm-allowed-hosts"
ALLOWED_HOSTS_INI = "slm_allowed_hosts"
HEARTBEAT = "--slm-heartbeat"
MAX_TOKENS_CAP = "--slm-max-tokens-cap"
CONCURRENCY = "--slm-concurrency"
CACHE = "--slm-cache"
EXIT_GATE_FAILED = 6


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of at least 1")
    return value


def concurrency(text: str) -> int:
    """Calls in flight on one server: a whole number from 1 to ``MAX_CONCURRENCY``."""
    value = positive_int(text)
    if value > MAX_CONCURRENCY:
        raise argparse.ArgumentTypeError(
            f"{text!r} is more than {MAX_CONCURRENCY} calls in flight at once; give at most "
            f"{MAX_CONCURRENCY}, or leave it out and the limit is found from the server's "
            "throughput"
        )
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


# Record modes in neighbouring tools' words (pytest-recording, VCR.py) -> pytest-slam's
RECORD_ALIASES = {"once": "new", "new_episodes": "new", "rewrite": "all"}


def record_mode(text: str) -> str:
    """One of ``RECORD_MODES``, or a neighbour's word for one (kept as given: the run says which
    mode it read it as, ``record_note``)."""
    if text in RECORD_MODES or text in RECORD_ALIASES:
        return text
    raise argparse.ArgumentTypeError(
        f"{text!r} is not a record mode: none (replay only), new (record what is missing) or all "
        "(re-record everything)"
    )


def record_note(option: argparse.Namespace) -> str | None:
    """One line saying how a neighbour's record mode was read, or None."""
    given = getattr(option, "slm_record", None)
    if given not in RECORD_ALIASES:
        return None
    return (
        f"pytest-slam: {RECORD}={given} (pytest-recording's word) read as "
        f"{RECORD}={RECORD_ALIASES[given]}; write that to say it in pytest-slam's words"
    )


# --slm-baseline-fail METRIC:LIMIT -> the [tool.slam.baseline] key a percentage or an absolute
# limit sets (None: that form does not apply to the metric)
BASELINE_METRICS: dict[str, tuple[str | None, str | None]] = {
    "equivalence": (None, "equivalence_drop"),
    "p95_e2e_ms": ("latency_increase_pct", "latency_increase_ms"),
    "cost": ("cost_increase_pct", None),
}
BASELINE_FAIL_SYNTAX = (
    "write METRIC:LIMIT[,...]: equivalence:0.05 (a drop in mean equivalence), p95_e2e_ms:20% "
    "and/or p95_e2e_ms:50 (ms), cost:10%, or a [tool.slam.baseline] key:value"
)


def baseline_tolerances(text: str) -> dict[str, float]:
    """``--slm-baseline-fail`` as ``[tool.slam.baseline]`` keys; ``ArgumentTypeError`` names the
    part that is wrong and the syntax (pytest-benchmark's ``--benchmark-compare-fail`` shape)."""
    from pytest_slam.report.baseline import Tolerances

    keys = set(Tolerances.__dataclass_fields__)
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        metric, _, limit = part.partition(":")
        percent = limit.endswith("%")
        number = limit[:-1] if percent else limit
        try:
            value = float(number)
        except ValueError:
            value = -1.0
        if metric in keys and not percent:
            key: str | None = metric
        elif metric in BASELINE_METRICS:
            key = BASELINE_METRICS[metric][0 if percent else 1]
        else:
            key = None
        if key is None or not value >= 0 or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{part!r}: {BASELINE_FAIL_SYNTAX}")
        out[key] = value
    return out


def baseline_fail(text: str) -> str:
    """Checked at the door, kept as given (plain for xdist)."""
    baseline_tolerances(text)
    return text


def host_patterns(text: str) -> tuple[str, ...]:
    """Comma- or space-separated hosts: names, addresses or regular expressions matched against
    the whole host (as pytest-recording's ``--allowed-hosts``); a broken expression is refused."""
    patterns = tuple(p for p in re.split(r"[,\s]+", text.strip()) if p)
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise argparse.ArgumentTypeError(
                f"{pattern!r} is not a host or a regular expression ({exc}); list hosts as "
                "api.example.com,10.0.0.5,.*\\.internal"
            ) from None
    return patterns


def allowed_hosts_list(text: str) -> str:
    host_patterns(text)
    return text


def allowed_hosts(config: pytest.Config) -> tuple[str, ...]:
    """``--slm-allowed-hosts``, else the ini's ``slm_allowed_hosts``; a bad ini value is a
    ``SettingsError`` (the plugin's usage error), said before any test runs."""
    from pytest_slam.settings import SettingsError

    given = getattr(config.option, "slm_allowed_hosts", None)
    if given is not None:
        return host_patterns(given)
    try:
        return host_patterns(str(config.getini(ALLOWED_HOSTS_INI) or ""))
    except argparse.ArgumentTypeError as exc:
        raise SettingsError(f"ini option {ALLOWED_HOSTS_INI}: {exc}") from None


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
        type=record_mode,
        metavar="{" + ",".join(RECORD_MODES) + "}",
        help="Golden answers: none replays only (default, for CI); new records what is missing; "
        "all re-records everything from the real reference (pytest-recording's once and "
        "new_episodes read as new, rewrite as all)",
    )
    add(
        WITH_CANDIDATES,
        dest="slm_with_candidates",
        action="store_true",
        default=False,
        help=f"With {RECORD}: run the candidates too (default: a recording run asks only the "
        f"reference, unless {MODELS} names candidates)",
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
        help="Write the JSON report (schema pytest-slam/report/3)",
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
        BASELINE_FAIL,
        dest="slm_baseline_fail",
        default=None,
        type=baseline_fail,
        metavar="METRIC:LIMIT,...",
        help="How far a metric may move from the baseline, over [tool.slam.baseline]: "
        "equivalence:0.05, p95_e2e_ms:20%% and p95_e2e_ms:50 (ms), cost:10%%; a percentage "
        "alone for p95_e2e_ms has no ms floor",
    )
    add(
        BLOCK_NETWORK,
        dest="slm_block_network",
        action="store_true",
        default=False,
        help="Make any connection off this machine during an opted-in test fail, naming the host",
    )
    add(
        ALLOWED_HOSTS,
        dest="slm_allowed_hosts",
        default=None,
        type=allowed_hosts_list,
        metavar="HOST,...",
        help="Hosts opted-in tests may still reach, neither blocked nor counted: names, addresses "
        f"or regular expressions (as pytest-recording's --allowed-hosts; or ini {ALLOWED_HOSTS_INI})",
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
    add(
        CONCURRENCY,
        dest="slm_concurrency",
        default=None,
        type=concurrency,
        metavar="N",
        help="Calls in flight at once on each candidate's server, the test's own call and "
        "answers fetched ahead included; 1: one call at a time, nothing fetched ahead; at most "
        f"{MAX_CONCURRENCY} (default: [tool.slam] concurrency, a model's own, else an "
        "endpoint's found from its throughput, starting at 16; 8 for the embedded engine)",
    )
    add(
        CACHE,
        dest="slm_cache",
        action="store_true",
        default=None,
        help="Reuse a candidate's answer kept from an earlier run for the same model and request "
        "(or [tool.slam] cache = true; `slam cache clear` empties it)",
    )


def overrides(option: argparse.Namespace, table: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Settings given on the command line, as [tool.slam] keys (validated with the table).

    ``--slm-baseline-fail`` sets single tolerances over the ``table``'s ``[tool.slam.baseline]``.
    """
    out: dict[str, Any] = {}
    if getattr(option, "slm_models", None):
        out["candidates"] = [m.strip() for m in option.slm_models.split(",")]
    if getattr(option, "slm_refresh", False):
        out["record"] = "all"
    elif getattr(option, "slm_record", None):
        out["record"] = RECORD_ALIASES.get(option.slm_record, option.slm_record)
    if getattr(option, "slm_baseline_fail", None):
        base = (table or {}).get("baseline")
        if base is None or isinstance(base, Mapping):  # else the table's own error is said
            given = baseline_tolerances(option.slm_baseline_fail)
            if "latency_increase_pct" in given and "latency_increase_ms" not in {
                *given,
                *(base or {}),
            }:  # p95_e2e_ms:1% means 1%: no 50 ms default floor the user never set
                given["latency_increase_ms"] = 0.0
            out["baseline"] = {**(base or {}), **given}
    for dest, key in (
        ("slm_reference", "reference"),
        ("slm_golden_dir", "golden_dir"),
        ("slm_samples", "samples"),
        ("slm_repeat", "repeat"),
        ("slm_report", "report"),
        ("slm_html", "html"),
        ("slm_max_tokens_cap", "max_tokens_cap"),
        ("slm_cache", "cache"),
    ):
        value = getattr(option, dest, None)
        if value is not None:
            out[key] = value
    return out


WITH_CANDIDATES_ENV = "SLAM_WITH_CANDIDATES"  # 1: as --slm-with-candidates, for every run


def reference_only(option: argparse.Namespace, settings: Settings) -> bool:
    """Whether this run records the reference's answers and asks no candidate: a recording run
    (``--slm-record``, a refresh) that has a reference and was not asked for candidates, by
    ``--slm-models``, ``--slm-with-candidates`` or ``$SLAM_WITH_CANDIDATES=1``. Recording is for
    goldens: running every candidate too cost a user 544 s of SmolLM2 (issue 52)."""
    if settings.record == "none" or not settings.has_reference:
        return False
    if getattr(option, "slm_models", None) or getattr(option, "slm_with_candidates", False):
        return False
    return os.environ.get(WITH_CANDIDATES_ENV, "").strip() not in ("1", "true", "yes")


def reference_only_line(reference: str, candidates: list[str]) -> str:
    """What a reference-only recording run says once, with how to run the candidates."""
    names = ", ".join(candidates) or "the default"
    return (
        f"pytest-slam: recorded the reference ({reference}) only; the candidates ({names}) were "
        f"not run: `pytest` replays them against these goldens, or add {WITH_CANDIDATES} to "
        "record and run them in one go"
    )


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
