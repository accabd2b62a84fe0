"""A distribution outside pytest_slam, built in a test's folder: a package and its ``.dist-info``.

``importlib.metadata`` finds a ``NAME-VERSION.dist-info`` folder (``METADATA``, ``entry_points.txt``)
on ``sys.path`` as it finds an installed wheel's, so a folder written here and put on the path
(``pytester.syspathinsert`` in process, ``PYTHONPATH`` for a subprocess) is a third-party plugin
as pytest-slam sees it: found by its entry points, with no edit to pytest_slam.
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
    version: str = "0.1.0",
) -> Path:
    """Write distribution ``name`` under ``root`` and return ``root`` (the folder to put on the path).

    ``package_files``: file paths relative to ``root`` (``"ext/__init__.py"``) and their source,
    dedented; ``entry_points``: group -> {entry point name -> ``module:attr``}.
    """
    for relative, text in package_files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    info = root / f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n", encoding="utf-8"
    )
    sections = [
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items())
        for group, points in entry_points.items()
    ]
    (info / "entry_points.txt").write_text("\n".join(sections), encoding="utf-8")
    return root
