"""A test whose candidate calls all failed still asked for its golden entries: they are not stale.

The product swallows the candidate's error (a fallback answer), so the test passes as
``not_swapped``; its requests never reached the pairing, yet a prune must not remove the answers
it recorded. Real pytest runs (pytester), as in test_plugin_golden_stale.py.
"""

from __future__ import annotations

from plugin_golden_helpers import GOLDEN, QUESTIONS, SUITE, entries, run, write_project

from pytest_slam.testing import FakeOpenAI

FORGIVING = """
from openai import OpenAI

client = OpenAI(max_retries=0)

def ask(question):
    try:
        r = client.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": question}], temperature=0)
    except Exception:
        return "Sorry, please try again later."
    return r.choices[0].message.content
"""


def test_entries_of_a_test_whose_candidate_failed_are_not_pruned(pytester, fake_gpt4):
    pytester.makepyfile(product=FORGIVING, test_product=SUITE.format(questions=QUESTIONS))
    with FakeOpenAI("mini says hi", model="gpt-4o-mini") as mini:
        write_project(pytester, fake_gpt4, mini)
        run(pytester, "--slm-record=new").assert_outcomes(passed=3)
    path = pytester.path / GOLDEN / "test_product.json"
    recorded = set(entries(path))
    assert len(recorded) == 3

    with FakeOpenAI("never", model="gpt-4o-mini", fail=[500] * 3) as broken:
        write_project(pytester, fake_gpt4, broken)
        result = run(pytester, "--slm-prune", "--slm-report=r.json")
        assert broken.hits == 3
    result.assert_outcomes(passed=3)  # the product's fallback: every test is not swapped
    assert "stale golden entr" not in result.stdout.str()
    assert set(entries(path)) == recorded
