"""Support-ticket triage: an example LLM feature, written the way a product team ships one.

It calls GPT-4o through the OpenAI SDK with a client built at import time, and knows nothing of
pytest-slam. Its tests, in ../tests, are opted in to the plugin and run once per candidate model.
"""

from .triage import CATEGORIES, URGENCIES, Triage, TriageError, draft_reply, sentiment, triage

__all__ = ["CATEGORIES", "URGENCIES", "Triage", "TriageError", "draft_reply", "sentiment", "triage"]
