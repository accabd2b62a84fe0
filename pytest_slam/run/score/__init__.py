"""After a test's call, what the swap concludes: each call paired with its golden answer
(``pairing.py``), each test's scoring plan (``plans.py``) and scorer (``scoring.py``), the judge
model and its cached verdicts (``judging.py``), the scores and budgets (``checks.py``) and the
test's verdict over its repeats (``verdict.py``). Imports no other part of run/.
"""
