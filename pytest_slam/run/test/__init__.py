"""One swapped test, from collection to its Outcome: which tests take part (``optin.py``,
``selection.py``), the test's entry from its fixture to its report (``entry.py``), the answers and
judge verdicts fetched ahead of it (``fetching.py``, ``judge_ahead.py``), whether it mocked its
calls (``mocks.py``), Hypothesis settings (``hypothesis_support.py``) and its Outcome
(``outcomes.py``). Imported by start/ and end/; imports only wired/ and score/.
"""
