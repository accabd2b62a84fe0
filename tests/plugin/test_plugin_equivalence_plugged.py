"""A scorer from another distribution, used by name from ``[tool.slam]`` in real pytest sessions.

``acme-scorers`` (written by ``ext_dist.make_dist``: a package and its ``*.dist-info``) declares
``overlap`` under the entry point group ``pytest_slam.scorers``; nothing in pytest_slam names it.
The reference and the candidate are FakeOpenAI servers on loopback, so the scores are known: word
overlap (Jaccard) of "same" is 1.0, of "near" 0.5 and of "far" 0.0 against the reference.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ext_dist import make_dist
from patience import patient
from report_helpers import read_report
from slam_helpers import said

from pytest_slam.testing import FakeOpenAI

REFERENCE = "The capital of France is Paris."
CANDIDATE = {
    "same": REFERENCE,
    "near": "Paris is the French capital city.",  # 4 shared words of 8: 0.5
    "far": "zzzz qqqq",
}
ACME = """
import re

class Overlap:
    def score(self, candidate, reference):
        a = set(re.findall(r"\\w+", candidate.lower()))
        b = set(re.findall(r"\\w+", reference.lower()))
        return len(a & b) / len(a | b) if a | b else 1.0

class Twice(Overlap):
    def score(self, candidate, reference):
        return 2 * super().score(candidate, reference)
"""
STRICT = """
class Strict:
    evidence = "structure"  # its value alone is a verdict, as json's is
    verdict_at = 1.0

    def score(self, candidate, reference):
        return float(candidate.split() == reference.split())
"""
TESTS = """
import pytest

@pytest.mark.slm
@pytest.mark.parametrize("kind", ["same", "near", "far"])
def test_capital(slm_model, kind):
    slm_model.chat(f"Capital of France? ({kind})", max_tokens=20)
"""


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    def candidate(request: dict[str, Any]) -> str:
        return CANDIDATE[str(request["messages"][-1]["content"]).rsplit("(", 1)[1].rstrip(")")]

    with (
        FakeOpenAI(REFERENCE, model="gpt-4-0613") as reference,
        FakeOpenAI(candidate, model="cand") as cand,
    ):
        yield reference, cand


def _acme(pytester: pytest.Pytester) -> Path:
    """acme-scorers, installed in a folder of the test's own: ``overlap`` and ``twice``."""
    return make_dist(
        pytester.path / "site", "acme-scorers",
        {"acme_scorers/__init__.py": ACME, "acme_scorers/strict.py": STRICT},
        {"pytest_slam.scorers": {"overlap": "acme_scorers:Overlap",
                                 "twice": "acme_scorers:Twice"}},
    )  # fmt: skip


def _project(pytester: pytest.Pytester, reference: FakeOpenAI, equivalence: str) -> None:
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\nequivalence = {equivalence}\n"
    ))  # fmt: skip
    pytester.makepyfile(test_capital=TESTS)


