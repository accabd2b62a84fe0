"""Triage a support ticket into JSON, tell its sentiment, and draft a reply (streamed)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from openai import OpenAI

MODEL = "gpt-4o"
CATEGORIES = ("billing", "technical", "account", "other")
URGENCIES = ("low", "medium", "high")

client = OpenAI()  # built at import time, from OPENAI_API_KEY / OPENAI_BASE_URL

TRIAGE_PROMPT = (
    "You triage customer support tickets. Answer with one JSON object and nothing else, with keys "
    '"category" (one of: billing, technical, account, other), "urgency" (one of: low, medium, '
    'high) and "summary" (one short sentence).'
)
REPLY_PROMPT = (
    "You are a friendly support agent. Write a short reply (at most three sentences) to the "
    "customer, greeting them by name."
)


class TriageError(ValueError):
    """The model's answer could not be used as a triage."""


@dataclass
class Triage:
    category: str
    urgency: str
    summary: str


def triage_messages(ticket: str) -> list[dict[str, str]]:
    return [{"role": "system", "content": TRIAGE_PROMPT}, {"role": "user", "content": ticket}]


def triage(ticket: str) -> Triage:
    response = client.chat.completions.create(
        model=MODEL, messages=triage_messages(ticket), temperature=0, max_tokens=120
    )
    return parse_triage(response.choices[0].message.content or "")


def parse_triage(text: str) -> Triage:
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise TriageError(f"no JSON object in the model's answer: {text[:200]!r}")
    try:
        data = json.loads(match.group(0))
    except json.JSONDecodeError as exc:
        raise TriageError(f"the model's JSON does not parse ({exc}): {text[:200]!r}") from exc
    category = str(data.get("category", "")).lower()
    urgency = str(data.get("urgency", "")).lower()
    if category not in CATEGORIES or urgency not in URGENCIES:
        raise TriageError(f"category/urgency out of range: {category!r}, {urgency!r}")
    return Triage(category, urgency, str(data.get("summary", "")))


def sentiment_messages(message: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"Is this review positive or negative? '{message}'"}]


def sentiment(message: str) -> str:
    response = client.chat.completions.create(
        model=MODEL, messages=sentiment_messages(message), temperature=0, max_tokens=12
    )
    answer = (response.choices[0].message.content or "").lower()
    if "negative" in answer:
        return "negative"
    if "positive" in answer:
        return "positive"
    return "unknown"


def reply_messages(customer: str, ticket: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": REPLY_PROMPT},
        {"role": "user", "content": f"Customer name: {customer}\nTicket: {ticket}"},
    ]


def draft_reply(customer: str, ticket: str) -> str:
    """Streamed, as the product shows the reply to the agent while it is written."""
    stream = client.chat.completions.create(
        model=MODEL,
        messages=reply_messages(customer, ticket),
        temperature=0,
        max_tokens=80,
        stream=True,
    )
    return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
