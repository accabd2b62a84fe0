"""What a project tells a run: the ``--slm-*`` options shared by the plugin and the ``slam`` CLI
(``options.py``), ``[tool.slam]``'s tables parsed once (``tables.py``) and the hooks a
``conftest.py`` implements (``hookspecs.py``). Imports no other part of run/.
"""
