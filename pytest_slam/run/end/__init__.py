"""The end of a run: ``finish.py``'s three typed stages, collect (``collect.py``) -> judge
(``judge_stage.py``) -> publish (``publish.py``), from what the session hands over
(``handover.py`` builds ``ended.py``'s ``Ended``), with the per-test accounting
(``accounting.py``), the golden entries no test asked for (``unvisited.py``), the summary and the
gate's last line (``summary.py``, ``lastline.py``) and the one exit-status rule
(``exitstatus.py``). Never imports the session (pyproject's import-linter contract).
"""
