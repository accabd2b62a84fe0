"""``slam ... --help`` works whatever the project's ``[tool.slam]`` holds (issue 52): help is how a
user finds the fix, and every ``--help`` used to exit 2 with the table's errors and no usage.

Real ``slam`` processes in a folder whose pyproject.toml has a bad table.
"""

from __future__ import annotations

import pytest
from slam_helpers import SLAM

BAD = '[tool.slam]\ncandidates = "smollm2-135m"\nreferance = "openai:gpt-4"\n'


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("golden", "--help"),
        ("golden", "refresh", "--help"),
        ("review", "-h"),
        ("report", "merge", "--help"),
        ("help", "calibrate"),
    ],
    ids=" ".join,
)
def test_help_prints_usage_despite_a_bad_table(pytester: pytest.Pytester, argv: tuple[str, ...]):
    pytester.makefile(".toml", pyproject=BAD)
    result = pytester.run(*SLAM, *argv)
    assert result.ret == 0, result.stderr.str()
    assert result.stdout.lines[0].startswith("usage: slam")
    assert result.stderr.str() == ""


def test_a_command_still_stops_on_the_bad_table(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", pyproject=BAD)
    result = pytester.run(*SLAM, "golden", "stats")
    assert result.ret == 2
    assert result.stderr.lines[0].startswith("slam: ") and "candidates" in result.stderr.str()
