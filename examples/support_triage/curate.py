"""Write curated_answers.jsonl: the answers a careful human expects for each request the tests make.

No one here can call GPT-4, so the reference is "curated": these answers are written by hand, and the
golden file says so. The requests come from the product's own message builders, so they are exactly
what the product sends. Regenerate and import after changing a prompt:

    python curate.py && slam golden import curated_answers.jsonl --module tests/test_triage.py
"""

import json

from support_triage.triage import reply_messages, sentiment_messages, triage_messages
from tests.test_triage import TICKETS

CURATED = [
    (
        sentiment_messages("I love the new dashboard, thank you so much for the quick fix!"),
        12,
        "Positive.",
    ),
    (
        sentiment_messages(
            "This is the third time my invoice is wrong. I am furious and want to cancel."
        ),
        12,
        "Negative.",
    ),
    (
        triage_messages(TICKETS["double_charge"]),
        120,
        {
            "category": "billing",
            "urgency": "medium",
            "summary": "Customer was charged twice this month and asks for one payment to be refunded.",
        },
    ),
    (
        triage_messages(TICKETS["outage"]),
        120,
        {
            "category": "technical",
            "urgency": "high",
            "summary": "The whole team cannot log in since 9am because of an error 500.",
        },
    ),
    (
        triage_messages(TICKETS["password"]),
        120,
        {
            "category": "account",
            "urgency": "low",
            "summary": "Customer asks how to change the email address on the account.",
        },
    ),
    (
        reply_messages("Maria", "How do I export my data to CSV?"),
        80,
        "Hi Maria, thanks for reaching out! You can export your data from Settings > Data > Export "
        "and choose CSV as the format. Let me know if anything is unclear.",
    ),
]


def line(messages: list[dict], max_tokens: int, answer: object) -> str:
    text = answer if isinstance(answer, str) else json.dumps(answer)
    request = {"model": "gpt-4o", "messages": messages, "temperature": 0, "max_tokens": max_tokens}
    response = {
        "object": "chat.completion",
        "model": "curated",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
        ],
    }
    return json.dumps({"request": request, "response": response}, ensure_ascii=False)


if __name__ == "__main__":
    with open("curated_answers.jsonl", "w", encoding="utf-8") as fh:
        fh.writelines(line(*entry) + "\n" for entry in CURATED)
    print(f"wrote {len(CURATED)} curated answers to curated_answers.jsonl")
