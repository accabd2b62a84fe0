"""The run started and handed to pytest: ``startup.py`` builds every part at configure time and the
session (``session.py``, the run's state and the entry points the hooks hand off to) last, with its
managed engines (``engine_start.py``) and what the run says while it works (``progress.py``); the
hooks that need the session live here too: repeats around a test (``repeat.py``) and xdist's
(``xdist.py``). The top sub-wing of run/: it imports the others, none imports it.
"""
