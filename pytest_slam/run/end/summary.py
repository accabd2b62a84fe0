"""The run's summary: the lines of the ``pytest-slam`` section and the gate's last line.

Every part of the run adds to it; the terminal prints it after pytest's own summary (plugin.py,
lastline.py). Paths in it are shown as the user reads them: relative to the rootdir.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Summary:
    rootpath: Path
    lines: list[str] = field(default_factory=list)
    last_line: str = ""  # the gate's verdict, printed after pytest's own summary (lastline.py)

    def append(self, line: str) -> None:
        self.lines.append(line)

    def extend(self, lines: Iterable[str]) -> None:
        self.lines.extend(lines)

    def lead(self, lines: list[str]) -> None:
        """Lines that open the section (the verdict table)."""
        self.lines[:0] = lines

    def shown(self, path: Path | str) -> str:
        """A path as the user reads it: relative to the rootdir when it is inside it."""
        return shown(path, self.rootpath)


def shown(path: Path | str, rootpath: Path) -> str:
    """``path`` relative to ``rootpath`` when it is inside it, else as it is."""
    try:
        return str(Path(path).relative_to(rootpath))
    except ValueError:
        return str(path)
