"""The golden store: the reference model's answers, committed so CI compares without an API key.

One job per module: ``keys`` (which requests count as the same), ``redact`` (no secret is ever
written), ``fileformat`` (the JSON file and its errors), ``store`` (lookup, record, flush under a
lock, stale and prune), ``stale`` (the report a run leaves for ``slam golden prune``),
``importers`` (logged traffic into goldens), ``merge`` (files recorded apart, into the one a
serial run writes), ``stats`` and ``cli_commands``.
Nothing is imported here, so importing the package costs nothing.
"""
