"""Every bad input a ``slam`` command reads: one line naming it and the fix, exit 2, nothing written.

Table-driven, like test_config_errors.py: each case builds a real project folder (a golden store
with one entry, a stale report that would prune it, a trash file that would restore it, a report),
spoils one input, and runs the real ``slam`` entry point (``pytest_slam.cli.main``) in it. The
whole folder is compared byte for byte before and after: a refused command leaves no file, lock or
folder behind. A BOM (an editor's) is the one spoiling that is read as the text after it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import report_helpers as synth

from pytest_slam.cli import main
from pytest_slam.golden.fileformat import GoldenFile, dump_golden
from pytest_slam.golden.keys import request_key
from pytest_slam.golden.stale import STALE_SCHEMA
from pytest_slam.golden.store import GoldenStore
from pytest_slam.golden.trash import TRASH_SCHEMA, Trash
from pytest_slam.records import GoldenAnswer, GoldenRecord
from pytest_slam.report.aggregate import aggregate
from pytest_slam.report.jsonreport import write_json

MODULE = "tests/test_x.py"
REQUEST = {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}
KEY = request_key(REQUEST)
STALE = Path(".slam/golden-stale.json")
TRASH = Path(".slam/trash/20260101T000000.000000Z.jsonl")
GOLDEN = "__slam__/openai-gpt-4/tests/test_x.json"
BOM = b"\xef\xbb\xbf"
NOT_UTF8 = b"\xff\xfe{}\n"
RUN_TO_ITS_END = "run the whole suite with pytest to its end first"


def stale(**over: object) -> bytes:
    doc = {"schema": STALE_SCHEMA, "reference": "openai:gpt-4", "entries": [[MODULE, KEY]]}
    return json.dumps({**doc, **over}).encode()


def trash(*lines: object, header: object = None) -> bytes:
    head = header or {"schema": TRASH_SCHEMA, "reference": "openai:gpt-4", "root": "__slam__"}
    return b"".join(json.dumps(x).encode() + b"\n" for x in (head, *lines))


def entry(**over: object) -> dict[str, object]:
    line = {"module": MODULE, "key": KEY, "entry": {"request": REQUEST, "answers": [{"text": "a"}]}}
    return {**line, **over}


def simple(**over: object) -> bytes:
    return json.dumps({"prompt": "p", "answer": "a", "model": "gpt-4", **over}).encode() + b"\n"


def openai_line(response: object) -> bytes:
    return json.dumps({"request": REQUEST, "response": response}).encode() + b"\n"


def report(**over: object) -> bytes:
    return json.dumps({"schema": "pytest-slam/report/1", "generated_at": "", **over}).encode()


def golden_text() -> bytes:
    """A golden file holding the one entry, as the store writes it."""
    rec = GoldenRecord(KEY, REQUEST, [GoldenAnswer(text="hello")])
    return dump_golden(GoldenFile(Path("x.json"), "openai:gpt-4", {KEY: rec})).encode()


FOLDER = None  # a file's content that means "make a folder here"
Files = dict[str, bytes | None]

PRUNE = ["golden", "prune"]
IMPORT = ["golden", "import", "log.jsonl", "--module", MODULE]
RESTORE = ["golden", "restore", str(TRASH)]
RENDER, DIFF = ["report", "run.json"], ["report", "diff", "run.json", "run.json"]

# case: (files written into the project, slam argv, what the one line must contain)
CASES: dict[str, tuple[Files, list[str], str]] = {
    # `slam golden prune`: the stale report a run left (.slam/golden-stale.json), tampered
    "prune: no report": ({}, PRUNE, f"golden-stale.json: no stale report. Fix: {RUN_TO_ITS_END}"),
    "prune: report is a folder": (
        {str(STALE): FOLDER}, PRUNE, "golden-stale.json: a folder, not a stale report. Fix:"
    ),
    "prune: not JSON": ({str(STALE): b"{oops"}, PRUNE, "stale report (not JSON: Expecting"),
    "prune: not UTF-8": ({str(STALE): NOT_UTF8}, PRUNE, "not a stale report: not UTF-8 text"),
    "prune: a list": ({str(STALE): b"[1]"}, PRUNE, "not a pytest-slam stale report (no 'schema'"),
    "prune: a number": ({str(STALE): b"5"}, PRUNE, "not a pytest-slam stale report (no 'schema'"),
    "prune: no reference": (
        {str(STALE): stale(reference=None)}, PRUNE, "('reference' must name the reference model)"
    ),
    "prune: reference a number": ({str(STALE): stale(reference=5)}, PRUNE, "'reference' must"),
    "prune: no entries": ({str(STALE): stale(entries=None)}, PRUNE, "'entries' must be a list"),
    "prune: entries a number": ({str(STALE): stale(entries=5)}, PRUNE, "'entries' must be a list"),
    "prune: entry of numbers": (
        {str(STALE): stale(entries=[[1, 2]])}, PRUNE, "entry 1 is not a [test module .py path, key]"
    ),
    "prune: entry of three": ({str(STALE): stale(entries=[[MODULE, KEY, 3]])}, PRUNE, "entry 1 "),
    "prune: module not .py": (
        {str(STALE): stale(entries=[["tests/x.txt", KEY]])}, PRUNE, "['tests/x.txt', "
    ),
    "prune: module outside": (
        {str(STALE): stale(entries=[["../test_x.py", KEY]])}, PRUNE, "['../test_x.py', "
    ),
    "prune: module absolute": (
        {str(STALE): stale(entries=[["/tmp/test_x.py", KEY]])}, PRUNE, "['/tmp/test_x.py', "
    ),
    "prune: partial run": (
        {str(STALE): stale(entries=[], partial="interrupted")}, PRUNE,
        "refusing to prune: the last run was partial (interrupted)",
    ),
    "prune: --reference not the report's": (
        {str(STALE): stale()}, [*PRUNE, "--reference", "openai:gpt-4o"],
        "lists entries of 'openai:gpt-4', not 'openai:gpt-4o'. Fix: leave out --reference",
    ),
    "prune: --root is a file": (
        {"afile": b"x"}, [*PRUNE, "--root", "afile"], "afile: a file, not a golden store folder"
    ),
    "prune: --stale-report a folder": (
        {"d": FOLDER}, [*PRUNE, "--stale-report", "d"], "d: a folder, not a stale report"
    ),
    "prune: a golden file broken": (
        {str(STALE): stale(entries=[["tests/test_a.py", KEY], [MODULE, KEY]]),
         "__slam__/openai-gpt-4/tests/test_a.json": golden_text(), GOLDEN: b"{oops"}, PRUNE,
        "test_x.json:1: not valid JSON, it looks truncated or hand-edited",
    ),
    # `slam golden import`: the log and --module
    "import: no file": ({}, IMPORT, "log.jsonl: no JSONL file; pass the log as UTF-8 JSON Lines"),
    "import: a folder": ({"log.jsonl": FOLDER}, IMPORT, "log.jsonl: a folder, not a JSONL file"),
    "import: not JSON": ({"log.jsonl": b"{oops\n"}, IMPORT, "log.jsonl:1: Expecting property"),
    "import: not UTF-8": (
        {"log.jsonl": simple() + NOT_UTF8}, IMPORT, "log.jsonl: not a JSONL file: not UTF-8 text"
    ),
    "import: a list": ({"log.jsonl": simple() + b"[1]\n"}, IMPORT, "log.jsonl:2: not a JSON obj"),
    "import: a number": ({"log.jsonl": b"5\n"}, IMPORT, "log.jsonl:1: not a JSON object"),
    "import: prompt a number": ({"log.jsonl": simple(prompt=5)}, IMPORT, "'prompt' must be a str"),
    "import: system a list": ({"log.jsonl": simple(system=[1])}, IMPORT, "'system' must be a str"),
    "import: choices of numbers": (
        {"log.jsonl": openai_line({"choices": [5]})}, IMPORT, "each of 'choices' must be an object"
    ),
    "import: content a number": (
        {"log.jsonl": openai_line({"choices": [{"message": {"content": 5}}]})}, IMPORT,
        "a message's 'content' must be a string",
    ),
    "import: usage a list": (
        {"log.jsonl": openai_line({"choices": [{"message": {}}], "usage": [1]})}, IMPORT,
        "'usage' must be an object",
    ),
    "import: --module not .py": (
        {"log.jsonl": simple()}, ["golden", "import", "log.jsonl", "--module", "tests/x.txt"],
        "--module 'tests/x.txt' is not a test module of the project. Fix: name the test file",
    ),
    "import: --module outside": (
        {"log.jsonl": simple()}, ["golden", "import", "log.jsonl", "--module", "../test_x.py"],
        "--module '../test_x.py' is not a test module",
    ),
    "import: --module absolute": (
        {"log.jsonl": simple()}, ["golden", "import", "log.jsonl", "--module", "/t/test_x.py"],
        "--module '/t/test_x.py' is not a test module",
    ),
    # `slam golden restore`: a prune's trash file, tampered
    "restore: no trash at all": (
        {}, ["golden", "restore"], "no pruned entries to restore (no trash file). Fix:"
    ),
    "restore: no file": ({}, RESTORE, ".jsonl: no trash file. Fix: restore a file written by"),
    "restore: a folder": ({str(TRASH): FOLDER}, RESTORE, ".jsonl: a folder, not a trash file"),
    "restore: not JSON": ({str(TRASH): b"{oops\n"}, RESTORE, "(no pytest-slam trash header)"),
    "restore: not UTF-8": ({str(TRASH): NOT_UTF8}, RESTORE, "not a trash file: not UTF-8 text"),
    "restore: a list": ({str(TRASH): b"[1]\n"}, RESTORE, "(no pytest-slam trash header)"),
    "restore: a number": ({str(TRASH): b"5\n"}, RESTORE, "(no pytest-slam trash header)"),
    "restore: no reference": (
        {str(TRASH): trash(entry(), header={"schema": TRASH_SCHEMA})}, RESTORE,
        "(the header names no reference)",
    ),
    "restore: root a path": (
        {str(TRASH): trash(header={"schema": TRASH_SCHEMA, "reference": "r", "root": "../x"})},
        RESTORE, "the header's 'root' '../x' is not a folder name",
    ),
    "restore: a line not JSON": (
        {str(TRASH): trash(entry()) + b"{oops\n"}, RESTORE, "(line 3 is not JSON: Expecting"
    ),
    "restore: a line a list": ({str(TRASH): trash([1])}, RESTORE, "(line 2 is not an object with"),
    "restore: key a number": ({str(TRASH): trash(entry(key=5))}, RESTORE, "(line 2 is not an obj"),
    "restore: module a number": (
        {str(TRASH): trash(entry(module=5))}, RESTORE, "(line 2: 'module' is not a test .py path: 5)"
    ),
    "restore: module not .py": (
        {str(TRASH): trash(entry(module="tests/x.txt"))}, RESTORE, "'module' is not a test .py path"
    ),
    "restore: entry a number": (
        {str(TRASH): trash(entry(entry=5))}, RESTORE, "(line 2: 'entry' is not a golden entry)"
    ),
    "restore: answers of numbers": (
        {str(TRASH): trash(entry(entry={"request": {}, "answers": [5]}))}, RESTORE,
        "(line 2: 'entry' is not a golden entry)",
    ),
    "restore: --reference not the trash's": (
        {str(TRASH): trash(entry())}, [*RESTORE, "--reference", "openai:gpt-4o"],
        "holds entries of 'openai:gpt-4', not 'openai:gpt-4o'. Fix: leave out --reference",
    ),
    "restore: a golden file broken": (
        {str(TRASH): trash(entry(module="tests/test_a.py"), entry()), GOLDEN: b"{oops"}, RESTORE,
        "test_x.json:1: not valid JSON, it looks truncated or hand-edited",
    ),
    # `slam golden stats`
    "stats: --root is a file": (
        {"afile": b"x"}, ["golden", "stats", "--root", "afile"], "afile: a file, not a golden"
    ),
    # `slam report` and `slam report diff`: the JSON report
    "report: no file": ({}, RENDER, "pytest-slam report not found: run.json; write one with"),
    "report: a folder": ({"run.json": FOLDER}, RENDER, "run.json is a folder, not a report; pass"),
    "report: not JSON": ({"run.json": b"{oops"}, RENDER, "not valid JSON (Expecting property"),
    "report: not UTF-8": ({"run.json": NOT_UTF8}, RENDER, "not valid JSON ('utf-8' codec can't"),
    "report: a list": ({"run.json": b"[1]"}, RENDER, "top level is not an object; pass the file"),
    "report: a number": ({"run.json": b"5"}, RENDER, "top level is not an object; pass the file"),
    "report: no schema": ({"run.json": b"{}"}, RENDER, "(schema None, expected 'pytest-slam/rep"),
    "report: outcomes a number": (
        {"run.json": report(outcomes=5)}, RENDER, "(outcomes: Input should be a valid array); pass"
    ),
    "report: an outcome a number": (
        {"run.json": report(outcomes=[5])}, RENDER, "(outcomes.0: Input should be an object)"
    ),
    "report: nodeid a number": (
        {"run.json": report(outcomes=[{"nodeid": 5, "test": "t", "model": "m"}])}, RENDER,
        "(outcomes.0.nodeid: Input should be a valid string)",
    ),
    "report: no nodeid": (
        {"run.json": report(outcomes=[{"test": "t", "model": "m"}])}, RENDER,
        "(outcomes.0.nodeid: Field required)",
    ),
    "report: models a table": (
        {"run.json": report(models={"a": 5})}, RENDER, "(models: Input should be a valid array)"
    ),
    "report: run a number": ({"run.json": report(run=5)}, RENDER, "(run: Input should be an obj"),
    "report: -o where no file can be": (
        {"run.json": report(), "afile": b"x"}, [*RENDER, "-o", "afile/x.html"],
        "slam report render: cannot write afile/x.html (",
    ),
    "report diff: no file": ({}, DIFF, "slam report diff: pytest-slam report not found: run.json"),
    "report diff: a list": ({"run.json": b"[1]"}, DIFF, "top level is not an object"),
    "report diff: wrong type": ({"run.json": report(tests=[{"test": 1}])}, DIFF, "(tests.0.test:"),
    # ./pyproject.toml, read by every command
    "config: a folder": (
        {"pyproject.toml": FOLDER}, ["config", "check"], "pyproject.toml is a folder; pyproject"
    ),
    "config: not TOML": ({"pyproject.toml": b"x = \n"}, ["config", "check"], "not valid TOML ("),
    "config: a BOM": (
        {"pyproject.toml": BOM + b"[tool.slam]\n"}, ["golden", "stats"],
        "starts with a byte-order mark, which TOML does not allow; save it as UTF-8 without BOM",
    ),
    "config: not UTF-8": (
        {"pyproject.toml": b"[tool.slam]\nreference = '\xff'\n"}, ["config", "check"],
        "pyproject.toml: not UTF-8 text (invalid start byte); save it as UTF-8",
    ),
    "config: wrong type": (
        {"pyproject.toml": b"[tool.slam]\nsamples = 'three'\n"}, ["config", "check"],
        "[tool.slam] samples = 'three' must be a whole number",
    ),
    # `slam config check`: what a run of a well-typed table would still stop on
    "config check: no GGUF file": (
        {"pyproject.toml": b"[tool.slam]\ncandidates = ['local']\n[tool.slam.models.local]\n"
         b"provider = 'llamacpp'\nengine = {model_path = 'models/none.gguf'}\n"},
        ["config", "check"], "slam config check: model 'local': no GGUF file at models/none.gguf",
    ),
    "config check: a base_url without a host": (
        {"pyproject.toml": b"[tool.slam]\ncandidates = ['api']\n[tool.slam.models.api]\n"
         b"base_url = 'htp:/localhost/v1'\nmodel = 'm'\n"},
        ["config", "check"],
        "model 'api': base_url 'htp:/localhost/v1': not an http(s) URL with a host; write it as",
    ),
    "config check: a base_url's port": (
        {"pyproject.toml": b"[tool.slam]\ncandidates = ['api']\n[tool.slam.models.api]\n"
         b"base_url = 'http://localhost:99999/v1'\nmodel = 'm'\n"},
        ["config", "check"], "base_url 'http://localhost:99999/v1': Port out of range",
    ),
}  # fmt: skip


def project(tmp_path: Path, files: Files) -> Path:
    """A project with one golden entry (what a prune would remove), then the case's files."""
    store = GoldenStore(tmp_path / "__slam__", "openai:gpt-4")
    store.record(MODULE, GoldenRecord(KEY, REQUEST, [GoldenAnswer(text="hello")]), "t::x")
    store.flush()
    for name, content in files.items():
        path = tmp_path / name
        if content is FOLDER:
            path.mkdir(parents=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
    return tmp_path


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every file (its bytes) and folder (None) under ``folder``."""
    return {
        p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
        for p in sorted(folder.rglob("*"))
    }


def slam(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The real entry point, as the console script calls it; a SystemExit is its status."""
    try:
        status = main(argv)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return status, out, err


@pytest.mark.parametrize("case", CASES)
def test_a_bad_input_is_one_line_with_exit_2_and_nothing_written(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files, argv, needle = CASES[case]
    monkeypatch.chdir(project(tmp_path, files))
    before = snapshot(tmp_path)
    status, out, err = slam(argv, capsys)
    assert (status, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and needle in err, err
    assert "Traceback" not in err and "Errno" not in err
    assert snapshot(tmp_path) == before


def golden_entries(root: Path) -> list[str]:
    path = root / GOLDEN
    return sorted(json.loads(path.read_text(encoding="utf-8"))["entries"]) if path.exists() else []


BOM_READ: dict[str, tuple[Files, list[str], Callable[[Path, str], bool]]] = {
    "prune": (
        {str(STALE): BOM + stale()}, PRUNE,
        lambda root, out: "pruned 1 stale entries" in out and golden_entries(root) == [],
    ),
    "import": (
        {"log.jsonl": BOM + simple(prompt="new")}, IMPORT,
        lambda root, out: out.startswith("imported 1,") and len(golden_entries(root)) == 2,
    ),
    "restore": (
        {str(TRASH): BOM + trash(entry())}, RESTORE,
        lambda root, out: "keep tests/test_x.py" in out,  # the entry is there: kept as it is
    ),
    "config": (
        {"pyproject.toml": b"[tool.slam]\nreference = 'openai:gpt-4'\n"}, ["config", "check"],
        lambda root, out: "is valid" in out,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", BOM_READ)
def test_a_file_an_editor_saved_with_a_bom_is_read_as_written(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The other half of each case above: the same command on a good input does its job, so the
    refusals are the inputs' doing."""
    files, argv, done = BOM_READ[case]
    monkeypatch.chdir(project(tmp_path, files))
    status, out, err = slam(argv, capsys)
    assert (status, err) == (0, ""), err
    assert done(tmp_path, out), out


def test_a_report_with_a_bom_renders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outcomes = synth.outcomes()
    written = write_json(tmp_path / "run.json", aggregate(outcomes, synth.run_info()), outcomes)
    written.write_bytes(BOM + written.read_bytes())
    monkeypatch.chdir(tmp_path)
    assert slam(RENDER, capsys)[:2] == (0, f"slam report render: wrote {Path('run.html')}\n")
    assert slam(DIFF, capsys)[0] == 0


def test_the_trash_a_prune_writes_names_its_store(tmp_path: Path) -> None:
    """What lets ``restore TRASH`` work without --root or --reference."""
    from pytest_slam.golden.trash import read_trash

    store = GoldenStore(project(tmp_path, {}) / "__slam__", "openai:gpt-4")
    kept = Trash(store.root, store.reference)
    assert store.prune([(MODULE, KEY)], kept.add) == 1
    assert kept.path is not None
    found = read_trash(kept.path)
    assert (found.reference, found.store_root()) == ("openai:gpt-4", tmp_path / "__slam__")


# -- one exit status per kind of fault, whatever the command (cli/exits.py; docs/reference/cli.md) --

READS_A_REPORT: dict[str, list[str]] = {
    "report render": ["report", "render", "R"],
    "report diff": ["report", "diff", "R", "R"],
    "report merge": ["report", "merge", "R", "-o", "merged.json"],
    "rescore": ["rescore", "R"],
    "review": ["review", "--report", "R", "--no-browser"],
    "review --stats": ["review", "--stats", "--report", "R"],
    "calibrate --report": ["calibrate", "--report", "R", "--dry-run"],
    "golden promote": ["golden", "promote", "m", "--report", "R"],
    "golden prune --from-report": ["golden", "prune", "--from-report", "R"],
}
FAULTS: dict[str, tuple[Files, str]] = {  # the report R as each fault leaves it; the line says
    "missing": ({}, "report not found: R"),
    "a folder": ({"R": FOLDER}, "R is a folder, not a report"),
    "not JSON": ({"R": b"{oops"}, "R is not a pytest-slam JSON report: not valid JSON"),
    "not a report": ({"R": b"{}"}, "R is not a pytest-slam report (schema None"),
}


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("command", READS_A_REPORT)
def test_every_command_exits_2_for_each_fault_of_a_report_it_reads(
    command: str,
    fault: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files, needle = FAULTS[fault]
    monkeypatch.chdir(project(tmp_path, files))
    before = snapshot(tmp_path)
    status, out, err = slam(READS_A_REPORT[command], capsys)
    assert (status, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err, err
    assert err.startswith(f"slam {command.split()[0]}"), err
    assert snapshot(tmp_path) == before


def good_report(folder: Path) -> None:
    outcomes = synth.outcomes()
    write_json(folder / "R", aggregate(outcomes, synth.run_info()), outcomes)


# every other kind of fault: an argument, an output that cannot be written, [tool.slam], a name
OTHER_FAULTS: dict[str, tuple[Files, list[str], str]] = {
    "render: -o in a file": ({"afile": b"x"}, ["report", "R", "-o", "afile/x.html"], "cannot"),
    "merge: -o in a file": (
        {"afile": b"x"}, ["report", "merge", "R", "-o", "afile/m.json"], "cannot write"
    ),
    "rescore: -o in a file": ({"afile": b"x"}, ["rescore", "R", "-o", "afile/n.json"], "not writ"),
    "rescore: bad [tool.slam]": (
        {"pyproject.toml": b"[tool.slam]\nsamples = 'x'\n"}, ["rescore", "R"], "samples = 'x'"
    ),
    "review: bad [tool.slam]": (
        {"pyproject.toml": b"[tool.slam]\nsamples = 'x'\n"}, ["review", "--report", "R"], "samples"
    ),
    "diff: a bad tolerance": ({}, ["report", "diff", "R", "R", "--equivalence-drop", "x"], ""),
    "rescore: an unknown option": ({}, ["rescore", "R", "--nope"], ""),
    "help: an unknown command": ({}, ["help", "nope"], "slam has no command 'nope'"),
    "unpromote: no such baseline": ({}, ["golden", "unpromote", "nope"], "no baseline named"),
}  # fmt: skip


@pytest.mark.parametrize("case", OTHER_FAULTS)
def test_every_other_fault_exits_2_too(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    files, argv, needle = OTHER_FAULTS[case]
    good_report(tmp_path)
    monkeypatch.chdir(project(tmp_path, files))
    before = snapshot(tmp_path)
    status, out, err = slam(argv, capsys)
    assert (status, out) == (2, ""), err
    assert needle in err and "Traceback" not in err, err
    if needle:  # argparse's own errors print the usage first
        assert len(err.splitlines()) == 1, err
    assert snapshot(tmp_path) == before


def test_the_cli_reference_holds_the_exit_status_table() -> None:
    from pytest_slam.cli import exits
    from pytest_slam.errors import KINDS

    page = (Path(__file__).parents[2] / "docs/reference/cli.md").read_text(encoding="utf-8")
    assert exits.table_markdown() in page
    assert set(exits.BY_KIND) == set(KINDS)  # an error of any kind has its one status
    assert {s.code for s in exits.TABLE} == {0, 1, 2, 6}


def test_config_check_says_a_run_has_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import importlib.util

    if importlib.util.find_spec("xllamacpp") is None:
        pytest.skip("llama.cpp is not installed (pip install 'pytest-slam[llamacpp]')")
    (tmp_path / "models").mkdir()
    (tmp_path / "models/tiny.gguf").write_bytes(b"GGUF")  # only its presence is checked
    (tmp_path / "pyproject.toml").write_text(
        "[tool.slam]\ncandidates = ['local', 'api']\n"
        "[tool.slam.models.local]\nprovider = 'llamacpp'\n"
        "engine = {model_path = 'models/tiny.gguf'}\n"
        "[tool.slam.models.api]\nbase_url = 'http://127.0.0.1:8000/v1'\nmodel = 'm'\n"
    )
    monkeypatch.chdir(tmp_path)
    status, out, err = slam(["config", "check"], capsys)
    assert (status, err) == (0, ""), err
    assert out.splitlines() == [
        "slam: [tool.slam] in ./pyproject.toml is valid, and a run has what it needs "
        "(local, api, openai:gpt-4)."
    ]
