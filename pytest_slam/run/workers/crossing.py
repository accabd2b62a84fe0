"""What an xdist worker sends its controller, able to hold any text a model sent.

A report and a worker's payload hold model text, and execnet refuses what UTF-8 cannot encode (a
lone surrogate): one answer of ``"\\ud800"`` ended the run with an INTERNALERROR. A worker sends
them through ``textcodec.carried``, flagged when a string was rewritten; the controller restores
them before anything reads them.
"""

from __future__ import annotations

from typing import Any

from pytest_slam.util import textcodec

# Set beside what a worker sends when ``textcodec.carried`` rewrote a string of it.
CARRIED = "slam_text_carried"


def carried(data: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """``data`` as a worker sends it, and whether the controller must restore it."""
    out: dict[str, Any]
    out, changed = textcodec.carried(data)
    return out, changed


def sent(report: dict[str, Any]) -> dict[str, Any]:
    """A serialized report as a worker sends it (flagged when a string of it was rewritten)."""
    data, changed = carried(report)
    if changed:
        data[CARRIED] = True
    return data


def received(data: dict[str, Any]) -> None:
    """A report's data as the worker had it, restored in place (``sent`` undone)."""
    if data.pop(CARRIED, False):
        restored = textcodec.uncarried(data)
        data.clear()
        data.update(restored)


def uncarried(data: dict[str, Any]) -> dict[str, Any]:
    """A payload that ``carried`` rewrote, as it was."""
    out: dict[str, Any] = textcodec.uncarried(data)
    return out
