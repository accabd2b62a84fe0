"""Metrics: latency definitions and summaries, token counting, cost, GPU energy, budgets.

Each submodule has one job and imports its optional dependency (tiktoken, nvidia-ml-py) only
when first used, so importing this package costs nothing.
"""