def _scores(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    """kind -> its one score, from the JSON report."""
    report = read_report(pytester.path / "r.json")
    out = {}
    for outcome in report["outcomes"]:
        ((score,),) = [pair["scores"] for pair in outcome["pairs"]]
        out[outcome["nodeid"].rstrip("]").rsplit("-", 1)[-1]] = score
    return out


def _row(pytester: pytest.Pytester) -> dict[str, Any]:
    (row,) = read_report(pytester.path / "r.json")["models"]
    return dict(row)


def test_an_installed_scorer_is_used_by_its_entry_point_name_and_the_report_names_it(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    reference, candidate = servers
    site = _acme(pytester)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    _project(pytester, reference, '{ by = "overlap" }')
    args = (f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json")
    first = pytester.runpytest_subprocess(*args, "--slm-record=new")
    first.assert_outcomes(passed=3)  # similarity alone is no verdict, as for a built-in scorer
    scores = _scores(pytester)
    assert {k: (s["scorer"], s["value"], s["verdict"]) for k, s in scores.items()} == {
        "same": ("overlap", 1.0, "equivalent"),  # identical to the reference: certain
        "near": ("overlap", 0.5, None), "far": ("overlap", 0.0, None),
    }  # fmt: skip
    assert _row(pytester)["equivalence_by_scorer"] == {"overlap": 0.5}
    assert "no verdict: 2 pair(s) have overlap similarity only" in said(first)

    # a threshold decides it as it decides any similarity: the terminal names the scorer
    _project(pytester, reference, '{ by = "overlap", at_least = 0.4 }')
    second = pytester.runpytest_subprocess(*args)
    second.assert_outcomes(passed=2, failed=1)
    second.stdout.fnmatch_lines(["*call 1: equivalence 0.00 < 0.40 (overlap)*"])
    assert {k: s["decided_by"] for k, s in _scores(pytester).items()} == {
        "same": "exact", "near": "threshold", "far": "threshold",
    }  # fmt: skip


def test_an_import_path_scorer_describing_itself_as_structure_decides_alone(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.syspathinsert(_acme(pytester))
    _project(pytester, reference, '{ by = "acme_scorers.strict:Strict" }')
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-report=r.json",
                                "--slm-record=new")  # fmt: skip
    result.assert_outcomes(passed=1, failed=2)  # no bands set: its description says 1.0 decides
    result.stdout.fnmatch_lines(["*call 1: equivalence 0.00 < 1.00 (acme_scorers.strict:Strict)*"])
    scores = _scores(pytester)
    assert {k: (s["verdict"], s["decided_by"]) for k, s in scores.items()} == {
        "same": ("equivalent", "structure"), "near": ("different", "structure"),
        "far": ("different", "structure"),
    }  # fmt: skip
    assert set(_row(pytester)["equivalence_by_scorer"]) == {"acme_scorers.strict:Strict"}
    assert "no verdict:" not in said(result)


def test_a_value_outside_0_1_fails_the_test_in_one_line_naming_the_scorer(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.syspathinsert(_acme(pytester))
    _project(pytester, reference, '{ by = "twice" }')
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(passed=2, failed=1)  # "same" is out of range (2.0); 1.0 and 0.0 are not
    result.stdout.fnmatch_lines([
        "*call 1: scorer 'twice': acme_scorers:Twice.score() returned 2.0, not a number in 0..1; "
        "return the similarity of the two answers, 1 for equivalent (pytest-slam, cand)",
    ])  # fmt: skip
    assert "Traceback" not in result.stdout.str()


def test_an_unknown_scorer_in_the_table_is_one_line_naming_the_installed_ones(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, _ = servers
    pytester.syspathinsert(_acme(pytester))
    _project(pytester, reference, '{ by = "overlapp" }')
    result = pytester.runpytest("-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    out = result.stdout.str() + result.stderr.str()
    (line,) = [line for line in out.splitlines() if "tool.slam" in line]
    assert "[tool.slam.equivalence] by = 'overlapp' is not a scorer; " in line
    assert "known scorers: exact, normalized" in line and "installed: overlap, twice" in line
    assert "entry point in group 'pytest_slam.scorers'" in line
    assert "package.module:Class" in line and "Traceback" not in out


FAULTY = """
import time

class Boom:
    def score(self, candidate, reference):
        raise RuntimeError("the acme model file is missing")

class Hang:
    def score(self, candidate, reference):
        time.sleep(600)  # a scorer waiting on a server that never answers

class Nan:
    def score(self, candidate, reference):
        return float("nan")

class Exits:
    def score(self, candidate, reference):
        raise SystemExit("acme: no licence")
"""


def _faulty(pytester: pytest.Pytester) -> Path:
    """acme-faulty 2.1, installed in the test's own folder: a scorer that raises, one that hangs
    and one that returns NaN."""
    return make_dist(
        pytester.path / "site", "acme-faulty", {"acme_faulty/__init__.py": FAULTY},
        {"pytest_slam.scorers": {"boom": "acme_faulty:Boom", "hang": "acme_faulty:Hang",
                                 "nan": "acme_faulty:Nan", "exits": "acme_faulty:Exits"}},
        version="2.1",
    )  # fmt: skip


def _failure_lines(result: pytest.RunResult, phrase: str) -> list[str]:
    """The lines with ``phrase`` in the failures, before pytest's short summary (which, with CI
    set, repeats each failure's whole message), each without who said it (``(pytest-slam,
    cand)`` at its end, checked here)."""
    lines = result.outlines
    end = next((i for i, line in enumerate(lines) if "short test summary info" in line), len(lines))
    found = [line for line in lines[:end] if phrase in line]
    assert all(line.endswith(" (pytest-slam, cand)") for line in found), found
    return [line.removesuffix(" (pytest-slam, cand)") for line in found]


ORIGIN = "(group pytest_slam.scorers), of distribution acme-faulty 2.1: fix or upgrade acme-faulty"


def test_a_raising_scorer_of_another_distribution_is_one_line_per_test_naming_it(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.syspathinsert(_faulty(pytester))
    _project(pytester, reference, '{ by = "boom" }')
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    lines = _failure_lines(result, "the acme model file is missing")
    assert len(lines) == 3, out  # one line per test, nothing else of the stack
    assert lines[0].endswith(
        "call 1: scorer 'boom': raised RuntimeError: the acme model file is missing (at "
        f"acme_faulty/__init__.py:6); it is entry point boom = acme_faulty:Boom {ORIGIN} "
        "(pip install -U acme-faulty), or choose another scorer ([tool.slam.equivalence] by)"
    )


def test_a_hanging_scorer_is_a_named_failure_at_its_deadline_and_the_run_ends(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI], monkeypatch: Any
) -> None:
    reference, candidate = servers
    site = _faulty(pytester)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]))
    pytester.makefile(".toml", pyproject=(
        f"[tool.slam]\nreference = '{reference.base_url}#gpt-4'\nscorer_timeout_s = 0.5\n"
        "equivalence = { by = 'hang' }\n"
    ))  # fmt: skip
    pytester.makepyfile(test_capital=TESTS)
    # a subprocess: the hung score's thread is left behind in it, not in this process
    result = pytester.runpytest_subprocess(
        f"--slm-models={candidate.base_url}#cand", "--slm-record=new", timeout=patient(300)
    )
    result.assert_outcomes(failed=3)
    lines = _failure_lines(result, "gave no score within 0.5 s")
    assert len(lines) == 3, result.stdout.str()  # the first waited; the others fail at once
    assert lines[0].endswith(
        "call 1: scorer 'hang': gave no score within 0.5 s ([tool.slam] scorer_timeout_s), so "
        f"it is not asked again in this run; it is entry point hang = acme_faulty:Hang {ORIGIN} "
        "(pip install -U acme-faulty), or choose another scorer ([tool.slam.equivalence] by), "
        "or raise scorer_timeout_s"
    )
    assert "Traceback" not in result.stdout.str()


def test_a_nan_score_is_one_line_naming_the_scorer(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.syspathinsert(_faulty(pytester))
    _project(pytester, reference, '{ by = "nan" }')
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(failed=3)
    lines = _failure_lines(result, "returned nan")
    assert len(lines) == 3 and lines[0].endswith(
        "call 1: scorer 'nan': acme_faulty:Nan.score() returned nan, not a number in 0..1; "
        "return the similarity of the two answers, 1 for equivalent"
    ), result.stdout.str()
    assert "Traceback" not in result.stdout.str()


def test_a_scorer_calling_sys_exit_is_one_line_per_test_and_the_run_goes_on(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    reference, candidate = servers
    pytester.syspathinsert(_faulty(pytester))
    _project(pytester, reference, '{ by = "exits" }')
    result = pytester.runpytest(f"--slm-models={candidate.base_url}#cand", "--slm-record=new")
    result.assert_outcomes(failed=3)  # every test ran: the exit ended none of them, nor the run
    out = result.stdout.str()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    lines = _failure_lines(result, "sys.exit('acme: no licence') called")
    assert len(lines) == 3, out
    assert lines[0].endswith(
        "call 1: scorer 'exits': raised SystemExit: sys.exit('acme: no licence') called (at "
        f"acme_faulty/__init__.py:18); it is entry point exits = acme_faulty:Exits {ORIGIN} "
        "(pip install -U acme-faulty), or choose another scorer ([tool.slam.equivalence] by)"
    )


def test_slam_rescore_with_a_scorer_calling_sys_exit_says_it_in_one_line_and_ends_normally(
    pytester: pytest.Pytester, servers: tuple[FakeOpenAI, FakeOpenAI]
) -> None:
    """``slam rescore`` scores with the configured scorer in its own process: a scorer's
    ``sys.exit`` there ended the command with a silent exit 3."""
    reference, candidate = servers
    pytester.syspathinsert(_faulty(pytester))
    _project(pytester, reference, '{ by = "fuzzy" }')
    ran = pytester.runpytest(
        f"--slm-models={candidate.base_url}#cand", "--slm-record=new", "--slm-report=r.json"
    )
    assert (pytester.path / "r.json").exists(), ran.stdout.str()
    _project(pytester, reference, '{ by = "exits" }')
    from pytest_slam.cli import main

    status = main(["rescore", "r.json", "-o", "again.json"])
    assert status in (0, 1)  # the run's statuses, never a crash
    again = read_report(pytester.path / "again.json")
    messages = [o["message"] for o in again["outcomes"]]
    assert len(messages) == 3 and all(
        m == "call 1: scorer 'exits': raised SystemExit: sys.exit('acme: no licence') called (at "
        f"acme_faulty/__init__.py:18); it is entry point exits = acme_faulty:Exits {ORIGIN} "
        "(pip install -U acme-faulty), or choose another scorer ([tool.slam.equivalence] by)"
        for m in messages
    ), messages
    assert {o["outcome"] for o in again["outcomes"]} == {"failed"}
