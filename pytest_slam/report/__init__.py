"""Reports: the per-model swap verdict, its renderings (terminal, JSON, HTML, Markdown, JUnit),
the baseline comparison and the CI gate.

Submodules are imported where they are used; importing this package loads nothing heavy.
"""
