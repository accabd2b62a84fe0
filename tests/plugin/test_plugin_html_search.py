"""The id pytest prints finds its row in the HTML report (issue 44).

A real run (pytester) of a parametrized test against a loopback candidate, its report opened in
headless Chromium with the search and the test filter set to ``test_ticket[good-630]``, as pytest
printed it (the page shows ``[630]`` and the model in a column of its own).
"""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from html_helpers import chromium
from slam_helpers import needs_chromium, write_pyproject

from pytest_slam.testing import FakeOpenAI

SUITE = """
import openai, pytest

pytestmark = pytest.mark.slm

@pytest.mark.parametrize("ticket", [630, 631])
def test_ticket(ticket):
    r = openai.OpenAI().chat.completions.create(
        model="gpt-4", messages=[{"role": "user", "content": f"Ticket {ticket}"}])
    assert r.choices[0].message.content
"""


def rows(dom: str) -> list[str]:
    """The drawn table's rows: each one's first cell (the test as the page names it)."""
    body = dom.split('id="rows"', 1)[1] if 'id="rows"' in dom else dom
    return re.findall(r"<tr data-index=\"\d+\"><td class=\"text\">(?:<a [^>]*>)?([^<]*)", body)


@needs_chromium
def test_the_printed_pytest_id_finds_its_row(pytester: pytest.Pytester, tmp_path) -> None:
    pytester.makepyfile(test_tickets=SUITE)
    with FakeOpenAI("Ticket filed") as fake:
        write_pyproject(pytester, fake.base_url, name="good")
        result = pytester.runpytest("-p", "no:cacheprovider", "--slm-html=r.html", "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["test_tickets.py::test_ticket[[]good-630[]] PASSED*"])  # printed
    page = (pytester.path / "r.html").as_uri()
    printed = "test_ticket[good-630]"
    for field in ("q", "test"):
        dom = chromium(f"{page}#{field}={quote(printed)}", "--dump-dom", tmp_path=tmp_path)
        assert 'data-ready="1"' in dom
        assert rows(dom) == ["test_tickets.py::test_ticket[630]"], (field, rows(dom))
    dom = chromium(f"{page}#q={quote('good-63')}", "--dump-dom", tmp_path=tmp_path)
    assert sorted(rows(dom)) == [
        "test_tickets.py::test_ticket[630]",
        "test_tickets.py::test_ticket[631]",
    ]
