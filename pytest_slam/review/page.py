"""The review page: one self-contained HTML file (inline CSS and script, no CDN, works offline).

Only the pairs still to review are in it, each with an opaque id; no model name, test parameter or
golden path reaches the page, so the reviewer cannot tell which answer is the reference's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from jinja2 import Environment, PackageLoader, Template, select_autoescape
from markupsafe import Markup

from pytest_slam.review.pairs import ReviewPair
from pytest_slam.review.safe_markdown import render
from pytest_slam.util.textcodec import visible


@dataclass
class Shown:
    """What the page shows of a pair: text already rendered to safe HTML, answers as A and B."""

    id: str
    test: str
    messages: list[tuple[str, Markup]]
    a: Markup
    b: Markup


def shown(pair: ReviewPair) -> Shown:
    """Every text as ``textcodec.visible`` writes it: a bidi override is a marker on both sides."""
    cand, ref = Markup(render(visible(pair.candidate))), Markup(render(visible(pair.reference)))
    a, b = (cand, ref) if pair.candidate_is_a else (ref, cand)
    messages = [(m["role"], Markup(render(visible(m["text"])))) for m in pair.messages]
    test = pair.tests[0].split("[", 1)[0] if pair.tests else ""
    return Shown(pair.id, test, messages, a, b)


@cache
def _template() -> Template:
    env = Environment(
        loader=PackageLoader("pytest_slam.review", "templates"),
        autoescape=select_autoescape(["html", "j2"]),
    )
    return env.get_template("review.html.j2")


def render_page(todo: list[ReviewPair], reviewed: int, total: int, nonce: str) -> str:
    """The page for the pairs still to review; ``reviewed`` of ``total`` are done already."""
    return _template().render(
        pairs=[shown(p) for p in todo], reviewed=reviewed, total=total, nonce=nonce
    )
