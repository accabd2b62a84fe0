"""The run's swap, wired (``wiring.py``: reference service, targets, limiters, answers fetched
ahead, cache, router, proxy, each built with its collaborators) and the objects the ``slm_model``
and ``gpt4_reference`` fixtures hand a test (``fixtures.py``). Imports only score/.
"""
