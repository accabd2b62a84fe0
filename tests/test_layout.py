"""The package's shape, kept: unique module names, formatter exemptions only for tables."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "pytest_slam"
TABLE_START = re.compile(r"^\s*[A-Z][A-Z_]+(: [^=]+)? = \S")


def _modules() -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if p.name not in ("__init__.py", "__main__.py")]


def test_every_module_name_is_unique_in_the_package() -> None:
    """A name says one job: ``stats.py`` in three wings sent readers (and tracebacks) astray."""
    counts = Counter(p.name for p in _modules())
    assert [name for name, n in counts.items() if n > 1] == []


def test_the_formatter_is_switched_off_only_for_constant_tables() -> None:
    """``# fmt: skip`` keeps a hand-aligned table of constants; any other code is formatted."""
    outside = []
    for path in _modules():
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            if "# fmt: skip" not in line:
                continue
            block = []
            for above in reversed(lines[max(0, number - 12) : number + 1]):
                if not above.strip():
                    break
                block.append(above)
            if not any(TABLE_START.match(b) for b in block):
                outside.append(f"{path.relative_to(PACKAGE)}:{number + 1}")
    assert outside == []
