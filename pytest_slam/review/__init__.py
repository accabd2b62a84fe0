"""Blind human review: a reviewer judges a candidate's answer against the reference's, unlabelled.

The strongest quality evidence the SLaM study used. One job per module: ``pairs`` (what to review,
from the JSON report and the goldens), ``verdicts`` (the committed sidecar files beside the goldens),
``markdown`` (answers rendered safely), ``page`` and ``server`` (the local review page), ``stats``
(win/tie/loss with intervals, and how far scorers and the judge agree with people), ``commands``
(``slam review``). Nothing is imported here, so importing the package costs nothing.
"""
