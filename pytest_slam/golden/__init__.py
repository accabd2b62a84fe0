"""The golden store: the reference model's answers, committed so CI compares without an API key.

One job per module: ``keys`` (which requests count as the same), ``secrets`` (nothing secret is
written), ``fileformat`` (the JSON file and its errors), ``store`` (lookup, record, flush under a
lock, stale and prune), ``importers`` (logged traffic into goldens), ``stats`` and ``cli_commands``.
Nothing is imported here, so importing the package costs nothing.
"""
