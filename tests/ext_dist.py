"""A distribution outside pytest_slam, written into a folder, for tests of what users install.

``make_dist`` writes the distribution's files and its ``NAME-VERSION.dist-info`` (``METADATA`` and
``entry_points.txt``) as an installer leaves them in site-packages: with the folder on ``sys.path``
(``pytester.syspathinsert``, ``monkeypatch.syspath_prepend``, or ``PYTHONPATH`` for a subprocess)
``importlib.metadata`` finds its entry points, with no edit to pytest_slam.
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path


def make_dist(
    root: Path,
    name: str,
    package_files: dict[str, str],
    entry_points: dict[str, dict[str, str]],
    version: str = "1.0",
) -> Path:
    """Write distribution ``name`` under ``root`` and return ``root`` (the folder to put on the path).

    ``package_files``: path relative to ``root`` -> source (dedented), e.g.
    ``{"acme/__init__.py": "..."}``. ``entry_points``: group -> {entry point name: "module:attr"},
    e.g. ``{"pytest_slam.scorers": {"overlap": "acme:Overlap"}}``.
    """
    for relative, source in package_files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source), encoding="utf-8")
    info = root / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    sections = [
        f"[{group}]\n" + "".join(f"{ep} = {target}\n" for ep, target in points.items())
        for group, points in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    return root
