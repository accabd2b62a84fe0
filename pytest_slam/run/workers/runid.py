"""The identity of one run of a suite, which every shard of it writes into its signed ``visits``.

``slam report merge`` takes shards only of one run: an older run's signed shards (a cached
artifact, a re-run's leftovers) would otherwise merge as today's and turn today's FAIL into a PASS.
The identity is the first of: ``SLAM_RUN_ID`` (a nonce the first job hands its shards, or any
name a CI gives them), the CI's own run id (GitHub Actions, GitLab, Buildkite, CircleCI, Azure
Pipelines, Jenkins), else the commit checked out (``git rev-parse HEAD``), else None (no CI, no
git: the shards can only agree on having none).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

RUN_ID_ENV = "SLAM_RUN_ID"
# environment variable -> the prefix that says whose id it is (first found wins)
CI_RUN_IDS = (
    (RUN_ID_ENV, "slam"),
    ("GITHUB_RUN_ID", "github"),
    ("CI_PIPELINE_ID", "gitlab"),
    ("BUILDKITE_BUILD_ID", "buildkite"),
    ("CIRCLE_WORKFLOW_ID", "circleci"),
    ("BUILD_BUILDID", "azure"),
    ("BUILD_TAG", "jenkins"),
)


def run_identity(rootdir: Path) -> str | None:
    """This run's identity as ``source:value`` (``github:9876543``, ``commit:3f1c...``)."""
    for name, source in CI_RUN_IDS:
        value = os.environ.get(name, "").strip()
        if value:
            return f"{source}:{value}"
    commit = _commit(rootdir)
    return f"commit:{commit}" if commit else None


def _commit(rootdir: Path) -> str | None:
    """The commit checked out at ``rootdir``, or None (not a git checkout, no git)."""
    try:
        argv = ["git", "rev-parse", "--verify", "-q", "HEAD"]
        done = subprocess.run(argv, cwd=rootdir, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None
