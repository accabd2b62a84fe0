"""Golden entries that lose their test: a deleted entry fails its test, a removed test's entry is
stale, and pruning removes exactly the stale entries. Real pytest runs (pytester), as in
test_plugin_golden.py, whose helpers these tests share.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

from patience import patient
from plugin_golden_helpers import GOLDEN, QUESTIONS, SUITE, entries, make_suite, run, slam
from slam_helpers import PRODUCT

from pytest_slam.golden.fileformat import dump_golden, read_golden
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.stale import read_stale_report

PRODUCT_FILE = GOLDEN / "test_product.json"
OTHER = """
import pytest, product

@pytest.mark.slm
def test_other():
    assert product.ask("Another module's question")
"""


def key_of(question: str) -> str:
    return request_key(
        {"model": "gpt-4", "messages": [{"role": "user", "content": question}], "temperature": 0}
    )


def test_deleted_entry_fails_exactly_its_test_with_a_command_that_records_it(
    pytester, fake_gpt4, mini
):
    make_suite(pytester, fake_gpt4, mini)
    run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    path = pytester.path / PRODUCT_FILE
    golden = read_golden(path)
    del golden.entries[key_of("Reset my password")]
    path.write_text(dump_golden(golden), encoding="utf-8")

    result = run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    (failed,) = [line for line in result.stdout.lines if line.startswith("FAILED")]
    assert failed.startswith("FAILED test_product.py::test_answer[mini-Reset my password]")
    out = result.stdout.str()
    assert "stale golden" not in out  # a module with a failed test is not judged
    command = out.split("Record it from the real reference with: ", 1)[1].splitlines()[0]
    assert (
        command == "pytest --slm-record=new 'test_product.py::test_answer[mini-Reset my password]'"
    )

    hits = fake_gpt4.hits
    pytester.runpytest("-p", "no:cacheprovider", *shlex.split(command)[1:]).assert_outcomes(
        passed=1
    )
    assert fake_gpt4.hits == hits + 1  # exactly the missing answer was recorded
    assert set(entries(path)) == {key_of(q) for q in QUESTIONS}
    run(pytester).assert_outcomes(passed=3)


def test_removed_test_is_stale_only_in_full_runs_and_prune_removes_only_it(
    pytester, fake_gpt4, mini
):
    make_suite(pytester, fake_gpt4, mini)
    pytester.makepyfile(test_other=OTHER)
    run(pytester, "--slm-record=new").assert_outcomes(passed=4)
    other = (pytester.path / GOLDEN / "test_other.json").read_bytes()
    pytester.makepyfile(test_product=SUITE.format(questions=QUESTIONS[:2]))  # one test removed
    gone = key_of(QUESTIONS[2])
    report = pytester.path / ".slam" / "golden-stale.json"

    narrowed = [
        ("-n", "2", "-k", "refund"),
        ("test_product.py::test_answer[mini-Reset my password]",),
    ]
    for args in narrowed:
        result = run(pytester, *args)
        result.assert_outcomes(passed=1)
        result.stdout.fnmatch_lines(["stale golden entries not checked: *"])
        refused = slam(pytester, "golden", "prune")
        assert refused.returncode == 2 and "refusing to prune: the last run was partial" in (
            refused.stderr
        )

    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "1 stale golden entry (no test asked for it); remove with --slm-prune or `slam golden prune`*",
        f"  {PRODUCT_FILE} {gone} (recorded for test_product.py::test_answer?Error 500 since 9am?)",
    ])  # fmt: skip
    assert read_stale_report(report) == ("gpt-4", [("test_product.py", gone)])
    assert (report.parent / ".gitignore").read_text().endswith("*\n")

    dry = slam(pytester, "golden", "prune", "--dry-run")
    was = "(recorded for test_product.py::test_answer[Error 500 since 9am])"
    assert (dry.returncode, dry.stdout) == (0, f"would remove test_product.py {gone} {was}\n")
    done = slam(pytester, "golden", "prune")
    assert done.returncode == 0 and "pruned 1 stale entries; undo with" in done.stdout, done.stderr
    assert set(entries(pytester.path / PRODUCT_FILE)) == {key_of(q) for q in QUESTIONS[:2]}
    assert (pytester.path / GOLDEN / "test_other.json").read_bytes() == other

    pytester.makepyfile(test_product=SUITE.format(questions=QUESTIONS[:1]))  # another removed
    result = run(pytester, "--slm-prune")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pruned 1 stale golden entry; undo with `slam golden restore *`:"])
    assert set(entries(pytester.path / PRODUCT_FILE)) == {key_of(QUESTIONS[0])}
    assert (pytester.path / GOLDEN / "test_other.json").read_bytes() == other
    assert read_stale_report(report) == ("gpt-4", [])  # what was stale is gone, nothing is left
    assert "stale golden" not in run(pytester).stdout.str()


CLI_ONLY = """
[tool.pytest.ini_options]
pythonpath = ["."]

[tool.slam]
candidates = ["mini"]

[tool.slam.models.mini]
base_url = "{url}"
model = "gpt-4o-mini"
"""


def shell(cwd, line: str) -> subprocess.CompletedProcess[str]:
    """A command line exactly as printed, run by a shell in the project folder (the ``slam`` on
    its PATH is the one installed beside this Python)."""
    path = f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path}
    return subprocess.run(line, shell=True, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=patient(120))  # fmt: skip


def test_the_undo_command_a_prune_prints_works_as_printed(pytester, fake_gpt4, mini):
    """The runs get the reference and the golden folder on their command line; the project names
    neither. `slam golden prune` takes the reference from the stale report, the trash file names
    its store and reference, so the undo command printed (by prune, and by --slm-prune) is all
    that is needed: run as printed, it gives the golden file back byte for byte."""
    pytester.makepyfile(product=PRODUCT, test_product=SUITE.format(questions=QUESTIONS))
    pytester.makefile(".toml", pyproject=CLI_ONLY.format(url=mini.base_url))
    flags = (f"--slm-reference={fake_gpt4.base_url}#gpt-4", "--slm-golden-dir=goldens")
    run(pytester, *flags, "--slm-record=new").assert_outcomes(passed=3)
    golden = pytester.path / "goldens" / "gpt-4" / "test_product.json"
    recorded = golden.read_bytes()
    pytester.makepyfile(test_product=SUITE.format(questions=QUESTIONS[:2]))  # one test removed
    kept = {key_of(q) for q in QUESTIONS[:2]}

    run(pytester, *flags).assert_outcomes(passed=2)
    done = slam(pytester, "golden", "prune", "--root", "goldens")
    assert done.returncode == 0 and set(entries(golden)) == kept, done.stderr
    undo = done.stdout.splitlines()[-1].split("; undo with: ", 1)[1]
    assert undo.startswith("slam golden restore .slam/trash/"), undo
    back = shell(pytester.path, undo)
    assert back.returncode == 0 and back.stderr == "", back
    assert golden.read_bytes() == recorded

    pruned = run(pytester, *flags, "--slm-prune")
    pruned.assert_outcomes(passed=2)
    assert set(entries(golden)) == kept
    said = pruned.stdout.str().split("; undo with `", 1)[1].split("`", 1)[0]
    back = shell(pytester.path, said)
    assert back.returncode == 0 and back.stderr == "", back
    assert golden.read_bytes() == recorded
