"""A managed engine's log on a full disk and in a read-only folder (disk_helpers.py).

The engine writes its stdout and stderr into its log (``swap/engines/managed.py``). A log that
cannot be made was an ``OSError`` out of the run; an engine that died writing past a file-size
limit was a tail of a cut-off log, saying nothing of why. Each is now one line naming the log
file, the error and the fix. The engine is a fake: a few KiB of loading lines, then the fake
OpenAI server (``python -m pytest_slam.testing.fake_openai``) under pytest-slam's supervisor, started
by a small script in a subprocess whose writes fail; with space, the same start serves.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from disk_helpers import (
    READ_ONLY_FS,
    TOO_LARGE,
    needs_read_only_mount,
    no_traceback,
    run_full,
    run_read_only,
)

START = """
import shlex, sys
from pathlib import Path
from pytest_slam.records import ModelSpec
from pytest_slam.swap.engines.managed import Engine, ManagedServer, free_port
from pytest_slam.swap.engines.protocol import EngineError

class Chatty(Engine):
    kind = "chatty"

    def check_available(self):
        pass

    def command(self):
        loading = [sys.executable, "-c", "print('loading weights ...\\\\n' * 400)"]
        serve = [sys.executable, "-m", "pytest_slam.testing.fake_openai", "--port", str(self.port)]
        return ["sh", "-c", f"{shlex.join(loading)} && exec {shlex.join(serve)}"]

server = ManagedServer(Chatty(ModelSpec("m", "chatty", "m"), free_port()), Path("logs"))
try:
    server.start(60)
except EngineError as exc:
    sys.exit(str(exc))
print(server.start_line())
server.stop()
"""
ARGV = [sys.executable, "-c", START]
HEAD = r"chatty engine for model 'm' "


def _served(root: Path) -> None:
    """The same start with space: the engine serves, and its log holds all it wrote."""
    done = run_full(ARGV, root, limit=1 << 20)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.fullmatch(r"engine m: chatty, on http://127\.0\.0\.1:\d+/v1, up in .*\n", done.stdout)
    assert (root / "logs" / "engine-m.log").stat().st_size > 4000


def test_an_engine_whose_log_reaches_a_full_disk_is_one_line_naming_the_log(
    tmp_path: Path,
) -> None:
    (tmp_path / "logs").mkdir()
    full = run_full(ARGV, tmp_path, limit=1024)
    no_traceback(full)
    assert full.returncode == 1 and full.stdout == ""
    (line,) = full.stderr.splitlines()
    assert re.fullmatch(
        HEAD + r"on http://127\.0\.0\.1:\d+/v1 exited with code 1 while starting: "
        r"could not write logs/engine-m\.log: " + re.escape(TOO_LARGE),
        line,
    ), line
    _served(tmp_path)


@needs_read_only_mount
def test_an_engine_whose_log_folder_is_read_only_is_one_line_and_not_started(
    tmp_path: Path,
) -> None:
    (tmp_path / "logs").mkdir()
    ro = run_read_only(ARGV, tmp_path, [tmp_path / "logs"])
    no_traceback(ro)
    assert ro.returncode == 1 and ro.stdout == ""
    assert ro.stderr == f"{HEAD}not started: could not write logs/engine-m.log: {READ_ONLY_FS}\n"
    assert list((tmp_path / "logs").iterdir()) == []
    _served(tmp_path)


def test_an_engine_that_fails_with_room_for_its_log_still_shows_its_last_lines(
    tmp_path: Path,
) -> None:
    """Not every failed start is the disk: an engine that exits with its log whole shows that
    log's last lines, as before."""
    (tmp_path / "logs").mkdir()
    failing = START.replace("&& exec", "&& exit 3; exec")
    done = run_full([sys.executable, "-c", failing], tmp_path, limit=1 << 20)
    no_traceback(done)
    assert done.returncode == 1
    assert "exited with code 3 while starting. Last lines of " in done.stderr
    assert done.stderr.rstrip().endswith("loading weights ...")
